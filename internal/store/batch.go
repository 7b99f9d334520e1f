package store

import (
	"context"
	"errors"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/rustbill/paymentd/internal/store/dbsqlc"
)

// inOneBatch sends the statements that calls makes through generated
// queries as one batch on tx: one round trip. calls runs twice: first each
// generated query only queues its statement (its results are meaningless
// and must be ignored), then, once the batch is sent, each reads its answer
// in the same order. calls must therefore make the same calls both times,
// none depending on another's answer: it assigns what it reads to the
// caller's variables, and the second run's assignments stand.
//
// A statement that fails aborts the transaction, so the later ones fail
// too; each answer carries its own error, and inOneBatch returns the
// batch's.
func inOneBatch(ctx context.Context, tx pgx.Tx, calls func(q *dbsqlc.Queries)) error {
	d := &batchDB{}
	calls(dbsqlc.New(d))
	d.results = tx.SendBatch(ctx, &d.batch)
	calls(dbsqlc.New(d))
	return d.results.Close()
}

// errQueued is what a generated query answers while inOneBatch queues.
var errQueued = errors.New("store: statement queued in a batch, not yet sent")

// batchDB is the dbsqlc.DBTX of inOneBatch: it queues statements until the
// batch is sent, then hands out their results in order.
type batchDB struct {
	batch   pgx.Batch
	results pgx.BatchResults
}

func (d *batchDB) Exec(_ context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	if d.results == nil {
		d.batch.Queue(sql, args...)
		return pgconn.CommandTag{}, errQueued
	}
	return d.results.Exec()
}

func (d *batchDB) Query(_ context.Context, sql string, args ...any) (pgx.Rows, error) {
	if d.results == nil {
		d.batch.Queue(sql, args...)
		return nil, errQueued
	}
	return d.results.Query()
}

func (d *batchDB) QueryRow(_ context.Context, sql string, args ...any) pgx.Row {
	if d.results == nil {
		d.batch.Queue(sql, args...)
		return errRow{errQueued}
	}
	return d.results.QueryRow()
}

// firstError is the first of errs that is not nil: the statement that
// failed first in a batch (the ones after it only report the aborted
// transaction).
func firstError(errs ...error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}
