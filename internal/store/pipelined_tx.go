package store

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/rustbill/paymentd/internal/store/dbsqlc"
)

// Acquirer hands out a pooled connection: *pgxpool.Pool and *BoundedPool.
type Acquirer interface {
	Acquire(ctx context.Context) (*pgxpool.Conn, error)
}

// Acquire takes a pooled connection, waiting at most the pool's timeout.
func (p *BoundedPool) Acquire(ctx context.Context) (*pgxpool.Conn, error) { return p.acquire(ctx) }

// WithPipelinedTx is WithTx on a transaction that waits for fewer round
// trips: BEGIN is not sent on its own but with the transaction's first
// statement, and the statements whose result nobody reads (audit rows,
// events: see later) wait for the next statement that returns something,
// or for COMMIT, and go with it as one batch. A transaction that reads
// under locks, decides, and writes what it decided then costs a round
// trip for each statement whose answer it needs, and none for the rest.
//
// An error of a waiting statement comes back from the call it went with
// (the transaction is then aborted and rolled back, as with WithTx); what
// fn does in between is discarded with it. When db cannot hand out a
// connection (a pgx.Tx, a *pgx.Conn) it is WithTx.
func WithPipelinedTx(ctx context.Context, db TxBeginner, fn func(tx pgx.Tx) error) error {
	return withPipelinedTx(ctx, db, nil, fn)
}

// withPipelinedTx is WithPipelinedTx on a transaction that begins with
// preludes: statements sent with BEGIN, ahead of everything else, whose
// answers are checked before any other is read. A prelude that fails its
// check refuses the transaction: the statement that carried it and every
// later one return its error, nothing commits whatever fn returns, and
// withPipelinedTx returns that error. A batch that carries the preludes
// never carries COMMIT (a refusal is an answer, not an SQL error, so
// PostgreSQL would commit after it). When db cannot hand out a connection
// the preludes run first, each its own round trip, in WithTx.
func withPipelinedTx(ctx context.Context, db TxBeginner, preludes []prelude, fn func(tx pgx.Tx) error) error {
	pool, ok := db.(Acquirer)
	if !ok {
		return WithTx(ctx, db, func(tx pgx.Tx) error {
			for _, p := range preludes {
				if err := p.check(tx.QueryRow(ctx, p.sql, p.args...)); err != nil {
					return err
				}
			}
			return fn(tx)
		})
	}
	var t *pipelinedTx
	err := withTx(ctx, db, func() (pgx.Tx, error) {
		c, err := pool.Acquire(ctx)
		if err != nil {
			return nil, err
		}
		t = &pipelinedTx{c: c, conn: c.Conn(), preludes: preludes}
		return t, nil
	}, fn)
	if t != nil && t.refused != nil {
		return t.refused // whatever fn or the commit made of it
	}
	return err
}

// prelude is a statement a transaction must start with, and the check of
// its answer; an error from check refuses the transaction.
type prelude struct {
	sql   string
	args  []any
	check func(pgx.Row) error
}

// later is db for a statement whose result nobody reads: on a pipelined
// transaction it waits to go with the next statement (WithPipelinedTx);
// elsewhere it runs at once.
func later(db DB) dbsqlc.DBTX {
	if t, ok := db.(*pipelinedTx); ok {
		return deferred{t}
	}
	return db
}

// laterAudit queues audit row r to go with the next statement that
// answers (AppendAudit).
func (t *pipelinedTx) laterAudit(r dbsqlc.InsertAuditLogParams) error {
	if t.done {
		return pgx.ErrTxClosed
	}
	t.waiting = append(t.waiting, waitingStatement{audit: &r})
	return nil
}

// deferred is a pipelinedTx whose Exec waits.
type deferred struct{ *pipelinedTx }

func (d deferred) Exec(_ context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	if d.done {
		return pgconn.CommandTag{}, pgx.ErrTxClosed
	}
	d.waiting = append(d.waiting, waitingStatement{sql: sql, args: args})
	return pgconn.CommandTag{}, nil
}

