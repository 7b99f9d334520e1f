package text

import (
	"strings"
	"unicode/utf8"
)

// Clip returns s as PostgreSQL's text can hold it and a person can read it,
// in at most n bytes plus "…": invalid UTF-8 and NUL become "?", and a cut
// never splits a character. An identifier must never be clipped (it would
// no longer name the thing); refuse one that does not fit instead.
func Clip(s string, n int) string {
	if !utf8.ValidString(s) {
		s = strings.ToValidUTF8(s, "?")
	}
	if strings.IndexByte(s, 0) >= 0 {
		s = strings.ReplaceAll(s, "\x00", "?")
	}
	if len(s) <= n {
		return s
	}
	cut := max(n, 0)
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}
