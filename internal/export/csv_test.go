package export

import (
	"strings"
	"testing"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/stretchr/testify/require"
)

func TestCellQuotesWhatASpreadsheetWouldRun(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"=1+1":       "'=1+1",
		"+1":         "'+1",
		"-1":         "'-1",
		"@SUM(A1)":   "'@SUM(A1)",
		"\t=1":       "'\t=1",
		"\r=1":       "'\r=1",
		"\tplain":    "'\tplain",
		"":           "",
		"12.30":      "12.30",
		"a=1":        "a=1",
		"'quoted":    "'quoted",
		"2026-05-01": "2026-05-01",
		" ":          " ",
		"\u200b":     "\u200b",
		"x -1":       "x -1",
	} {
		require.Equal(t, want, Cell(in), "%q", in)
	}
}

// A formula behind what a spreadsheet drops or a reader does not see
// (spaces of every kind, zero-width and format characters, the byte order
// mark), or spelt with the fullwidth or small forms an input method types,
// is still one.
func TestCellLooksPastInvisibleCharactersAndAtFullwidthForms(t *testing.T) {
	t.Parallel()
	for _, in := range []string{
		" =1+1",        // the probe's trade_no
		"   +1",        // several spaces
		"\n=1",         // line feed
		"\v@x", "\f-1", // vertical tab, form feed
		"\u00a0=1",             // no-break space
		"\u3000=1",             // ideographic space
		"\u2003=1", "\u202f=1", // em space, narrow no-break space
		"\u200b=1",             // zero width space
		"\u200c=1", "\u200d=1", // zero width non-joiner, joiner
		"\u2060=1",             // word joiner
		"\ufeff=1",             // byte order mark
		"\u200e=1", "\u202e=1", // left-to-right mark, right-to-left override
		"\u00ad=1",           // soft hyphen
		"\u034f=1",           // combining grapheme joiner
		"\ufe0f=1",           // variation selector
		"\u3164=1",           // Hangul filler
		"\x00=1", "\u0085=1", // controls
		" \u200b\ufeff\u3000=1", // a mix
		"\uff1d1+1", "\uff0b1",  // fullwidth ＝ ＋
		"\uff0d1", "\uff20SUM", // fullwidth － ＠
		"\ufe661", "\ufe62SUM", // small ﹦ ﹢
		"\ufe631", "\ufe6bx", // small ﹣ ﹫
		" \uff1dHYPERLINK(\"x\")", // both
	} {
		require.Equal(t, "'"+in, Cell(in), "%q", in)
	}
	for _, in := range []string{" a=1", "\u200bplain", "\ufeff12.30", "\u00a0", "x\uff1d1", "\u2212"} {
		require.Equal(t, in, Cell(in), "%q is no formula", in)
	}
}

// FuzzCell: Cell adds one quote or nothing, and never leaves unquoted a
// cell whose first printable character, past anything that is not
// printable, starts a formula.
func FuzzCell(f *testing.F) {
	for _, s := range []string{"", "=1", " =1+1", "\u200b=1", "\ufeff@x", "\uff1d1", "a", "12.30", "\t", "\xff=1", "\u00a0\u3000-1"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got := Cell(s)
		if got != s && got != "'"+s {
			t.Fatalf("Cell(%q) = %q: neither the cell nor the cell behind one quote", s, got)
		}
		if got == s && s != "" && strings.ContainsRune("\t\r", rune(s[0])) {
			t.Fatalf("Cell(%q) left a leading tab or carriage return unquoted", s)
		}
		rest := strings.TrimLeftFunc(s, func(r rune) bool { return r != utf8.RuneError && (!unicode.IsPrint(r) || r == ' ') })
		if r, _ := utf8.DecodeRuneInString(rest); got == s && strings.ContainsRune("=+-@＝＋－＠", r) {
			t.Fatalf("Cell(%q) left a formula unquoted", s)
		}
	})
}

// A negative amount the export writes itself (a credit line's) stays a
// number; the same text in any other column is quoted.
func TestANegativeAmountIsANumberOnlyInAnAmountColumn(t *testing.T) {
	t.Parallel()
	var b strings.Builder
	w := newRowWriter(&b, time.UTC)
	w.amounts = map[int]bool{1: true}
	require.NoError(t, w.write("-5.00", "-5.00", "-5.00+1", "-", "-1.", "--1"))
	w.amounts = map[int]bool{0: true, 1: true, 2: true, 3: true}
	require.NoError(t, w.write("-1.5", "-1+cmd", "-", "-.5"))
	require.NoError(t, w.flush())
	require.Equal(t, "'-5.00,-5.00,'-5.00+1,'-,'-1.,'--1\r\n-1.5,'-1+cmd,'-,'-.5\r\n", b.String())
}
