package store

import "strings"

// Page is a LIMIT and OFFSET of a list query.
type Page struct {
	Limit  int64
	Offset int64
}

// EscapeLike escapes s for use inside a LIKE pattern with the default escape
// character: %, _ and \ then match themselves.
func EscapeLike(s string) string {
	return likeEscaper.Replace(s)
}

var likeEscaper = strings.NewReplacer(`\`, `\\`, `%`, `\%`, `_`, `\_`)
