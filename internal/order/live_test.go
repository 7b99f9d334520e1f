package order_test

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/rustbill/paymentd/internal/money"
	"github.com/rustbill/paymentd/internal/order"
	"github.com/rustbill/paymentd/internal/store"
	"github.com/rustbill/paymentd/internal/testdb"
	"github.com/rustbill/paymentd/internal/testfixture"
)

// renewalRows describes a renewal situation written straight into the
// tables (a state the domain needs many steps to reach): a monthly order
// in status whose first period, paid, ended at periodEnd and is not
// followed; when renews, a second period from periodEnd, unpaid, billed by
// an issued invoice of amount with paid already paid.
type renewalRows struct {
	status                   order.Status
	renews                   bool
	balance, credit          string
	amount, paid             string
	disabled                 bool
	paidUntil                time.Time
	customer, order, invoice uuid.UUID
}

// periodEnd is when the seeded orders' paid period ends (and their
// renewal invoice falls due).
var periodEnd = time.Date(2027, 3, 1, 0, 0, 0, 0, time.UTC)

// seedRenewal writes r's rows and fills in its ids.
func seedRenewal(t *testing.T, db store.DB, r *renewalRows) {
	t.Helper()
	ctx := context.Background()
	r.customer = testfixture.Customer(t, db)
	var disabledAt *time.Time
	if r.disabled {
		disabledAt = &periodEnd
	}
	_, err := db.Exec(ctx, `UPDATE customers SET credit_limit = $2, balance = $3, disabled_at = $4 WHERE id = $1`,
		r.customer, money.MustParse(r.credit), money.MustParse(r.balance), disabledAt)
	require.NoError(t, err)
	reason := ""
	if r.status == order.StatusSuspended {
		reason = order.SuspendReasonOverdue
	}
	start := periodEnd.AddDate(0, -1, 0)
	require.NoError(t, db.QueryRow(ctx, `INSERT INTO orders (customer_id, total_amount, currency, status, suspend_reason,
		billing_cycle, renewal_price, renews, paid_at, paid_until, description)
		VALUES ($1, 0, 'CNY', $2, $3, 'monthly', 10, $4, $5, $6, 'VPS') RETURNING id`,
		r.customer, string(r.status), reason, r.renews, start, r.paidUntil).Scan(&r.order))
	_, err = db.Exec(ctx, `INSERT INTO service_periods (order_id, seq, starts_at, ends_at, anchor_at, anchor_months, status, paid_at)
		VALUES ($1, 1, $2, $3, $2, 1, 'paid', $2)`, r.order, start, periodEnd)
	require.NoError(t, err)
	if !r.renews {
		return
	}
	require.NoError(t, db.QueryRow(ctx, `WITH i AS (INSERT INTO invoices (customer_id, order_id, status, amount, paid_amount, currency, issued_at, due_at)
		VALUES ($1, $2, 'issued', $3, $4, 'CNY', $5, $6) RETURNING *),
		l AS (INSERT INTO invoice_lines (invoice_id, position, description, unit_amount, amount) SELECT id, 1, description, amount, amount FROM i) SELECT id FROM i`,
		r.customer, r.order, money.MustParse(r.amount), money.MustParse(r.paid), start, periodEnd).Scan(&r.invoice))
	_, err = db.Exec(ctx, `INSERT INTO service_periods (order_id, seq, starts_at, ends_at, anchor_at, anchor_months, invoice_id, status)
		VALUES ($1, 2, $2, $3, $4, 2, $5, 'unpaid')`, r.order, periodEnd, periodEnd.AddDate(0, 1, 0), start, r.invoice)
	require.NoError(t, err)
}

