package store_test

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/rustbill/paymentd/internal/store"
)

// queriesDir holds the sqlc queries, each introduced by "-- name: Name :kind".
const queriesDir = "../../sql/queries"

// indexUses is the justification table of docs/performance.md ("Writes
// that cost the database less") in code: every index of the four tables a
// callback and the worker write, and the sqlc queries that use it (the
// plans are in the note). Every index costs every insert, and every update
// that is not HOT, a new entry; one that no query uses is dropped, not
// listed. A constraint's index names the query that relies on the
// constraint.
var indexUses = map[string][]string{
	"payments_pkey":                     {"GetPayment", "GetPaymentForUpdate", "MarkPaymentSucceeded", "FailPendingPayments"},
	"payments_one_pending_key":          {"InsertGatewayPayment", "GetPendingGatewayPayment", "CountPendingPayments", "FailPendingPayments"},
	"payments_gateway_payment_id_key":   {"MarkPaymentSucceeded", "PaymentWithGatewayID"},
	"payments_created_at_idx":           {"ListPayments", "PaymentStatsSince", "ExportPaymentsPage"},
	"payments_customer_id_idx":          {"ListPayments", "CountPayments"},
	"payments_order_id_idx":             {"ListPayments", "CountPayments"},
	"payments_invoice_id_idx":           {"FailPendingPayments", "ListPayments", "CountPayments"},
	"payments_gateway_interface_id_idx": {"ListPayments", "CountPayments"},
	"payments_reconcile_idx":            {"ClaimDuePayments", "ExpireReconciliations"},
	"payments_to_return_idx":            {"ListPayments", "MoneyToReturn"},

	// Both unique on id: the primary key is the target of events' and
	// instances' foreign keys (checked by InsertEvent), the composite one of
	// payments' and invoices' (InsertGatewayPayment); the planner reads an
	// order by id through either.
	"orders_pkey":                     {"InsertEvent", "GetOrder"},
	"orders_id_customer_currency_key": {"InsertGatewayPayment", "InsertPayment", "GetOrderForUpdate", "SetOrderStatus", "CancelOrder"},
	"orders_created_at_idx":           {"ListOrders"},
	"orders_customer_id_idx":          {"ListOrders", "CountOrders"},
	"orders_pending_created_at_idx":   {"ListPendingOrdersCreatedBefore"},

	"events_pkey":           {"GetEvent", "HoldEventClaim", "CompleteEvent", "FailEventAttempt"},
	"events_pending_idx":    {"ClaimEvents"},
	"events_processing_idx": {"ReclaimExpiredEvents"},
	"events_order_id_idx":   {"ClaimEvents", "ListOrderEvents"},
	"events_created_at_idx": {"ListEvents"},

	"audit_log_pkey":       {"InsertAuditLog", "ListAuditEntries"},
	"audit_log_entity_idx": {"ListAuditEntries", "PaymentAuditExists", "AuditEntryExists"},
	"audit_log_actor_idx":  {"ListAuditEntries"},
	"audit_log_action_idx": {"ListAuditEntries", "AuditActionExists"},
}

// An index on payments, orders, events or audit_log that is not in
// indexUses fails here: add it with the queries that use it (and its plan
// to docs/performance.md), or do not add it. So does an entry whose index
// is gone, or that names a query sql/queries does not have.
func TestEveryIndexOfTheWrittenTablesNamesTheQueriesThatUseIt(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()

	rows, err := b.pool.Query(ctx, `
		SELECT indexname FROM pg_indexes
		WHERE schemaname = 'public' AND tablename IN ('payments', 'orders', 'events', 'audit_log')`)
	require.NoError(t, err)
	indexes, err := pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	listed := make([]string, 0, len(indexUses))
	for name := range indexUses {
		listed = append(listed, name)
	}
	require.ElementsMatch(t, listed, indexes,
		"indexes of payments, orders, events and audit_log against indexUses (docs/performance.md, \"Writes that cost the database less\")")

	queries := sqlcQueryNames(t)
	for index, uses := range indexUses {
		require.NotEmpty(t, uses, "%s names no query", index)
		for _, q := range uses {
			require.Contains(t, queries, q, "%s: no query %s in sql/queries", index, q)
		}
	}
}

func sqlcQueryNames(t *testing.T) map[string]bool {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(queriesDir, "*.sql"))
	require.NoError(t, err)
	require.NotEmpty(t, files)
	name := regexp.MustCompile(`(?m)^-- name: (\w+) :`)
	names := map[string]bool{}
	for _, f := range files {
		src, err := os.ReadFile(f)
		require.NoError(t, err)
		for _, m := range name.FindAllStringSubmatch(string(src), -1) {
			names[m[1]] = true
		}
	}
	return names
}

