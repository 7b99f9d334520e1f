// Package sql holds the service's SQL: goose migrations under migrations/ and
// sqlc queries under queries/. It exists as a Go package only to embed the
// migrations into the binary, so a deployed paymentd needs no files beside it.
package sql

import "embed"

// Migrations is the numbered goose migration set, at "migrations/*.sql".
//
//go:embed migrations/*.sql
var Migrations embed.FS
