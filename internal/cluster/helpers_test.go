package cluster_test

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/rustbill/paymentd/internal/cluster"
	"github.com/rustbill/paymentd/internal/store"
	"github.com/rustbill/paymentd/internal/testsignal"
)

func quietLog() *slog.Logger { return slog.New(slog.DiscardHandler) }

// hangingDB is a store.DB that can be made to hang: while down, every call
// blocks until its context ends, as with a database that stopped answering.
type hangingDB struct {
	pool *pgxpool.Pool
	down atomic.Bool
}

func (d *hangingDB) hang(ctx context.Context) error {
	<-ctx.Done()
	return ctx.Err()
}

func (d *hangingDB) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	if d.down.Load() {
		return pgconn.CommandTag{}, d.hang(ctx)
	}
	return d.pool.Exec(ctx, sql, args...)
}

func (d *hangingDB) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	if d.down.Load() {
		return nil, d.hang(ctx)
	}
	return d.pool.Query(ctx, sql, args...)
}

type errRow struct{ err error }

func (r errRow) Scan(...any) error { return r.err }

func (d *hangingDB) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	if d.down.Load() {
		return errRow{d.hang(ctx)}
	}
	return d.pool.QueryRow(ctx, sql, args...)
}

func (d *hangingDB) Begin(ctx context.Context) (pgx.Tx, error) {
	if d.down.Load() {
		return nil, d.hang(ctx)
	}
	return d.pool.Begin(ctx)
}

func (d *hangingDB) SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults {
	if d.down.Load() {
		return pgx.FailedBatchResults(b, d.hang(ctx))
	}
	return d.pool.SendBatch(ctx, b)
}

var _ store.DB = (*hangingDB)(nil)

// member is one elector with a record of its leadership changes.
type member struct {
	name    string
	e       *cluster.Elector
	cancel  context.CancelFunc
	mu      sync.Mutex
	gained  []time.Time
	lost    []time.Time
	watchWG sync.WaitGroup
	// rounds counts the elector's bids and renewals, stopping the stops
	// that found a query on the wire: tests wait on them, never sleep.
	rounds, stopping *testsignal.Signal
}

func (m *member) isLeader() bool { return m.e.IsLeader() }

func (m *member) gainedAt() []time.Time {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]time.Time(nil), m.gained...)
}

func (m *member) lostAt() []time.Time {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]time.Time(nil), m.lost...)
}

// startMember starts an elector for role on db; it is stopped gracefully
// (resign) when the test ends unless the test does it first.
func startMember(t *testing.T, db store.DB, name string, opts cluster.ElectorOptions) *member {
	t.Helper()
	opts.Holder = name
	if opts.Role == "" {
		opts.Role = cluster.RoleEventWorker
	}
	opts.Logger = quietLog()
	opts.Rounds, opts.Stopping = testsignal.New(), testsignal.New()
	e, err := cluster.NewElector(db, opts)
	require.NoError(t, err)
	m := &member{name: name, e: e, rounds: opts.Rounds, stopping: opts.Stopping}
	changes, unsubscribe := e.Subscribe()
	stopWatch := make(chan struct{})
	m.watchWG.Add(1)
	go func() {
		defer m.watchWG.Done()
		for {
			select {
			case <-stopWatch:
				return
			case leading := <-changes:
				m.mu.Lock()
				if leading {
					m.gained = append(m.gained, time.Now())
				} else if len(m.gained) > len(m.lost) {
					m.lost = append(m.lost, time.Now())
				}
				m.mu.Unlock()
			}
		}
	}()
	ctx, cancel := context.WithCancel(context.Background())
	m.cancel = cancel
	require.NoError(t, e.Start(ctx))
	t.Cleanup(func() {
		e.Stop()
		cancel()
		close(stopWatch)
		m.watchWG.Wait()
		unsubscribe()
	})
	return m
}

// leading reports whether m leads and its watcher has recorded that it
// gained the role: IsLeader turns true before the change reaches the
// subscriber, so gainedAt can still be empty while IsLeader says yes.
func (m *member) leading() bool {
	if !m.isLeader() {
		return false
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.gained) > len(m.lost)
}

// firstElection bounds the wait for a first leader: a bound on waiting,
// not a claim about speed (a test that measures a hand-over measures it),
// so it leaves room for a machine busy building and testing beside it.
// (The two times it ran out, on fresh clones' test commands, the elector
// of TestStopDuringARenewalStillResignsOnASingleConnection had lost its
// one connection to a bid given up after 50 ms: see there.)
const firstElection = 90 * time.Second

// waitLeader waits until exactly one of ms leads, with its gain recorded
// (gainedAt()[0] exists), and returns it.
func waitLeader(t *testing.T, within time.Duration, ms ...*member) *member {
	t.Helper()
	var leader *member
	require.Eventually(t, func() bool {
		leader = nil
		n := 0
		for _, m := range ms {
			if m.leading() {
				leader = m
				n++
			}
		}
		return n == 1
	}, within, 5*time.Millisecond)
	return leader
}

func others(all []*member, not *member) []*member {
	var out []*member
	for _, m := range all {
		if m != not {
			out = append(out, m)
		}
	}
	return out
}

func startListener(t *testing.T, pool *pgxpool.Pool, name string) *cluster.Listener {
	t.Helper()
	l := cluster.NewListener(cluster.ConnectLike(pool, name), cluster.ListenerOptions{
		MinBackoff: 20 * time.Millisecond, MaxBackoff: 200 * time.Millisecond, Logger: quietLog(),
	})
	require.NoError(t, l.Start(context.Background()))
	t.Cleanup(l.Stop)
	require.Eventually(t, l.Connected, 5*time.Second, 5*time.Millisecond)
	return l
}