type waitingStatement struct {
	sql  string
	args []any
	// audit, when not nil, is an audit row (AppendAudit) instead of sql:
	// the rows waiting for one batch go as one statement.
	audit *dbsqlc.InsertAuditLogParams
	// read takes the statement's row when it answers one that someone
	// waits for (Later); nil when nobody reads its result.
	read func(pgx.Row) error
}

// pipelinedTx is the pgx.Tx of WithPipelinedTx, on a connection of its
// own that Commit and Rollback give back (pgxpool closes a connection
// handed back inside a transaction).
type pipelinedTx struct {
	c        *pgxpool.Conn
	conn     *pgx.Conn
	preludes []prelude // go with BEGIN
	begun    bool      // BEGIN has been sent
	done     bool
	refused  error // a prelude's refusal: every later call returns it
	waiting  []waitingStatement
	// savepoints counts the savepoints begun, for their names.
	savepoints int
}

var _ pgx.Tx = (*pipelinedTx)(nil)

// send sends, as one batch, BEGIN if it has not gone yet, the waiting
// statements and then last (when not empty), and reads the results of all
// but last, which the caller reads from the batch before closing it.
func (t *pipelinedTx) send(ctx context.Context, last *waitingStatement) (pgx.BatchResults, error) {
	var tail []*pgx.QueuedQuery
	if last != nil {
		tail = []*pgx.QueuedQuery{{SQL: last.sql, Arguments: last.args}}
	}
	return t.sendBatch(ctx, tail)
}

// sendBatch is send with the queries of a batch last.
func (t *pipelinedTx) sendBatch(ctx context.Context, last []*pgx.QueuedQuery) (pgx.BatchResults, error) {
	if t.done {
		return nil, pgx.ErrTxClosed
	}
	if t.refused != nil {
		return nil, t.refused
	}
	b := &pgx.Batch{}
	var reads []func(pgx.Row) error // of the statements ahead of last
	if !t.begun {
		b.Queue("BEGIN")
		reads = append(reads, nil)
		t.begun = true
		for _, p := range t.preludes {
			b.Queue(p.sql, p.args...)
			reads = append(reads, func(row pgx.Row) error {
				if err := p.check(row); err != nil {
					t.refused = err
					return err
				}
				return nil
			})
		}
	}
	// The waiting audit rows go as one statement, where the first of them
	// waited: each writes an audit_log row alone, which no other
	// statement reads or depends on, so the later ones may go ahead of
	// the statements that waited between them.
	var audits []dbsqlc.InsertAuditLogParams
	for _, s := range t.waiting {
		if s.audit != nil {
			audits = append(audits, *s.audit)
		}
	}
	for _, s := range t.waiting {
		switch {
		case s.audit == nil:
			b.Queue(s.sql, s.args...)
			reads = append(reads, s.read)
		case audits != nil:
			auditStatements(ctx, b, audits)
			reads = append(reads, nil)
			audits = nil
		}
	}
	t.waiting = nil
	b.QueuedQueries = append(b.QueuedQueries, last...)
	br := t.conn.SendBatch(ctx, b)
	for i, read := range reads {
		var err error
		if read == nil {
			_, err = br.Exec()
		} else if err = read(br.QueryRow()); errors.Is(err, pgx.ErrNoRows) {
			err = nil // an answer, for the one who waits for it
		}
		if err != nil {
			_ = br.Close()
			for _, read := range reads[i+1:] { // they will not be answered
				if read != nil {
					_ = read(errRow{err})
				}
			}
			return nil, err
		}
	}
	return br, nil
}

// pending reports whether a statement must carry BEGIN or waiting ones.
// A refused transaction is pending too: its calls go through sendBatch,
// which answers the refusal.
func (t *pipelinedTx) pending() bool { return !t.begun || len(t.waiting) > 0 || t.refused != nil }

func (t *pipelinedTx) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	if !t.pending() && !t.done {
		return t.conn.Exec(ctx, sql, args...)
	}
	br, err := t.send(ctx, &waitingStatement{sql: sql, args: args})
	if err != nil {
		return pgconn.CommandTag{}, err
	}
	tag, err := br.Exec()
	return tag, errors.Join(err, br.Close())
}

