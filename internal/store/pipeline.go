package store

import (
	"context"
	"errors"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// prelude is a statement a transaction must start with, and the check of
// its result; an error from check refuses the transaction.
type prelude struct {
	sql   string
	args  []any
	check func(pgx.BatchResults) error
}

// withPreludeTx runs fn in a transaction on db that begins with its first
// statement: BEGIN, the preludes and that statement reach the server in
// one batch (one round trip), where WithTx spends one on BEGIN and one on
// each statement; it ends the transaction as WithTx does. A prelude that
// fails its check makes the statement that carried it and every later one
// return its error, and the transaction rolls back whatever fn returns. A transaction in which fn sends nothing
// is never begun. On a pgx.Tx, a savepoint is begun first and the preludes
// travel with the first statement inside it.
//
// fn's transaction carries the preludes on Exec, Query and QueryRow; Begin,
// SendBatch, CopyFrom and Prepare send them alone first. A Row must be
// scanned and Rows closed (the generated queries do) before the next
// statement.
func withPreludeTx(ctx context.Context, db DB, preludes []prelude, fn func(tx pgx.Tx) error) error {
	t := &lazyTx{db: db, preludes: preludes}
	done := false
	defer func() {
		if !done && t.tx != nil { // fn panicked or called runtime.Goexit
			_ = rollback(ctx, t.tx)
		}
	}()
	fnErr := fn(t)
	done = true
	if t.err != nil {
		fnErr = t.err // whatever fn made of it
	}
	if t.tx == nil {
		return fnErr // nothing was sent: nothing to end
	}
	return finish(ctx, t.tx, fnErr)
}

// lazyTx is the transaction of withPreludeTx: begun by its first
// statement.
type lazyTx struct {
	db       DB
	preludes []prelude
	tx       pgx.Tx // once begun
	err      error  // of the begin or a prelude: sticky
}

// start begins the transaction with the preludes and sql (none: the
// preludes alone) in one batch and checks the preludes' results; the
// caller reads sql's result and closes the batch.
func (t *lazyTx) start(ctx context.Context, sql string, args []any) (pgx.BatchResults, error) {
	batch := &pgx.Batch{}
	on := t.db
	if outer, nested := t.db.(pgx.Tx); nested {
		sp, err := outer.Begin(ctx) // a savepoint: a batch cannot begin one
		if err != nil {
			t.err = MapError(err)
			return nil, t.err
		}
		t.tx, on = sp, sp
	} else {
		batch.BeginTx(pgx.TxOptions{})
	}
	for _, p := range t.preludes {
		batch.Queue(p.sql, p.args...)
	}
	if sql != "" {
		batch.Queue(sql, args...)
	}
	br := on.SendBatch(ctx, batch)
	if tx := br.Tx(); tx != nil {
		t.tx = tx
	}
	fail := func(err error) (pgx.BatchResults, error) {
		_ = br.Close()
		t.err = err
		return nil, err
	}
	if t.tx == nil {
		return fail(errors.New("store: the batch began no transaction"))
	}
	if br.Tx() != nil {
		if _, err := br.Exec(); err != nil { // BEGIN's result
			return fail(MapError(err))
		}
	}
	for _, p := range t.preludes {
		if err := p.check(br); err != nil {
			return fail(err)
		}
	}
	if sql == "" {
		if err := br.Close(); err != nil {
			t.err = MapError(err)
			return nil, t.err
		}
		return nil, nil
	}
	return br, nil
}

// begun makes sure the transaction is begun (with its preludes).
func (t *lazyTx) begun(ctx context.Context) error {
	if t.err != nil || t.tx != nil {
		return t.err
	}
	_, err := t.start(ctx, "", nil)
	return err
}

func (t *lazyTx) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	if t.err != nil {
		return pgconn.CommandTag{}, t.err
	}
	if t.tx != nil {
		return t.tx.Exec(ctx, sql, args...)
	}
	br, err := t.start(ctx, sql, args)
	if err != nil {
		return pgconn.CommandTag{}, err
	}
	tag, err := br.Exec()
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	return tag, err
}

func (t *lazyTx) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	if t.err != nil {
		return nil, t.err
	}
	if t.tx != nil {
		return t.tx.Query(ctx, sql, args...)
	}
	br, err := t.start(ctx, sql, args)
	if err != nil {
		return nil, err
	}
	rows, err := br.Query()
	if err != nil {
		_ = br.Close()
		return nil, err
	}
	return &batchRows{Rows: rows, br: br}, nil
}

func (t *lazyTx) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	if t.err != nil {
		return errRow{t.err}
	}
	if t.tx != nil {
		return t.tx.QueryRow(ctx, sql, args...)
	}
	br, err := t.start(ctx, sql, args)
	if err != nil {
		return errRow{err}
	}
	return &batchRow{row: br.QueryRow(), br: br}
}

func (t *lazyTx) Begin(ctx context.Context) (pgx.Tx, error) {
	if err := t.begun(ctx); err != nil {
		return nil, err
	}
	return t.tx.Begin(ctx)
}

func (t *lazyTx) SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults {
	if err := t.begun(ctx); err != nil {
		return pgx.FailedBatchResults(b, err)
	}
	return t.tx.SendBatch(ctx, b)
}

func (t *lazyTx) CopyFrom(ctx context.Context, table pgx.Identifier, columns []string, src pgx.CopyFromSource) (int64, error) {
	if err := t.begun(ctx); err != nil {
		return 0, err
	}
	return t.tx.CopyFrom(ctx, table, columns, src)
}

func (t *lazyTx) Prepare(ctx context.Context, name, sql string) (*pgconn.StatementDescription, error) {
	if err := t.begun(ctx); err != nil {
		return nil, err
	}
	return t.tx.Prepare(ctx, name, sql)
}

// LargeObjects and Conn need the transaction begun; they have no context
// of their own to begin it with.
func (t *lazyTx) LargeObjects() pgx.LargeObjects {
	_ = t.begun(context.Background())
	if t.tx == nil {
		return pgx.LargeObjects{}
	}
	return t.tx.LargeObjects()
}

func (t *lazyTx) Conn() *pgx.Conn {
	_ = t.begun(context.Background())
	if t.tx == nil {
		return nil
	}
	return t.tx.Conn()
}

// Commit and Rollback belong to withPreludeTx, which ends the transaction
// after fn returns.
func (t *lazyTx) Commit(context.Context) error {
	return errors.New("store: withPreludeTx commits when its function returns")
}

func (t *lazyTx) Rollback(context.Context) error {
	return errors.New("store: withPreludeTx rolls back when its function returns an error")
}

// batchRow is the row of a batch's last statement; Scan closes the batch.
type batchRow struct {
	row pgx.Row
	br  pgx.BatchResults
}

func (r *batchRow) Scan(dest ...any) error {
	err := r.row.Scan(dest...)
	if cerr := r.br.Close(); err == nil {
		err = cerr
	}
	return err
}
