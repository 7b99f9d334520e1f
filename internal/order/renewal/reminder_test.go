package renewal_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/rustbill/paymentd/internal/order/renewal"
	"github.com/rustbill/paymentd/internal/testfixture"
)

// The reminder before the due day without overdue ones: each unpaid
// invoice gets it, however many pages of unpaid periods the scan reads
// (a batch of one here), and an invoice issued within the reminder's days
// is not reminded again: its issue notice stands for it. A reminder is
// sent at the latest overdue day reached, never before the first one.
// (Planted: the reminder step switched on by `ReminderDaysBefore <= 0 || …`,
// the scan stopping after a full page (`len(rows) <= BatchSize`), the issue
// step not recording the reminder it stands for (its condition negated, or
// its window `*day` → `/day`) — each caught.)
func TestTheReminderBeforeTheDueDayAloneReachesEveryInvoice(t *testing.T) {
	t.Parallel()
	opts := defaults()
	opts.SuspendAfterDays, opts.TerminateAfterDays = 0, 0
	opts.OverdueReminderDays, opts.BatchSize = nil, 1
	b := setup(t, at(time.March, 1, 0), opts)
	due := [3]uuid.UUID{}
	for i := range due {
		due[i] = b.activeOrder(t, testfixture.Customer(t, b.pool), "monthly", "10.00") // due Apr 1 00:00
	}
	b.clock.Set(at(time.March, 1, 12))
	late := b.activeOrder(t, testfixture.Customer(t, b.pool), "monthly", "10.00") // due Apr 1 12:00

	b.clock.Set(at(time.March, 25, 0)) // 7 days before Apr 1: the first three are issued
	b.pass(t)
	// 2.5 days before the first three are due, 3 days before the last:
	// that one is issued now, within the reminder's 3 days.
	b.clock.Set(at(time.March, 29, 12))
	b.pass(t)
	b.clock.Set(at(time.March, 30, 0))
	b.pass(t)
	for _, id := range due {
		require.Equal(t, []string{"issued:7", "due_soon:3"}, b.reminders(t, id))
	}
	require.Equal(t, []string{"issued:3"}, b.reminders(t, late), "issued within the reminder's days: no second notice")
	// No overdue reminder is configured: none comes.
	b.clock.Set(at(time.April, 20, 0))
	b.pass(t)
	require.Equal(t, []string{"issued:3"}, b.reminders(t, late))
}

// Overdue reminders without the one before the due day: the step runs for
// them alone. (Planted: the reminder step switched on by `… || len(…) <= 0`
// — caught.)
func TestOverdueRemindersAloneAreSent(t *testing.T) {
	t.Parallel()
	opts := defaults()
	opts.SuspendAfterDays, opts.TerminateAfterDays = 0, 0
	opts.ReminderDaysBefore, opts.OverdueReminderDays = 0, []int{2}
	b := setup(t, at(time.March, 1, 0), opts)
	id := b.activeOrder(t, testfixture.Customer(t, b.pool), "monthly", "10.00") // due Apr 1
	for _, s := range []struct {
		at   time.Time
		want []string
	}{
		{at(time.March, 25, 0), []string{"issued:7"}},
		{at(time.March, 31, 0), []string{"issued:7"}},
		{at(time.April, 2, 23), []string{"issued:7"}},
		{at(time.April, 3, 0), []string{"issued:7", "overdue:2"}},
		{at(time.April, 20, 0), []string{"issued:7", "overdue:2"}},
	} {
		b.clock.Set(s.at)
		b.pass(t)
		require.Equal(t, s.want, b.reminders(t, id), "at %s", s.at)
	}
}

// countingDB counts the transactions begun on the pool.
type countingDB struct {
	*pgxpool.Pool
	begins atomic.Int64
}

func (d *countingDB) Begin(ctx context.Context) (pgx.Tx, error) {
	d.begins.Add(1)
	return d.Pool.Begin(ctx)
}

// Acquire is how a pipelined transaction (store.WithPipelinedTx) begins:
// it takes a connection of its own and sends BEGIN with its first batch.
func (d *countingDB) Acquire(ctx context.Context) (*pgxpool.Conn, error) {
	d.begins.Add(1)
	return d.Pool.Acquire(ctx)
}

// A pass locks only the orders a step is due for: an unpaid renewal
// invoice past due but before its suspension day, its reminder sent, costs
// the pass no transaction of its own (each would lock the customer's
// balance every interval, for nothing). (Planted: the suspension and the
// termination scans' windows widened, `-days*day` → `+days*day` or
// `/day` — each caught: the step locked the order to find it not due.)
func TestAPassLocksOnlyTheOrdersDue(t *testing.T) {
	t.Parallel()
	b := setup(t, at(time.March, 1, 0), defaults())
	db := &countingDB{Pool: b.pool}
	opts := defaults()
	opts.Clock, opts.Node = b.clock.Now, "node-test"
	run := renewal.New(db, opts)
	pass := func() int64 {
		t.Helper()
		before := db.begins.Load()
		r, err := run.RunOnce(context.Background())
		require.NoError(t, err)
		require.Zero(t, r.Errors)
		return db.begins.Load() - before
	}
	idle := pass() // nothing in the database: what a pass costs without an order

	id := b.activeOrder(t, testfixture.Customer(t, b.pool), "monthly", "10.00") // due Apr 1
	b.clock.Set(at(time.March, 25, 0))
	require.Greater(t, pass(), idle, "the renewal invoice is issued in a transaction")
	b.clock.Set(at(time.April, 2, 12))
	require.Greater(t, pass(), idle, "the day-1 overdue reminder is queued in one")
	require.Equal(t, []string{"issued:7", "overdue:1"}, b.reminders(t, id))
	// Apr 3: two days past due, suspended on the third, terminated on the
	// 14th, the next reminder on the 7th: nothing is due.
	b.clock.Set(at(time.April, 3, 12))
	require.Equal(t, idle, pass(), "nothing due: no order locked")
	b.clock.Set(at(time.April, 4, 0))
	require.Equal(t, idle+1, pass(), "the suspension, in one transaction")
}
