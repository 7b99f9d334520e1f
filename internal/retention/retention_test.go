package retention_test

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/rustbill/paymentd/internal/cluster"
	"github.com/rustbill/paymentd/internal/ledger"
	"github.com/rustbill/paymentd/internal/retention"
	"github.com/rustbill/paymentd/internal/startstop"
	"github.com/rustbill/paymentd/internal/store"
	"github.com/rustbill/paymentd/internal/testdb"
	"github.com/rustbill/paymentd/internal/testfixture"
	"github.com/rustbill/paymentd/internal/testkit"
	"github.com/rustbill/paymentd/internal/testsignal"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(testdb.Main(m)) }

const day = 24 * time.Hour

// bundle is a database with money in it (a gateway payment refunded in
// part, a balance ledger with a payment and a refund, an invoice), and
// events, notifications and audit rows of every kind, old and new.
type bundle struct {
	pool *pgxpool.Pool
	now  time.Time
	// Events and notifications by what retention must do with them.
	goneEvents, keptEvents               []uuid.UUID
	goneNotifications, keptNotifications []uuid.UUID
}

func setup(t *testing.T) *bundle {
	t.Helper()
	pool := testdb.Pool(t)
	b := &bundle{pool: pool, now: time.Now().UTC()}
	ctx := context.Background()
	q := func(sql string, args ...any) uuid.UUID {
		t.Helper()
		var id uuid.UUID
		require.NoError(t, pool.QueryRow(ctx, sql, args...).Scan(&id), sql)
		return id
	}
	exec := func(sql string, args ...any) {
		t.Helper()
		_, err := pool.Exec(ctx, sql, args...)
		require.NoError(t, err, sql)
	}
	old := b.now.Add(-60 * day)
	recent := b.now.Add(-5 * day)

	customer := testfixture.Customer(t, pool)
	gw := testfixture.GatewayInterface(t, pool, "epay")
	order := func(status, total string, at time.Time) uuid.UUID {
		return q(`INSERT INTO orders (customer_id, status, total_amount, currency, paid_at, created_at, updated_at)
			VALUES ($1, $2, $3, 'CNY', $4, $4, $4) RETURNING id`, customer, status, total, at)
	}
	payment := func(orderID uuid.UUID, method, amount, refunded string, at time.Time) uuid.UUID {
		var g *uuid.UUID
		if method == "gateway" {
			g = &gw
		}
		return q(`INSERT INTO payments (order_id, customer_id, method, gateway_interface_id, amount, refunded_amount,
				currency, status, paid_at, created_at, updated_at)
			VALUES ($1, $2, $3, $4, $5, $6, 'CNY', 'success', $7, $7, $7) RETURNING id`,
			orderID, customer, method, g, amount, refunded, at)
	}
	event := func(orderID uuid.UUID, typ, status, payload string, at time.Time) uuid.UUID {
		return q(`INSERT INTO events (event_type, order_id, status, payload, attempts, created_at, updated_at, run_at)
			VALUES ($1, $2, $3, $4, 1, $5, $5, $5) RETURNING id`, typ, orderID, status, payload, at)
	}
	paidPayload := func(o, p uuid.UUID, amount, method string) string {
		return `{"order_id":"` + o.String() + `","payment_id":"` + p.String() + `","amount":"` + amount + `","currency":"CNY","method":"` + method + `"}`
	}

	// A gateway payment, refunded in part, its order provisioned.
	active := order("active", "12.30", old)
	gatewayPay := payment(active, "gateway", "12.30", "2.30", old)
	exec(`INSERT INTO refunds (payment_id, amount, status, destination, created_at, updated_at)
		VALUES ($1, 2.30, 'succeeded', 'gateway', $2, $2)`, gatewayPay, old)
	exec(`INSERT INTO instances (customer_id, order_id, status) VALUES ($1, $2, 'running')`, customer, active)
	b.keptEvents = append(b.keptEvents, event(active, "order_paid", "done", paidPayload(active, gatewayPay, "12.30", "gateway"), old))
	b.goneEvents = append(b.goneEvents, event(active, "order_provisioned", "done", `{}`, old))

	// The balance: 100.00 credited, 30.00 paid for an order, 10.00 of it
	// refunded to the balance.
	rows := 0
	ledgerRow := func(typ, amount, before, after string, pay, ref *uuid.UUID) {
		rows++
		exec(`INSERT INTO balance_transactions (customer_id, type, amount, balance_before, balance_after, payment_id, refund_id, created_at)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8)`, customer, typ, amount, before, after, pay, ref, old.Add(time.Duration(rows)*time.Second))
	}
	ledgerRow("manual_adjust", "100.00", "0.00", "100.00", nil, nil)
	balanceOrder := order("provisioning", "30.00", old)
	balancePay := payment(balanceOrder, "balance", "30.00", "10.00", old)
	ledgerRow("payment", "-30.00", "100.00", "70.00", &balancePay, nil)
	r := q(`INSERT INTO refunds (payment_id, amount, status, destination, created_at, updated_at)
		VALUES ($1, 10.00, 'succeeded', 'balance', $2, $2) RETURNING id`, balancePay, old)
	ledgerRow("refund", "10.00", "70.00", "80.00", &balancePay, &r)
	exec(`UPDATE customers SET balance = 80.00 WHERE id = $1`, customer)
	b.keptEvents = append(b.keptEvents, event(balanceOrder, "order_paid", "done", paidPayload(balanceOrder, balancePay, "30.00", "balance"), old))
	// An invoice, paid in part.
	exec(`WITH i AS (INSERT INTO invoices (customer_id, status, amount, paid_amount, currency) VALUES ($1, 'issued', 15.00, 0, 'CNY') RETURNING *),
		l AS (INSERT INTO invoice_lines (invoice_id, position, description, unit_amount, amount) SELECT id, 1, description, amount, amount FROM i) SELECT count(*) FROM i`, customer)

	// Events of an unpaid order: an old done one goes, a recent done one,
	// an old failed one and an old pending one stay.
	unpaid := order("pending", "50.00", old)
	exec(`UPDATE orders SET paid_at = NULL WHERE id = $1`, unpaid)
	b.goneEvents = append(b.goneEvents, event(unpaid, "renewal_reminder", "done", `{}`, old))
	b.keptEvents = append(b.keptEvents,
		event(unpaid, "renewal_reminder", "done", `{}`, recent),
		event(unpaid, "order_cancelled", "failed", `{}`, old),
		event(unpaid, "renewal_reminder", "pending", `{}`, old.Add(time.Minute)))

	// Notifications: old sent ones go (one of a purged event, one of none);
	// a recent sent one, an old failed and an old pending stay.
	notification := func(eventID *uuid.UUID, status string, at time.Time) uuid.UUID {
		return q(`INSERT INTO notifications (event_id, recipient, channel, body, status, attempts, sent_at, created_at, updated_at)
			VALUES ($1, $2, 'email', 'b', $3, 1, CASE WHEN $3 = 'sent' THEN $4::timestamptz END, $4, $4) RETURNING id`,
			eventID, uuid.NewString()+"@example.com", status, at)
	}
	b.goneNotifications = append(b.goneNotifications,
		notification(&b.goneEvents[0], "sent", b.now.Add(-100*day)), notification(nil, "sent", b.now.Add(-91*day)))
	b.keptNotifications = append(b.keptNotifications,
		notification(&b.goneEvents[1], "sent", b.now.Add(-30*day)),
		notification(nil, "failed", b.now.Add(-200*day)), notification(nil, "pending", b.now.Add(-200*day)))

	requireClean(t, pool)
	return b
}

