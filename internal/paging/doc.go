// Package paging is the one page-number paging of every List operation: the
// bounds a request's page and page size must keep (docs/decisions.md) and
// the page a list answers with. It is a leaf: domain packages use it without
// importing one another for it.
package paging
