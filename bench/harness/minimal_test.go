package harness

import (
	"context"
	"encoding/json"
	"strconv"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/rustbill/paymentd/internal/ledger"
	"github.com/rustbill/paymentd/internal/money"
	"github.com/rustbill/paymentd/internal/order"
	"github.com/rustbill/paymentd/internal/testdb"
)

// pgbench-minimal settles every seeded pending payment it is given, each
// once (8 clients, 50 transactions each, on 400 payments: all of them and
// none twice), the way the service would leave them: payment success with
// the gateway ids, order paid, one order_paid event with the payload
// settle writes, the money model clean (internal/ledger.Verify). The
// payments beyond its range stay pending.
func TestMinimalSettlementSettlesEachPaymentOnceLikeTheService(t *testing.T) {
	t.Parallel()
	bin, err := findPgbench()
	if err != nil {
		t.Skip(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	dbURL := testdb.URL(t)
	pool, err := pgxpool.New(ctx, dbURL)
	require.NoError(t, err)
	defer pool.Close()
	// What paymentd's plugin scan would have registered.
	_, err = pool.Exec(ctx, `
		INSERT INTO plugins (name, type, source, sha256) VALUES
		  ('epay', 'gateway', '', repeat('0', 64)), ('http_provider', 'upstream_provider', '', repeat('0', 64))`)
	require.NoError(t, err)
	w, err := SeedWorld(ctx, pool, "http://epay.invalid", "http://provider.invalid", "secret", 10)
	require.NoError(t, err)
	const clients, each = ceilingClients, 50
	r, err := w.SeedPendingPayments(ctx, pool, clients*each+clients)
	require.NoError(t, err)

	res, err := pgbenchTxns(ctx, bin, dbURL, t.TempDir(), "minimal", minimalScript, clients, each, minimalVars(r.From))
	require.NoError(t, err)
	require.Equal(t, clients*each, res.Txns)
	require.Zero(t, res.Failed)

	rows, err := pool.Query(ctx, `
		SELECT p.status, o.status, p.gateway_payment_id, p.gateway_tx_id, p.paid_at IS NOT NULL AND o.paid_at IS NOT NULL,
		       p.next_reconcile_at IS NULL, p.id, o.id, p.amount::text, p.currency,
		       (SELECT count(*) FROM events e WHERE e.order_id = o.id AND e.event_type = 'order_paid'),
		       (SELECT e.payload FROM events e WHERE e.order_id = o.id AND e.event_type = 'order_paid' LIMIT 1)
		FROM payments p JOIN orders o ON o.id = p.order_id
		WHERE p.id = ANY($1) ORDER BY p.id`, idsOf(r))
	require.NoError(t, err)
	defer rows.Close()
	settled := 0
	for i := 0; rows.Next(); i++ {
		var payStatus, orderStatus, gwID, txID, amount, currency string
		var paid, cleared bool
		var pid, oid uuid.UUID
		var events int
		var payload []byte
		require.NoError(t, rows.Scan(&payStatus, &orderStatus, &gwID, &txID, &paid, &cleared, &pid, &oid, &amount, &currency, &events, &payload))
		n := r.At(i)
		require.Equal(t, BenchID(kindPayment, n), pid)
		if i >= clients*each {
			require.Equal(t, []any{"pending", "pending", 0}, []any{payStatus, orderStatus, events}, "payment %d is beyond the run", n)
			continue
		}
		settled++
		require.Equal(t, []any{"success", "paid", "PGM" + strconv.FormatInt(n, 10), "PGM" + strconv.FormatInt(n, 10), true, true, 1},
			[]any{payStatus, orderStatus, gwID, txID, paid, cleared, events}, "payment %d", n)
		service, err := json.Marshal(order.OrderPaidPayload{OrderID: oid, PaymentID: &pid, Amount: money.MustParse(amount), Currency: currency, Method: order.MethodGateway})
		require.NoError(t, err)
		require.JSONEq(t, string(service), string(payload), "order_paid of payment %d", n)
	}
	require.NoError(t, rows.Err())
	require.Equal(t, clients*each, settled)

	rep, err := ledger.Verify(ctx, pool)
	require.NoError(t, err)
	require.True(t, rep.OK(), "%+v", rep.Violations)
}

func idsOf(r Range) []uuid.UUID {
	ids := make([]uuid.UUID, r.N)
	for i := range ids {
		ids[i] = BenchID(kindPayment, r.At(i))
	}
	return ids
}