// purger is a Purger over b's database with the default retention.
func (b *bundle) purger(t *testing.T, edit func(*retention.Options)) *retention.Purger {
	t.Helper()
	o := retention.Options{Clock: func() time.Time { return b.now }, Job: startstop.Job{Logger: slog.New(slog.DiscardHandler)}}
	if edit != nil {
		edit(&o)
	}
	p, err := retention.New(b.pool, o)
	require.NoError(t, err)
	return p
}

func exist(t *testing.T, pool *pgxpool.Pool, table string, ids []uuid.UUID) []uuid.UUID {
	t.Helper()
	rows, err := pool.Query(context.Background(), `SELECT id FROM `+table+` WHERE id = ANY($1) ORDER BY id`, ids)
	require.NoError(t, err)
	found, err := pgx.CollectRows(rows, pgx.RowTo[uuid.UUID])
	require.NoError(t, err)
	return found
}

func requireClean(t *testing.T, pool *pgxpool.Pool) {
	t.Helper()
	r, err := ledger.Verify(context.Background(), pool)
	require.NoError(t, err)
	require.True(t, r.OK(), "%s", r)
}

// moneyCounts are the row counts of every table money questions read.
func moneyCounts(t *testing.T, pool *pgxpool.Pool) map[string]int64 {
	t.Helper()
	out := map[string]int64{}
	for _, table := range []string{"payments", "refunds", "balance_transactions", "invoices", "orders", "customers", "instances"} {
		var n int64
		require.NoError(t, pool.QueryRow(context.Background(), `SELECT count(*) FROM `+table).Scan(&n))
		out[table] = n
	}
	return out
}

