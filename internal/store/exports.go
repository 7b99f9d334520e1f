package store

import (
	"context"
	"errors"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/rustbill/paymentd/internal/store/dbsqlc"
)

// ExportPayment is one row of the payments export; ExportPaymentFilter
// selects them (a created_at range and the list's filters).
type (
	ExportPayment       = dbsqlc.ExportPaymentsRow
	ExportPaymentFilter = dbsqlc.ExportPaymentsParams
	ExportRefund        = dbsqlc.ExportRefundsRow
	ExportRefundFilter  = dbsqlc.ExportRefundsParams
)

// EachExportPayment calls fn with every payment f selects, oldest first, one
// row at a time as it arrives from the database: the rows are never held
// together, so an export of millions costs one row of memory (and the
// connection's buffers). fn's error stops the read and is returned as it is.
func EachExportPayment(ctx context.Context, db DB, f ExportPaymentFilter, fn func(ExportPayment) error) error {
	return eachRow(ctx, db, func(q *dbsqlc.Queries) error {
		_, err := q.ExportPayments(ctx, f)
		return err
	}, fn)
}

// EachExportRefund is EachExportPayment for refunds.
func EachExportRefund(ctx context.Context, db DB, f ExportRefundFilter, fn func(ExportRefund) error) error {
	return eachRow(ctx, db, func(q *dbsqlc.Queries) error {
		_, err := q.ExportRefunds(ctx, f)
		return err
	}, fn)
}

// errCaptured stops a generated query at its Query call (statement).
var errCaptured = errors.New("store: statement captured")

// statement records the SQL and arguments a generated query sends, without
// sending them. sqlc has no row iterator (a :many query collects every row
// in a slice) and no way to put a query in a pipeline with others;
// capturing its statement keeps the SQL in sql/queries, checked against the
// schema by sqlc, while eachRow reads the rows one by one and a pipelined
// DB sends it ahead of another statement (pipelined_tx.go).
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

// eachRow runs the statement call sends and scans each row into R by
// position: R is the generated row type, whose fields are the statement's
// columns in order.
func eachRow[R any](ctx context.Context, db DB, call func(*dbsqlc.Queries) error, fn func(R) error) error {
	var st statement
	if err := call(dbsqlc.New(&st)); !errors.Is(err, errCaptured) || st.sql == "" {
		return errors.Join(errors.New("store: the generated query sent no statement"), err)
	}
	rows, err := db.Query(ctx, st.sql, st.args...)
	if err != nil {
		return MapError(err)
	}
	defer rows.Close()
	for rows.Next() {
		r, err := pgx.RowToStructByPos[R](rows)
		if err != nil {
			return MapError(err)
		}
		if err := fn(r); err != nil {
			return err
		}
	}
	return MapError(rows.Err())
}
