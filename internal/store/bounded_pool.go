package store

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// ErrPoolBusy is returned when no pooled connection became free within
// [db].acquire_timeout_secs. The database is reachable; the pool is in use.
// The edge answers Unavailable, "database busy, retry".
var ErrPoolBusy = errors.New("store: no pooled connection free within [db].acquire_timeout_secs")

// BoundedPool is a *pgxpool.Pool whose every statement, query and
// transaction waits at most timeout for a connection.
//
// pgxpool waits for a connection for as long as the caller's context lives
// and uses that one context both to acquire and to run the statement, so a
// bound on acquiring cannot be put on the context without also cutting
// short the statement. BoundedPool acquires under its own timeout and then
// runs on the caller's context, releasing the connection when the rows are
// read, the row scanned or the transaction ended — what pgxpool's own
// wrappers do.
type BoundedPool struct {
	pool    *pgxpool.Pool
	timeout time.Duration
}

var _ DB = (*BoundedPool)(nil)

// NewBoundedPool bounds acquiring a connection of pool by timeout.
func NewBoundedPool(pool *pgxpool.Pool, timeout time.Duration) *BoundedPool {
	return &BoundedPool{pool: pool, timeout: timeout}
}

func (p *BoundedPool) acquire(ctx context.Context) (*pgxpool.Conn, error) {
	actx, cancel := context.WithTimeoutCause(ctx, p.timeout, ErrPoolBusy)
	defer cancel()
	c, err := p.pool.Acquire(actx)
	if err != nil {
		if ctx.Err() == nil && errors.Is(context.Cause(actx), ErrPoolBusy) {
			return nil, ErrPoolBusy
		}
		return nil, err
	}
	return c, nil
}

// Exec runs sql on a pooled connection.
func (p *BoundedPool) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	c, err := p.acquire(ctx)
	if err != nil {
		return pgconn.CommandTag{}, err
	}
	defer c.Release()
	return c.Exec(ctx, sql, args...)
}

// Query runs sql on a pooled connection, released when the rows are closed
// or read to the end.
func (p *BoundedPool) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	c, err := p.acquire(ctx)
	if err != nil {
		return nil, err
	}
	rows, err := c.Query(ctx, sql, args...)
	if err != nil {
		c.Release()
		return nil, err
	}
	return &boundedRows{Rows: rows, c: c}, nil
}

// QueryRow runs sql on a pooled connection, released by Scan.
func (p *BoundedPool) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	c, err := p.acquire(ctx)
	if err != nil {
		return errRow{err}
	}
	return &boundedRow{row: c.QueryRow(ctx, sql, args...), c: c}
}

// Begin starts a transaction on a pooled connection, released by Commit
// or Rollback.
func (p *BoundedPool) Begin(ctx context.Context) (pgx.Tx, error) {
	c, err := p.acquire(ctx)
	if err != nil {
		return nil, err
	}
	tx, err := c.Begin(ctx)
	if err != nil {
		c.Release()
		return nil, err
	}
	return &boundedTx{Tx: tx, c: c}, nil
}

type boundedRows struct {
	pgx.Rows
	c *pgxpool.Conn
}

func (r *boundedRows) Next() bool {
	if r.Rows.Next() {
		return true
	}
	r.Close()
	return false
}

func (r *boundedRows) Close() {
	r.Rows.Close()
	if r.c != nil {
		r.c.Release()
		r.c = nil
	}
}

type boundedRow struct {
	row pgx.Row
	c   *pgxpool.Conn
}

func (r *boundedRow) Scan(dest ...any) error {
	defer r.c.Release() // also when Scan panics
	return r.row.Scan(dest...)
}

type errRow struct{ err error }

func (r errRow) Scan(...any) error { return r.err }

type boundedTx struct {
	pgx.Tx
	c *pgxpool.Conn
}

func (t *boundedTx) Commit(ctx context.Context) error {
	err := t.Tx.Commit(ctx)
	t.release()
	return err
}

func (t *boundedTx) Rollback(ctx context.Context) error {
	err := t.Tx.Rollback(ctx)
	t.release()
	return err
}

func (t *boundedTx) release() {
	if t.c != nil {
		t.c.Release()
		t.c = nil
	}
}

// SendBatch sends b on a pooled connection, released when the results are
// closed — or, when b begins a transaction (pgx.Batch.BeginTx), when that
// transaction (BatchResults.Tx) ends.
func (p *BoundedPool) SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults {
	c, err := p.acquire(ctx)
	if err != nil {
		return pgx.FailedBatchResults(b, err)
	}
	br := c.SendBatch(ctx, b)
	if tx := br.Tx(); tx != nil {
		return &boundedBatch{BatchResults: br, tx: &boundedTx{Tx: tx, c: c}}
	}
	return &boundedBatch{BatchResults: br, c: c}
}

type boundedBatch struct {
	pgx.BatchResults
	c  *pgxpool.Conn // released by Close; nil when tx holds it
	tx *boundedTx
}

func (b *boundedBatch) Tx() pgx.Tx {
	if b.tx == nil {
		return nil
	}
	return b.tx
}

func (b *boundedBatch) Close() error {
	err := b.BatchResults.Close()
	if b.c != nil {
		b.c.Release()
		b.c = nil
	}
	return err
}
