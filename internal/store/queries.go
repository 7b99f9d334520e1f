package store

import (
	"context"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/rustbill/paymentd/internal/store/dbsqlc"
)

// Queries are sqlc's generated queries (sql/queries) with the store's
// errors: every error one of them returns has been through MapError, so
// errors.Is(err, ErrNotFound) and the other kinds hold on it (a :one query
// that finds no row answers ErrNotFound). A query that needs nothing else —
// no conversion of its row or its arguments, no second query — is called
// through Q, not wrapped in a function of its own:
//
//	p, err := store.Q(db).GetPayment(ctx, id)
//	r, err := store.Q(tx).NoteRefund(ctx, store.NoteRefundParams{ID: id, Error: why, UpdatedAt: at})
//
// What the query does, and when it finds no row, is said on the query in
// sql/queries, which sqlc copies onto the generated method. Its row and
// parameter types are re-exported by the store as aliases (store.Payment,
// store.SetOrderStatusParams, …), so nothing above the store imports
// dbsqlc (internal/architecture's TestOnlyTheStoreImportsDbsqlc), and a
// store function that only hands a query on fails
// TestTheStoreWrapsNoQueryItOnlyHandsOn.
type Queries struct {
	*dbsqlc.Queries
}

// Q is the generated queries on db (the pool, a pgx.Tx, a pipelined
// transaction: anything that runs a statement), their errors mapped.
func Q(db dbsqlc.DBTX) Queries {
	return Queries{dbsqlc.New(mapped{db})}
}

// WithTx is q on tx, its errors mapped as well (it hides the generated
// WithTx, which would hand out queries that do not map).
func (Queries) WithTx(tx pgx.Tx) Queries { return Q(tx) }

// mapped is the dbsqlc.DBTX of Q: the executor's own, with every error it
// hands back — Exec's, Query's, a row's Scan, the rows' Scan and Err —
// through MapError. The generated code returns those errors as they come.
type mapped struct{ db dbsqlc.DBTX }

func (m mapped) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	tag, err := m.db.Exec(ctx, sql, args...)
	return tag, MapError(err)
}

func (m mapped) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	rows, err := m.db.Query(ctx, sql, args...)
	if err != nil {
		return nil, MapError(err)
	}
	return mappedRows{rows}, nil
}

func (m mapped) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	return mappedRow{m.db.QueryRow(ctx, sql, args...)}
}

// mappedRow is a row whose Scan maps its error (pgx.ErrNoRows included:
// ErrNotFound).
type mappedRow struct{ row pgx.Row }

func (r mappedRow) Scan(dest ...any) error { return MapError(r.row.Scan(dest...)) }

// mappedRows are rows whose Scan and Err map their errors; a statement's
// own error (a constraint, a lock timeout) arrives through Err once Next
// has read to it.
type mappedRows struct{ pgx.Rows }

func (r mappedRows) Scan(dest ...any) error { return MapError(r.Rows.Scan(dest...)) }

func (r mappedRows) Err() error { return MapError(r.Rows.Err()) }