func auditRow(t *testing.T, pool *pgxpool.Pool, action string, at time.Time) {
	t.Helper()
	require.NoError(t, store.AppendAudit(context.Background(), pool, store.AuditRecord{
		ActorKind: store.ActorSystem, ActorID: "test", Action: action, EntityType: "payment", EntityID: uuid.NewString(),
		After: []byte(`{"amount":"1.00"}`), At: at,
	}))
}

// partitions are audit_log's partitions by name, with their rows.
func partitions(t *testing.T, pool *pgxpool.Pool) map[string]int64 {
	t.Helper()
	rows, err := pool.Query(context.Background(), `
		SELECT c.relname::text, (xpath('/row/n/text()', query_to_xml(format('SELECT count(*) AS n FROM %I', c.relname), false, true, '')))[1]::text::bigint
		FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
		WHERE i.inhparent = 'audit_log'::regclass`)
	require.NoError(t, err)
	out := map[string]int64{}
	for rows.Next() {
		var name string
		var n int64
		require.NoError(t, rows.Scan(&name, &n))
		out[name] = n
	}
	require.NoError(t, rows.Err())
	return out
}

func monthName(at time.Time) string { return "audit_log_p" + at.UTC().Format("200601") }

// monthStart is the first instant of the UTC month months before at's.
func monthStart(at time.Time, months int) time.Time {
	at = at.UTC()
	return time.Date(at.Year(), at.Month()-time.Month(months), 1, 0, 0, 0, 0, time.UTC)
}

func TestOldDoneEventsAndSentNotificationsGoWhilePendingFailedAndOrderPaidStay(t *testing.T) {
	t.Parallel()
	b := setup(t)
	rep, err := b.purger(t, nil).RunOnce(context.Background())
	require.NoError(t, err)

	require.Empty(t, exist(t, b.pool, "events", b.goneEvents), "done events older than 30 days")
	require.ElementsMatch(t, b.keptEvents, exist(t, b.pool, "events", b.keptEvents),
		"order_paid, recent done, failed and pending events stay")
	require.Empty(t, exist(t, b.pool, "notifications", b.goneNotifications), "sent notifications older than 90 days")
	require.ElementsMatch(t, b.keptNotifications, exist(t, b.pool, "notifications", b.keptNotifications),
		"recent sent, failed and pending notifications stay")
	require.Equal(t, len(b.goneEvents), rep.Events.Deleted)
	require.Equal(t, len(b.goneNotifications), rep.Notifications.Deleted)

	var eventID *uuid.UUID
	require.NoError(t, b.pool.QueryRow(context.Background(), `SELECT event_id FROM notifications WHERE id = $1`, b.keptNotifications[0]).Scan(&eventID))
	require.Nil(t, eventID, "a kept notification of a deleted event loses only the link")
}

func TestMoneyTablesAndTheLedgerAreUntouched(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	// Money moves audited within the retention, the oldest kept month's
	// included.
	keptMonth := monthStart(b.now, retention.DefaultAuditMonths)
	_, err := store.CreateAuditPartitions(ctx, b.pool, keptMonth, 1)
	require.NoError(t, err)
	auditRow(t, b.pool, "payment.success", keptMonth.Add(time.Hour))
	auditRow(t, b.pool, "refund.succeeded", b.now.Add(-400*day))
	auditRow(t, b.pool, "balance.adjust", b.now)
	var audits int64
	require.NoError(t, b.pool.QueryRow(ctx, `SELECT count(*) FROM audit_log`).Scan(&audits))
	before := moneyCounts(t, b.pool)
	verified, err := ledger.Verify(ctx, b.pool)
	require.NoError(t, err)

	_, err = b.purger(t, nil).RunOnce(ctx)
	require.NoError(t, err)

	require.Equal(t, before, moneyCounts(t, b.pool))
	after, err := ledger.Verify(ctx, b.pool)
	require.NoError(t, err)
	require.True(t, after.OK(), "%s", after)
	require.Equal(t, verified.Totals.Received, after.Totals.Received)
	require.Equal(t, verified.Totals.Refunded, after.Totals.Refunded)
	require.Equal(t, verified.Totals.Balances, after.Totals.Balances)
	require.Equal(t, verified.Totals.BalanceTransactions, after.Totals.BalanceTransactions)
	var left int64
	require.NoError(t, b.pool.QueryRow(ctx, `SELECT count(*) FROM audit_log`).Scan(&left))
	require.Equal(t, audits, left, "audit rows within the retention stay")
}