func (t *pipelinedTx) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	if !t.pending() && !t.done {
		return t.conn.Query(ctx, sql, args...)
	}
	br, err := t.send(ctx, &waitingStatement{sql: sql, args: args})
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

func (t *pipelinedTx) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	if !t.pending() && !t.done {
		return t.conn.QueryRow(ctx, sql, args...)
	}
	br, err := t.send(ctx, &waitingStatement{sql: sql, args: args})
	if err != nil {
		return errRow{err}
	}
	return &batchRow{row: br.QueryRow(), br: br}
}

// Commit sends COMMIT with whatever waits. A transaction that sent
// nothing has nothing to commit; a refused one rolls back. Preludes that
// have not gone yet go first, without COMMIT, and are checked.
func (t *pipelinedTx) Commit(ctx context.Context) error {
	if t.done {
		return pgx.ErrTxClosed
	}
	if !t.begun && t.refused == nil {
		if len(t.waiting) == 0 {
			t.done = true
			t.release()
			return nil
		}
		if len(t.preludes) > 0 { // never in COMMIT's batch: see withPipelinedTx
			if err := t.flush(ctx); err != nil {
				return errors.Join(err, t.Rollback(ctx))
			}
		}
	}
	if t.refused != nil {
		return errors.Join(t.refused, t.Rollback(ctx))
	}
	defer t.release()
	br, err := t.send(ctx, &waitingStatement{sql: "COMMIT"})
	t.done = true
	if err != nil {
		return err
	}
	tag, err := br.Exec()
	if err = errors.Join(err, br.Close()); err != nil {
		return err
	}
	if tag.String() == "ROLLBACK" { // PostgreSQL's answer to COMMIT in a failed transaction
		return pgx.ErrTxCommitRollback
	}
	return nil
}

// Rollback drops what waits and rolls back what was sent.
func (t *pipelinedTx) Rollback(ctx context.Context) error {
	if t.done {
		return pgx.ErrTxClosed
	}
	defer t.release()
	t.done, t.waiting = true, nil
	if !t.begun {
		return nil
	}
	_, err := t.conn.Exec(ctx, "ROLLBACK")
	return err
}

func (t *pipelinedTx) release() {
	if t.c != nil {
		t.c.Release()
		t.c = nil
	}
}

// flush sends what waits, for the calls that go straight to the
// connection.
func (t *pipelinedTx) flush(ctx context.Context) error {
	if !t.pending() {
		return nil
	}
	br, err := t.send(ctx, nil)
	if err != nil {
		return err
	}
	return br.Close()
}

// Begin opens a savepoint, after whatever waits (BEGIN and the preludes
// included) has gone. Its statements go through t; what waits when it
// ends belongs to it, and goes with RELEASE or is dropped by ROLLBACK TO.
func (t *pipelinedTx) Begin(ctx context.Context) (pgx.Tx, error) {
	if err := t.flush(ctx); err != nil {
		return nil, err
	}
	if t.done {
		return nil, pgx.ErrTxClosed
	}
	t.savepoints++
	sp := &savepointTx{pipelinedTx: t, name: fmt.Sprintf("sp_%d", t.savepoints)}
	if _, err := t.conn.Exec(ctx, "SAVEPOINT "+sp.name); err != nil {
		return nil, err
	}
	return sp, nil
}

// savepointTx is a savepoint of a pipelinedTx.
type savepointTx struct {
	*pipelinedTx
	name  string
	ended bool
}

func (s *savepointTx) Commit(ctx context.Context) error {
	if s.ended || s.done {
		return pgx.ErrTxClosed
	}
	s.ended = true
	_, err := s.pipelinedTx.Exec(ctx, "RELEASE SAVEPOINT "+s.name)
	return err
}

func (s *savepointTx) Rollback(ctx context.Context) error {
	if s.ended || s.done {
		return pgx.ErrTxClosed
	}
	s.ended = true
	s.waiting = nil // queued inside the savepoint: rolled back unsent
	_, err := s.conn.Exec(ctx, "ROLLBACK TO SAVEPOINT "+s.name)
	return err
}

