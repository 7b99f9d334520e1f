package harness

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/rustbill/paymentd/internal/ledger"
	"github.com/rustbill/paymentd/internal/testdb"
)

// The pgbench-callback ceilings (three round trips, as settle sends them,
// and the hypothetical two) run without a failed transaction and settle
// each payment they are given once: payment success, order paid, one
// order_paid, the money model clean.
func TestCallbackCeilingScriptsSettleEachPaymentOnce(t *testing.T) {
	t.Parallel()
	bin, err := findPgbench()
	if err != nil {
		t.Skip(err)
	}
	for name, script := range map[string]string{"callback": callbackScript, "callback-pipelined": pipelinedCallbackScript} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
			defer cancel()
			dbURL := testdb.URL(t)
			pool, err := pgxpool.New(ctx, dbURL)
			require.NoError(t, err)
			defer pool.Close()
			_, err = pool.Exec(ctx, `
				INSERT INTO plugins (name, type, source, sha256) VALUES
				  ('epay', 'gateway', '', repeat('0', 64)), ('http_provider', 'upstream_provider', '', repeat('0', 64))`)
			require.NoError(t, err)
			w, err := SeedWorld(ctx, pool, "http://epay.invalid", "http://provider.invalid", "secret", 10)
			require.NoError(t, err)
			const clients, each = ceilingClients, 20
			r, err := w.SeedPendingPayments(ctx, pool, clients*each)
			require.NoError(t, err)

			res, err := pgbenchTxns(ctx, bin, dbURL, t.TempDir(), name, script, clients, each, callbackVars(w, r.From))
			require.NoError(t, err)
			require.Equal(t, clients*each, res.Txns)
			require.Zero(t, res.Failed)

			var settled, paid, events int
			require.NoError(t, pool.QueryRow(ctx, `
				SELECT count(*) FILTER (WHERE p.status = 'success'), count(*) FILTER (WHERE o.status = 'paid'),
				       (SELECT count(*) FROM events e WHERE e.order_id = ANY(array_agg(o.id)) AND e.event_type = 'order_paid')
				FROM payments p JOIN orders o ON o.id = p.order_id WHERE p.id = ANY($1)`, idsOf(r)).Scan(&settled, &paid, &events))
			require.Equal(t, []int{clients * each, clients * each, clients * each}, []int{settled, paid, events})
			rep, err := ledger.Verify(ctx, pool)
			require.NoError(t, err)
			require.True(t, rep.OK(), "%+v", rep.Violations)
		})
	}
}