// The live set has one home, order's live (Status.Live, LiveStatuses):
// every query that selects live orders takes it as a parameter and selects
// by it alone. Each scan is run over an order of every status that it
// would find were the order live, once with the live set, which must find
// exactly the orders whose Status.Live is true, and once with the other
// statuses, which must find exactly those: a query that spells a status
// list of its own (drifting from Go's the day the set changes) fails the
// second.
func TestEveryLiveOrderQueryTakesTheLiveSetFromGo(t *testing.T) {
	t.Parallel()
	db := testdb.Pool(t)
	ctx := context.Background()
	now := periodEnd.Add(20 * 24 * time.Hour)
	renewing, ending := map[uuid.UUID]order.Status{}, map[uuid.UUID]order.Status{}
	for _, st := range order.Statuses {
		// Due for every scan: the paid period ended, the renewal invoice
		// is past due, partly paid and covered by the balance, and the
		// paid end falls within the overview's window.
		r := &renewalRows{status: st, renews: true, balance: "100.00", credit: "0.00", amount: "10.00", paid: "1.00", paidUntil: now.Add(time.Hour)}
		seedRenewal(t, db, r)
		renewing[r.order] = st
		e := &renewalRows{status: st, renews: false, balance: "0.00", credit: "0.00", paidUntil: periodEnd}
		seedRenewal(t, db, e)
		ending[e.order] = st
	}
	var other []string
	for _, st := range order.Statuses {
		if !st.Live() {
			other = append(other, string(st))
		}
	}
	require.NotEmpty(t, order.LiveStatuses())
	require.NotEmpty(t, other)

	scans := map[string]func(set []string) ([]uuid.UUID, map[uuid.UUID]order.Status){
		"ListRenewalsDue": func(set []string) ([]uuid.UUID, map[uuid.UUID]order.Status) {
			ids, err := store.Q(db).ListRenewalsDue(ctx, store.ListRenewalsDueParams{
				EndsBefore: now, LiveStatuses: set, MaxRows: 100,
			})
			require.NoError(t, err)
			return ids, renewing
		},
		"ListServicesEnding": func(set []string) ([]uuid.UUID, map[uuid.UUID]order.Status) {
			ids, err := store.Q(db).ListServicesEnding(ctx, store.ListServicesEndingParams{
				Now: now, LiveStatuses: set, MaxRows: 100,
			})
			require.NoError(t, err)
			return ids, ending
		},
		"ListUnpaidPeriodsDue (termination)": func(set []string) ([]uuid.UUID, map[uuid.UUID]order.Status) {
			ids, err := store.Q(db).ListUnpaidPeriodsDue(ctx, store.ListUnpaidPeriodsDueParams{
				DueBefore: now, Statuses: set, MaxRows: 100,
			})
			require.NoError(t, err)
			return ids, renewing
		},
		"ListUnpaidPeriodsCoveredByBalance": func(set []string) ([]uuid.UUID, map[uuid.UUID]order.Status) {
			ids, err := store.Q(db).ListUnpaidPeriodsCoveredByBalance(ctx, store.ListUnpaidPeriodsCoveredByBalanceParams{
				DueBefore: now, LiveStatuses: set, MaxRows: 100,
			})
			require.NoError(t, err)
			return ids, renewing
		},
		"ListUnpaidPeriodsForNotices": func(set []string) ([]uuid.UUID, map[uuid.UUID]order.Status) {
			rows, err := store.Q(db).ListUnpaidPeriodsForNotices(ctx, store.ListUnpaidPeriodsForNoticesParams{
				DueBefore: now, LiveStatuses: set, MaxRows: 100, Skip: 0,
			})
			require.NoError(t, err)
			var ids []uuid.UUID
			for _, r := range rows {
				ids = append(ids, r.OrderID)
			}
			return ids, renewing
		},
		"ListPartlyPaidPastTermination": func(set []string) ([]uuid.UUID, map[uuid.UUID]order.Status) {
			rows, n, err := store.ListPartlyPaidPastTermination(ctx, db, now, set, 100)
			require.NoError(t, err)
			var ids []uuid.UUID
			for _, r := range rows {
				ids = append(ids, r.Order.ID)
			}
			require.EqualValues(t, len(ids), n, "the count is the list's")
			count, err := store.Q(db).CountPartlyPaidPastTermination(ctx, store.CountPartlyPaidPastTerminationParams{
				DueBefore: now, LiveStatuses: set,
			})
			require.NoError(t, err)
			require.EqualValues(t, len(ids), count, "CountPartlyPaidPastTermination")
			return ids, renewing
		},
	}
	for _, set := range [][]string{order.LiveStatuses(), other} {
		for name, scan := range scans {
			ids, seeded := scan(set)
			var want, got []order.Status
			for _, st := range seeded {
				if slices.Contains(set, string(st)) {
					want = append(want, st)
				}
			}
			for _, id := range ids {
				st, ok := seeded[id]
				require.True(t, ok, "%s found an order it was not given", name)
				got = append(got, st)
			}
			slices.Sort(want)
			slices.Sort(got)
			require.Equal(t, want, got, "%s with the statuses %v", name, set)
		}
		due, err := store.Q(db).RenewalsDueByCurrency(ctx, store.RenewalsDueByCurrencyParams{
			Now: now, Until: now.Add(24 * time.Hour), LiveStatuses: set,
		})
		require.NoError(t, err)
		n := int64(0)
		for _, d := range due {
			n += d.Count
		}
		require.EqualValues(t, len(set), n, "RenewalsDueByCurrency with the statuses %v", set)
	}
	for _, st := range order.Statuses {
		require.Equal(t, slices.Contains(order.LiveStatuses(), string(st)), st.Live(), st)
	}
}

// No query spells the live set out: a literal status list that holds every
// live status is the set written a second time, which the day the set
// changes goes on selecting the old one. Such a query takes
// @live_statuses (order.LiveStatuses) instead.
func TestNoQuerySpellsTheLiveSet(t *testing.T) {
	t.Parallel()
	files, err := filepath.Glob("../../sql/queries/*.sql")
	require.NoError(t, err)
	require.NotEmpty(t, files)
	list := regexp.MustCompile(`(?i)\bIN\s*\(([^()]*)\)`)
	quoted := regexp.MustCompile(`'([^']*)'`)
	for _, f := range files {
		text, err := os.ReadFile(f)
		require.NoError(t, err)
		for _, m := range list.FindAllStringSubmatch(string(text), -1) {
			var names []string
			for _, q := range quoted.FindAllStringSubmatch(m[1], -1) {
				names = append(names, q[1])
			}
			all := len(names) > 0
			for _, st := range order.LiveStatuses() {
				all = all && slices.Contains(names, st)
			}
			require.False(t, all, "%s spells the live set out (%s): take @live_statuses, order.LiveStatuses()", filepath.Base(f), m[0])
		}
	}
}