func (t *pipelinedTx) CopyFrom(ctx context.Context, table pgx.Identifier, columns []string, src pgx.CopyFromSource) (int64, error) {
	if err := t.flush(ctx); err != nil {
		return 0, err
	}
	return t.conn.CopyFrom(ctx, table, columns, src)
}

// SendBatch sends b with BEGIN and the waiting statements ahead of it, in
// one round trip.
func (t *pipelinedTx) SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults {
	if !t.pending() && !t.done {
		return t.conn.SendBatch(ctx, b)
	}
	br, err := t.sendBatch(ctx, b.QueuedQueries)
	if err != nil {
		return errBatch{err}
	}
	return br
}

func (t *pipelinedTx) LargeObjects() pgx.LargeObjects { return pgx.LargeObjects{} }

func (t *pipelinedTx) Prepare(ctx context.Context, name, sql string) (*pgconn.StatementDescription, error) {
	return t.conn.Prepare(ctx, name, sql)
}

func (t *pipelinedTx) Conn() *pgx.Conn { return t.conn }

// batchRows are the last statement's rows of a batch; closing them closes
// the batch.
type batchRows struct {
	pgx.Rows
	br  pgx.BatchResults
	err error
}

func (r *batchRows) Next() bool {
	if r.Rows.Next() {
		return true
	}
	r.Close()
	return false
}

func (r *batchRows) Close() {
	r.Rows.Close()
	if r.br != nil {
		r.err = r.br.Close()
		r.br = nil
	}
}

func (r *batchRows) Err() error {
	if err := r.Rows.Err(); err != nil {
		return err
	}
	return r.err
}

type errBatch struct{ err error }

func (b errBatch) Exec() (pgconn.CommandTag, error) { return pgconn.CommandTag{}, b.err }
func (b errBatch) Query() (pgx.Rows, error)         { return nil, b.err }
func (b errBatch) QueryRow() pgx.Row                { return errRow{b.err} }
func (b errBatch) Close() error                     { return b.err }
func (b errBatch) Tx() pgx.Tx                       { return nil }

// Later is the answer of a statement that waits in a pipelined transaction
// to go with the next statement that is sent (WithPipelinedTx), or runs at
// once elsewhere. Get sends it if nothing has carried it yet.
type Later[T any] struct {
	tx       *pipelinedTx
	v        T
	err      error
	answered bool
}

// Get is the statement's answer, as the store function that runs it at
// once would give it.
func (l *Later[T]) Get(ctx context.Context) (T, error) {
	if !l.answered {
		if err := l.tx.flush(ctx); err != nil && !l.answered {
			var zero T
			return zero, err
		}
	}
	return l.v, MapError(l.err)
}

// laterRow makes the one statement call sends through generated queries
// wait on a pipelined transaction (and runs it at once on another db):
// call runs twice, first to queue the statement, then, when it has been
// sent, to read its row.
func laterRow[T any](ctx context.Context, db DB, call func(q *dbsqlc.Queries) (T, error)) *Later[T] {
	t, ok := db.(*pipelinedTx)
	if !ok {
		v, err := call(dbsqlc.New(db))
		return &Later[T]{v: v, err: err, answered: true}
	}
	l := &Later[T]{tx: t}
	rec := &batchDB{}
	_, _ = call(dbsqlc.New(rec)) // errQueued
	q := rec.batch.QueuedQueries[0]
	t.waiting = append(t.waiting, waitingStatement{sql: q.SQL, args: q.Arguments, read: func(row pgx.Row) error {
		l.v, l.err = call(dbsqlc.New(answeredRow{row}))
		l.answered = true
		return l.err
	}})
	return l
}

// answeredRow is the dbsqlc.DBTX through which a Later reads its row.
type answeredRow struct{ row pgx.Row }

var errNotTheLaterStatement = errors.New("store: a Later reads one row")

func (a answeredRow) QueryRow(context.Context, string, ...any) pgx.Row { return a.row }

func (a answeredRow) Exec(context.Context, string, ...any) (pgconn.CommandTag, error) {
	return pgconn.CommandTag{}, errNotTheLaterStatement
}

func (a answeredRow) Query(context.Context, string, ...any) (pgx.Rows, error) {
	return nil, errNotTheLaterStatement
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
