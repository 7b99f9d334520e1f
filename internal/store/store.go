package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/rustbill/paymentd/internal/store/dbsqlc"
)

// DB executes statements and begins transactions. *pgxpool.Pool, *pgx.Conn and
// pgx.Tx satisfy it; Begin on a pgx.Tx opens a savepoint.
type DB interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
	// SendBatch sends a pipeline of statements in one round trip.
	SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults
	TxBeginner
}

// TxBeginner begins a transaction (or, on a pgx.Tx, a savepoint).
type TxBeginner interface {
	Begin(ctx context.Context) (pgx.Tx, error)
}

var (
	_ DB          = (*pgxpool.Pool)(nil)
	_ DB          = (*pgx.Conn)(nil)
	_ DB          = pgx.Tx(nil)
	_ dbsqlc.DBTX = DB(nil) // a DB can be handed to dbsqlc.New
)

// endTimeout bounds the commit and rollback, which run on a context that
// ignores the caller's cancellation.
const endTimeout = 15 * time.Second

// WithTx runs fn in a transaction begun on db and commits it when fn returns
// nil. It rolls back when fn returns an error, when fn panics (the panic then
// goes on) or exits the goroutine, and when ctx is done by the time fn
// returns: a request cancelled half way never commits. The rollback and the
// commit themselves run on context.WithoutCancel(ctx), bounded by a timeout,
// so a cancellation can neither leave the transaction open nor cut a COMMIT
// in half and leave its outcome unknown.
//
// fn's error is returned unchanged (store functions have mapped it already);
// begin and commit errors go through MapError.
func WithTx(ctx context.Context, db TxBeginner, fn func(tx pgx.Tx) error) error {
	return withTx(ctx, db, func() (pgx.Tx, error) { return db.Begin(ctx) }, fn)
}

// withTx is WithTx on the transaction begin opens.
func withTx(ctx context.Context, db any, begin func() (pgx.Tx, error), fn func(tx pgx.Tx) error) error {
	tx, err := begin()
	if err != nil {
		return fmt.Errorf("store: begin transaction: %w", MapError(err))
	}
	endWake := trackWake(db, tx)
	committed := false
	defer func() { endWake(committed) }()

	done := false
	defer func() {
		if !done { // fn panicked or called runtime.Goexit
			_ = rollback(ctx, tx)
		}
	}()

	fnErr := fn(tx)
	done = true
	err = finish(ctx, tx, fnErr)
	committed = err == nil
	return err
}

// finish ends tx once its function returned fnErr: a rollback when fnErr is
// not nil or ctx is done, a commit otherwise (see WithTx).
func finish(ctx context.Context, tx pgx.Tx, fnErr error) error {
	if fnErr == nil {
		fnErr = ctx.Err()
	}
	if fnErr != nil {
		if rbErr := rollback(ctx, tx); rbErr != nil {
			return errors.Join(fnErr, rbErr)
		}
		return fnErr
	}

	endCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), endTimeout)
	defer cancel()
	if err := tx.Commit(endCtx); err != nil {
		_ = rollback(ctx, tx) // releases the connection if Commit could not
		return fmt.Errorf("store: commit: %w", MapError(err))
	}
	return nil
}

func rollback(ctx context.Context, tx pgx.Tx) error {
	endCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), endTimeout)
	defer cancel()
	err := tx.Rollback(endCtx)
	if err == nil || errors.Is(err, pgx.ErrTxClosed) {
		return nil
	}
	return fmt.Errorf("store: rollback: %w", err)
}
