package order_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rustbill/paymentd/internal/order/renewal"
	"github.com/rustbill/paymentd/internal/ordertest"
	"github.com/rustbill/paymentd/internal/testdb"
	"github.com/rustbill/paymentd/internal/testkit"
)

// maxRenewalRoundTrips bounds the round trips of one service's renewal
// paid from the balance by the billing run inside its batch's transaction
// (docs/performance.md, "The billing run"): 31 before issue 40's trims, 17
// with a transaction per renewal, 12 in a batch whose renewals were
// written one by one. maxBatchRoundTrips are the batch's own: BEGIN with
// the locks of its customers and orders, their plan changes and latest
// periods, the invoice numbers, the invoices, their lines with the audit
// rows and the periods, and COMMIT.
const (
	maxRenewalRoundTrips = 8
	maxBatchRoundTrips   = 6
)

// The billing run renews a batch of services in one transaction: it locks
// their customers and orders in one round trip, reads their pending plan
// changes and latest periods in one more, and writes their invoices,
// lines and periods in statements per batch; each renewal paid from the
// balance writes the ledger row from the customer it holds and takes the
// renewed order from the update of its paid end; paying a renewal invoice
// does not look for a plan change it would apply.
func TestARenewalPaidFromTheBalanceTakesFewRoundTrips(t *testing.T) {
	t.Parallel()
	pool, trips := testdb.TracedPool(t, testdb.URL(t))
	start := time.Date(2027, time.February, 1, 0, 0, 0, 0, time.UTC)
	end := start.AddDate(0, 1, 0)
	ob := ordertest.SetupWithPool(t, pool)
	small := ob.Product(t, "10.00", "CNY")
	_, err := pool.Exec(context.Background(), `UPDATE products SET billing_cycle = 'monthly' WHERE id = $1`, small.ID)
	require.NoError(t, err)
	seedPlanServices(t, pool, 3, small.ID, start, end)
	clock := testkit.NewClockAt(end.Add(-24 * time.Hour))
	run := renewal.New(pool, renewal.Options{Node: "bench", InvoiceDays: 7, AutoApplyBalance: true, Clock: clock.Now, BatchSize: 100})
	trips.Reset()
	r, err := run.RunOnce(context.Background())
	require.NoError(t, err)
	sent := trips.Reset()
	require.Equal(t, 3, r.Issued)
	require.Equal(t, 3, r.AutoPaid)
	// The last service's transaction, BEGIN to COMMIT.
	first := 0
	for i, s := range sent {
		if s == "begin" || strings.HasPrefix(s, "batch[BEGIN") {
			first = i
		}
	}
	commit := first
	for commit < len(sent) && sent[commit] != "commit" && !strings.HasSuffix(sent[commit], "COMMIT]") {
		commit++
	}
	require.Less(t, commit, len(sent))
	one := sent[first : commit+1]
	for i, s := range one {
		t.Logf("  %2d %s", i+1, s)
	}
	require.LessOrEqual(t, len(one), maxBatchRoundTrips+3*maxRenewalRoundTrips, "three renewals in one transaction")
	for _, name := range []string{"GetOrder", "LockOrderCustomerAccount", "GetOrderForUpdate", "PlanChangeByInvoiceForUpdate", "LatestServicePeriod", "PendingPlanChange", "InsertInvoice", "TakeInvoiceNumber", "InsertServicePeriod"} {
		require.NotContains(t, one, name)
	}
	pending := 0
	for _, s := range one {
		if strings.Contains(s, "PendingPlanChanges") {
			pending++
		}
	}
	require.Equal(t, 1, pending, "the pending plan changes are read once, for the batch")
}
