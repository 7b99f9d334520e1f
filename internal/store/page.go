package store

import (
	"strings"

	"github.com/rustbill/paymentd/internal/paging"
)

// Page is a LIMIT and OFFSET of a list query.
type Page struct {
	Limit  int64
	Offset int64
}

// PageOf is the LIMIT and OFFSET of a page the caller has normalized
// (paging.Normalize).
func PageOf(p paging.Page) Page {
	return Page{Limit: p.Limit(), Offset: p.Offset()}
}

// EscapeLike escapes s for use inside a LIKE pattern with the default escape
// character: %, _ and \ then match themselves.
func EscapeLike(s string) string {
	return likeEscaper.Replace(s)
}

var likeEscaper = strings.NewReplacer(`\`, `\\`, `%`, `\%`, `_`, `\_`)