func TestAnAuditMonthPastRetentionIsDroppedAndTheNextKept(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	dropped := monthStart(b.now, retention.DefaultAuditMonths+1)
	kept := monthStart(b.now, retention.DefaultAuditMonths)
	n, err := store.CreateAuditPartitions(ctx, b.pool, dropped, 2)
	require.NoError(t, err)
	require.Equal(t, 2, n)
	auditRow(t, b.pool, "payment.success", dropped)
	auditRow(t, b.pool, "payment.success", kept.Add(-time.Microsecond))
	auditRow(t, b.pool, "payment.success", kept)
	auditRow(t, b.pool, "payment.success", b.now)

	rep, err := b.purger(t, nil).RunOnce(ctx)
	require.NoError(t, err)
	require.Equal(t, []string{monthName(dropped)}, rep.PartitionsDropped)

	parts := partitions(t, b.pool)
	require.NotContains(t, parts, monthName(dropped))
	require.EqualValues(t, 1, parts[monthName(kept)], "the month that ended after the cut stays whole")
	require.EqualValues(t, 1, parts[monthName(b.now)])
	require.Contains(t, parts, "audit_log_default")
	for i := 1; i <= retention.MonthsAhead; i++ {
		require.Contains(t, parts, monthName(monthStart(b.now, -i)), "months ahead are ready")
	}
	var left int64
	require.NoError(t, b.pool.QueryRow(ctx, `SELECT count(*) FROM audit_log`).Scan(&left))
	require.EqualValues(t, 2, left)
}

func TestAuditKeptForeverDropsNoMonth(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	ancient := monthStart(b.now, 200)
	_, err := store.CreateAuditPartitions(ctx, b.pool, ancient, 1)
	require.NoError(t, err)
	auditRow(t, b.pool, "payment.success", ancient)
	rep, err := b.purger(t, func(o *retention.Options) { o.AuditMonths = retention.KeepForever }).RunOnce(ctx)
	require.NoError(t, err)
	require.Empty(t, rep.PartitionsDropped)
	require.EqualValues(t, 1, partitions(t, b.pool)[monthName(ancient)])
}

func TestAnAuditRowOfAMonthWithoutPartitionLandsInTheDefaultAndMovesToItsMonth(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	future := monthStart(b.now, -(retention.MonthsAhead + 3))
	auditRow(t, b.pool, "payment.success", future.Add(time.Hour))
	auditRow(t, b.pool, "payment.success", future.AddDate(0, 1, 0).Add(time.Hour)) // the month after: stays
	require.EqualValues(t, 2, partitions(t, b.pool)["audit_log_default"])

	n, err := store.CreateAuditPartitions(ctx, b.pool, future, 1)
	require.NoError(t, err)
	require.Equal(t, 1, n)
	parts := partitions(t, b.pool)
	require.EqualValues(t, 1, parts[monthName(future)])
	require.EqualValues(t, 1, parts["audit_log_default"])

	// Still append-only, through the parent and in the partition, with
	// the parent's name in the error.
	_, err = b.pool.Exec(ctx, `DELETE FROM audit_log`)
	require.ErrorIs(t, store.MapError(err), store.ErrCheckViolation)
	require.ErrorContains(t, err, "audit_log is append-only")
	_, err = b.pool.Exec(ctx, `UPDATE audit_log_default SET action = 'x'`)
	require.ErrorContains(t, err, "audit_log is append-only")
	var ids []int64
	rows, err := b.pool.Query(ctx, `SELECT id FROM audit_log ORDER BY id`)
	require.NoError(t, err)
	ids, err = pgx.CollectRows(rows, pgx.RowTo[int64])
	require.NoError(t, err)
	require.Len(t, ids, 2, "the moved row kept its id")
}

func TestASecondRunDeletesNothingMore(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	dropped := monthStart(b.now, retention.DefaultAuditMonths+3)
	_, err := store.CreateAuditPartitions(ctx, b.pool, dropped, 1)
	require.NoError(t, err)
	auditRow(t, b.pool, "payment.success", dropped)
	p := b.purger(t, nil)
	first, err := p.RunOnce(ctx)
	require.NoError(t, err)
	require.NotZero(t, first.Events.Deleted)
	require.NotZero(t, first.Notifications.Deleted)
	require.Len(t, first.PartitionsDropped, 1)
	parts := partitions(t, b.pool)

	second, err := p.RunOnce(ctx)
	require.NoError(t, err)
	require.Zero(t, second.Events.Deleted)
	require.Zero(t, second.Notifications.Deleted)
	require.Empty(t, second.PartitionsDropped)
	require.Zero(t, second.PartitionsCreated)
	require.Equal(t, parts, partitions(t, b.pool))
	require.ElementsMatch(t, b.keptEvents, exist(t, b.pool, "events", b.keptEvents))
}

