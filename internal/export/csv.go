package export

import (
	"encoding/csv"
	"io"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/google/uuid"
)

// Cell is s made safe against formula injection: a single quote in front of
// a cell a spreadsheet would run as a formula (see the package comment).
func Cell(s string) string {
	if s == "" {
		return s
	}
	if s[0] == '\t' || s[0] == '\r' {
		return "'" + s
	}
	// What a spreadsheet (or the person who pastes the cell) drops or
	// does not see comes off first: a leading " =1+1" or "\u200b=1+1"
	// is still a formula to some.
	rest := strings.TrimLeftFunc(s, invisible)
	if rest == "" {
		return s
	}
	r, _ := utf8.DecodeRuneInString(rest)
	if strings.ContainsRune(formulaStarts, r) {
		return "'" + s
	}
	return s
}

// negativeDecimal reports whether s is a negative decimal number and
// nothing else (-5.00, a credit line's amount): a spreadsheet reads it as
// the number, not as a formula, and a quote would make it text that no
// sum counts. Only the columns the export fills with its own amounts
// (rowWriter.amounts) take it; text a client or a gateway wrote is quoted
// by Cell whatever it holds.
func negativeDecimal(s string) bool {
	if len(s) < 2 || s[0] != '-' {
		return false
	}
	digits, dot := 0, false
	for _, c := range s[1:] {
		switch {
		case c >= '0' && c <= '9':
			digits++
		case c == '.' && !dot && digits > 0:
			dot = true
		default:
			return false
		}
	}
	return digits > 0 && s[len(s)-1] != '.'
}

// formulaStarts are the characters a formula starts with: =, +, -, @ and
// their fullwidth (＝＋－＠) and small (﹦﹢﹣﹫) forms, which input methods
// type and some spreadsheets read as the ASCII ones.
const formulaStarts = "=+-@\uff1d\uff0b\uff0d\uff20\ufe66\ufe62\ufe63\ufe6b"

// invisible reports a character that shows as nothing or as blank space:
// Unicode white space (U+00A0, U+3000, …), controls, format characters
// (U+200B–U+200F, U+2060, the byte order mark U+FEFF, …), anything else
// that is no letter, mark, number, punctuation or symbol (private use, not
// assigned), variation selectors and the other default-ignorable
// characters (U+034F, the Hangul fillers). Quoting a cell too many costs a
// quote; one too few, a formula.
func invisible(r rune) bool {
	return unicode.IsSpace(r) || !unicode.IsGraphic(r) ||
		unicode.In(r, unicode.Variation_Selector, unicode.Other_Default_Ignorable_Code_Point)
}

// rowWriter writes CSV records of cells, every cell through Cell.
type rowWriter struct {
	w   *csv.Writer
	loc *time.Location
	buf []string
	// amounts are the columns (by index) holding the export's own money
	// amounts, written as numbers when negative (negativeDecimal).
	amounts map[int]bool
	// records is the number written, the header row included.
	records int64
}

func newRowWriter(w io.Writer, loc *time.Location) *rowWriter {
	cw := csv.NewWriter(w)
	cw.UseCRLF = true
	return &rowWriter{w: cw, loc: loc}
}

// write writes one record; the slice is reused for the next.
func (r *rowWriter) write(cells ...string) error {
	r.buf = r.buf[:0]
	for i, c := range cells {
		if r.amounts[i] && negativeDecimal(c) {
			r.buf = append(r.buf, c) // an amount of the export's own, a number
			continue
		}
		r.buf = append(r.buf, Cell(c))
	}
	r.records++
	return r.w.Write(r.buf)
}

func (r *rowWriter) flush() error {
	r.w.Flush()
	return r.w.Error()
}

// time is t in the export's zone, RFC 3339 to the second.
func (r *rowWriter) time(t time.Time) string {
	return t.In(r.loc).Format(time.RFC3339)
}

// optTime is time for a time that may be unset: empty when nil.
func (r *rowWriter) optTime(t *time.Time) string {
	if t == nil {
		return ""
	}
	return r.time(*t)
}

// optID is an optional id: empty when nil.
func optID(id *uuid.UUID) string {
	if id == nil {
		return ""
	}
	return id.String()
}
