package text_test

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/require"

	"github.com/rustbill/paymentd/internal/text"
)

func TestClipKeepsWhatTextCanHoldAndNeverSplitsACharacter(t *testing.T) {
	t.Parallel()
	require.Equal(t, "short", text.Clip("short", 10))
	require.Equal(t, "abc…", text.Clip("abcdef", 3))
	require.Equal(t, "a?b", text.Clip("a\x00b", 10), "NUL cannot go into a text column")
	require.Equal(t, "a?b", text.Clip("a\xffb", 10), "nor invalid UTF-8")
	// "退款成功" is four 3-byte characters: a cut at 4 bytes keeps one.
	require.Equal(t, "退…", text.Clip("退款成功", 4))
	require.Equal(t, "…", text.Clip("退款成功", 2))
	require.Equal(t, "", text.Clip("", 0))
}

func FuzzClipIsValidUTF8WithoutNULAndBounded(f *testing.F) {
	f.Add("退款成功", 4)
	f.Add("a\x00\xff\xfe", 1)
	f.Fuzz(func(t *testing.T, s string, n int) {
		n = n % 512
		if n < 0 {
			n = -n
		}
		got := text.Clip(s, n)
		require.True(t, utf8.ValidString(got))
		require.NotContains(t, got, "\x00")
		require.LessOrEqual(t, len(strings.TrimSuffix(got, "…")), max(n, len(s)))
		if len(got) > n {
			require.True(t, strings.HasSuffix(got, "…"))
			require.LessOrEqual(t, len(got), n+len("…"))
		}
	})
}