func TestEachStatementExaminesAtMostTheBatchSize(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	var orderID uuid.UUID
	require.NoError(t, b.pool.QueryRow(ctx, `SELECT order_id FROM events LIMIT 1`).Scan(&orderID))
	_, err := b.pool.Exec(ctx, `INSERT INTO events (event_type, order_id, status, created_at, updated_at)
		SELECT 'renewal_reminder', $1, 'done', $2::timestamptz - i * interval '1 second', $2::timestamptz
		FROM generate_series(1, 7) i`, orderID, b.now.Add(-40*day))
	require.NoError(t, err)

	rep, err := b.purger(t, func(o *retention.Options) { o.BatchSize = 2 }).RunOnce(ctx)
	require.NoError(t, err)
	require.Equal(t, 7+len(b.goneEvents), rep.Events.Deleted)
	require.GreaterOrEqual(t, rep.Events.Statements, rep.Events.Examined/2)
	require.Empty(t, exist(t, b.pool, "events", b.goneEvents))
	require.ElementsMatch(t, b.keptEvents, exist(t, b.pool, "events", b.keptEvents))
}

func TestOnlyTheLeaderPurges(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	elector := func(holder string) *cluster.Elector {
		e, err := cluster.NewElector(b.pool, cluster.ElectorOptions{
			Role: cluster.RoleEventWorker, Holder: holder, TTL: 5 * time.Second, RenewInterval: time.Second,
			Logger: slog.New(slog.DiscardHandler),
		})
		require.NoError(t, err)
		return e
	}
	leader, follower := elector("node-a"), elector("node-b")
	require.NoError(t, leader.Start(ctx))
	t.Cleanup(leader.Stop)
	changes, unsubscribe := leader.Subscribe()
	for !testkit.WaitOrTimeout(t, changes, "node-a leads") {
	}
	unsubscribe()
	require.NoError(t, follower.Start(ctx))
	t.Cleanup(follower.Stop)

	start := func(e *cluster.Elector) (*retention.Purger, *testsignal.Signal) {
		rounds := testsignal.New()
		p := b.purger(t, func(o *retention.Options) {
			o.Active = e.IsLeader
			o.Interval = time.Millisecond
			o.Rounds = rounds
		})
		require.NoError(t, p.Start(ctx))
		t.Cleanup(p.Stop)
		return p, rounds
	}
	follows, followerRounds := start(follower)
	followerRounds.Wait(t, 3, "three ticks of the follower")
	require.ElementsMatch(t, b.goneEvents, exist(t, b.pool, "events", b.goneEvents), "the follower deleted nothing")
	require.ElementsMatch(t, b.goneNotifications, exist(t, b.pool, "notifications", b.goneNotifications))

	leads, leaderRounds := start(leader)
	leaderRounds.Wait(t, 1, "the leader's first tick")
	require.Empty(t, exist(t, b.pool, "events", b.goneEvents))
	require.Empty(t, exist(t, b.pool, "notifications", b.goneNotifications))
	require.ElementsMatch(t, b.keptEvents, exist(t, b.pool, "events", b.keptEvents))

	// Both stop with no round half done.
	for _, s := range []struct {
		p      *retention.Purger
		rounds *testsignal.Signal
	}{{follows, followerRounds}, {leads, leaderRounds}} {
		s.p.Stop()
		require.Equal(t, testsignal.Mark(s.rounds.Count()), s.rounds.Mark(), "Stop waited for the tick under way")
	}
}

func TestAnAuditRetentionBelowTheMinimumIsRefused(t *testing.T) {
	t.Parallel()
	_, err := retention.New(nil, retention.Options{AuditMonths: retention.MinAuditMonths - 1})
	require.ErrorContains(t, err, "at least 12")
	_, err = retention.New(nil, retention.Options{AuditMonths: retention.MinAuditMonths})
	require.NoError(t, err)
}

func TestAuditKeepFromIsTheStartOfTheMonthRetentionMonthsBefore(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 3, 31, 23, 0, 0, 0, time.FixedZone("x", -5*3600)) // April 1st in UTC
	require.Equal(t, time.Date(2019, 4, 1, 0, 0, 0, 0, time.UTC), retention.AuditKeepFrom(now, 84))
	require.Equal(t, time.Date(2025, 4, 1, 0, 0, 0, 0, time.UTC), retention.AuditKeepFrom(now, 12))
}