// After the callback has paid an order, its status moves (paid →
// provisioning → active) change no indexed column: with the room
// fillfactor leaves on the page they are HOT updates, which add no index
// entry. The move out of pending is not, and cannot be: it takes the order
// out of the timeout scan's index.
func TestAnOrdersStatusMovesAfterPaymentAreHOT(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	conn, err := pgx.ConnectConfig(ctx, b.pool.Config().ConnConfig.Copy())
	require.NoError(t, err)
	defer conn.Close(ctx)

	// updates is (all, HOT) updates of orders so far, this connection's
	// statistics flushed first.
	updates := func() (int64, int64) {
		t.Helper()
		_, err := conn.Exec(ctx, `SELECT pg_stat_force_next_flush()`)
		require.NoError(t, err)
		var all, hot int64
		require.NoError(t, conn.QueryRow(ctx, `
			SELECT n_tup_upd, n_tup_hot_upd FROM pg_stat_user_tables WHERE relname = 'orders'`).Scan(&all, &hot))
		return all, hot
	}
	now := time.Now()
	all0, hot0 := updates()
	_, err = store.Q(conn).SetOrderStatus(ctx, store.SetOrderStatusParams{
		ID: b.orderID, FromStatus: "pending", ToStatus: "paid", PaidAt: &now, UpdatedAt: now,
	})
	require.NoError(t, err)
	all1, hot1 := updates()
	require.Equal(t, all0+1, all1)
	require.Equal(t, hot0, hot1, "pending → paid leaves the timeout scan's index: not HOT")

	_, err = store.Q(conn).SetOrderStatus(ctx, store.SetOrderStatusParams{
		ID: b.orderID, FromStatus: "paid", ToStatus: "provisioning", UpdatedAt: now,
	})
	require.NoError(t, err)
	_, err = store.Q(conn).SetOrderStatus(ctx, store.SetOrderStatusParams{
		ID: b.orderID, FromStatus: "provisioning", ToStatus: "active", UpdatedAt: now,
	})
	require.NoError(t, err)
	all2, hot2 := updates()
	require.Equal(t, all1+2, all2)
	require.Equal(t, hot1+2, hot2, "paid → provisioning → active change no indexed column: both HOT")
}

// The payment timeout scan reads the pending orders through their partial
// index, whose predicate (never paid, never cancelled) names no status: the
// query must repeat that predicate, or the planner cannot use the index and
// reads every order ever placed.
func TestTheTimeoutScanReadsOnlyThePendingOrders(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	_, err := b.pool.Exec(ctx, `
		INSERT INTO orders (customer_id, status, total_amount, currency, paid_at, cancelled_at, cancel_reason, created_at)
		SELECT $1, CASE WHEN g % 2 = 0 THEN 'active' ELSE 'cancelled' END, 1.00, 'CNY',
		       CASE WHEN g % 2 = 0 THEN now() - interval '2 days' END,
		       CASE WHEN g % 2 = 1 THEN now() - interval '2 days' END,
		       CASE WHEN g % 2 = 1 THEN 'timeout' ELSE '' END,
		       now() - interval '3 days'
		FROM generate_series(1, 2000) g`, b.customerID)
	require.NoError(t, err)
	rows, err := b.pool.Query(ctx, `
		INSERT INTO orders (customer_id, total_amount, currency, created_at)
		SELECT $1, 1.00, 'CNY', now() - g * interval '1 day' FROM generate_series(0, 3) g
		RETURNING id`, b.customerID)
	require.NoError(t, err)
	pending, err := pgx.CollectRows(rows, pgx.RowTo[uuid.UUID])
	require.NoError(t, err)

	var last pgx.TraceQueryStartData
	cfg := b.pool.Config().ConnConfig.Copy()
	cfg.Tracer = tracerFunc(func(d pgx.TraceQueryStartData) { last = d })
	conn, err := pgx.ConnectConfig(ctx, cfg)
	require.NoError(t, err)
	defer conn.Close(ctx)

	ids, err := store.Q(conn).ListPendingOrdersCreatedBefore(ctx, store.ListPendingOrdersCreatedBeforeParams{
		Cutoff: time.Now().Add(-12 * time.Hour), RowLimit: 100,
	})
	require.NoError(t, err)
	// b.orderID (the fixture's, pending, created now) and pending[0] are
	// too young; the other three are due, oldest first.
	require.Equal(t, []uuid.UUID{pending[3], pending[2], pending[1]}, ids)
	requireIndexedLookup(t, conn, last, "ListPendingOrdersCreatedBefore")
}
