package store

import (
	"context"
	"errors"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// errCaptured stops a generated query at its Query call (statement).
var errCaptured = errors.New("store: statement captured")

// statement records the SQL and arguments a generated query sends, without
// sending them. sqlc has no way to put a query in a batch or a pipeline
// with others; capturing its statement keeps the SQL in sql/queries,
// checked against the schema by sqlc, while the store sends it in a batch
// (ClaimEvents) or ahead of another statement (WithClaimTx,
// pipelined_tx.go).
type statement struct {
	sql  string
	args []any
}

func (s *statement) Exec(_ context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	s.sql, s.args = sql, args
	return pgconn.CommandTag{}, errCaptured
}

func (s *statement) Query(_ context.Context, sql string, args ...any) (pgx.Rows, error) {
	s.sql, s.args = sql, args
	return nil, errCaptured
}

func (s *statement) QueryRow(_ context.Context, sql string, args ...any) pgx.Row {
	s.sql, s.args = sql, args
	return errRow{errCaptured}
}
