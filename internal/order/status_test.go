package order_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/rustbill/paymentd/internal/order"
	"github.com/rustbill/paymentd/internal/testdb"
	"github.com/rustbill/paymentd/internal/testfixture"
)

// orderTransitions is docs/decisions.md's "order transitions", written out pair
// by pair; every pair of statuses not listed here must be refused.
var orderTransitions = map[[2]order.Status]bool{
	{order.StatusPending, order.StatusPaid}:           true, // callback
	{order.StatusPending, order.StatusProvisioning}:   true, // balance payment
	{order.StatusPaid, order.StatusProvisioning}:      true, // worker takes order_paid
	{order.StatusProvisioning, order.StatusActive}:    true, // provisioned
	{order.StatusProvisioning, order.StatusCancelled}: true, // provisioning failed
	{order.StatusPending, order.StatusCancelled}:      true, // timeout, customer or admin cancel
	{order.StatusActive, order.StatusSuspended}:       true, // active ⇄ suspended
	{order.StatusSuspended, order.StatusActive}:       true,
	{order.StatusActive, order.StatusCompleted}:       true,
	{order.StatusActive, order.StatusTerminated}:      true, // active/suspended → terminated
	{order.StatusSuspended, order.StatusTerminated}:   true,
	{order.StatusPaid, order.StatusRefunded}:          true, // paid/provisioning/active → refunded
	{order.StatusProvisioning, order.StatusRefunded}:  true,
	{order.StatusActive, order.StatusRefunded}:        true,
	{order.StatusSuspended, order.StatusRefunded}:     true, // a lost dispute or a full refund while suspended
}

func TestOrderTransitionTableAllowsExactlyTheDesignedPairs(t *testing.T) {
	t.Parallel()
	require.Len(t, order.Statuses, 9)
	pairs := 0
	for _, from := range order.Statuses {
		for _, to := range order.Statuses {
			pairs++
			want := orderTransitions[[2]order.Status{from, to}]
			t.Run(fmt.Sprintf("%s→%s", from, to), func(t *testing.T) {
				t.Parallel()
				require.Equal(t, want, order.CanTransition(from, to))
			})
		}
	}
	require.Equal(t, 81, pairs)
	require.False(t, order.CanTransition("bogus", order.StatusPaid))
	require.False(t, order.CanTransition(order.StatusPending, "bogus"))
}

func TestFinalOrderStatusesHaveNoWayOut(t *testing.T) {
	t.Parallel()
	final := map[order.Status]bool{
		order.StatusCancelled: true, order.StatusRefunded: true,
		order.StatusCompleted: true, order.StatusTerminated: true,
	}
	for _, s := range order.Statuses {
		require.Equal(t, final[s], s.IsFinal(), s)
	}
}

var invoiceTransitions = map[[2]order.InvoiceStatus]bool{
	{order.InvoiceDraft, order.InvoiceIssued}:      true,
	{order.InvoiceDraft, order.InvoiceCancelled}:   true,
	{order.InvoiceIssued, order.InvoicePaid}:       true,
	{order.InvoiceIssued, order.InvoiceOverdue}:    true,
	{order.InvoiceIssued, order.InvoiceCancelled}:  true,
	{order.InvoiceOverdue, order.InvoicePaid}:      true,
	{order.InvoiceOverdue, order.InvoiceCancelled}: true,
}

func TestInvoiceTransitionTableAllowsExactlyTheDesignedPairs(t *testing.T) {
	t.Parallel()
	for _, from := range order.InvoiceStatuses {
		for _, to := range order.InvoiceStatuses {
			want := invoiceTransitions[[2]order.InvoiceStatus{from, to}]
			require.Equal(t, want, order.CanTransitionInvoice(from, to), "%s→%s", from, to)
		}
	}
}

// The statuses of the table are exactly those the schema's CHECK accepts.
func TestStatusesAreTheSchemaVocabulary(t *testing.T) {
	t.Parallel()
	pool := testdb.Pool(t)
	ctx := context.Background()
	customer := testfixture.Customer(t, pool)
	insert := func(table, status string) error {
		tx, err := pool.Begin(ctx)
		require.NoError(t, err)
		defer func() { require.NoError(t, tx.Rollback(ctx)) }()
		switch table {
		case "orders":
			_, err = tx.Exec(ctx, `INSERT INTO orders (customer_id, total_amount, currency, status, suspend_reason)
				VALUES ($1, 1, 'CNY', $2, CASE WHEN $2 = 'suspended' THEN 'admin' ELSE '' END)`, customer, status)
		default:
			_, err = tx.Exec(ctx, `WITH i AS (INSERT INTO invoices (customer_id, amount, currency, status, paid_amount)
				VALUES ($1, 1, 'CNY', $2, CASE WHEN $2 = 'paid' THEN 1 ELSE 0 END) RETURNING *),
				l AS (INSERT INTO invoice_lines (invoice_id, position, description, unit_amount, amount) SELECT id, 1, description, amount, amount FROM i) SELECT count(*) FROM i`, customer, status)
		}
		return err
	}
	for _, s := range order.Statuses {
		require.NoError(t, insert("orders", string(s)), s)
	}
	require.Error(t, insert("orders", "bogus"))
	for _, s := range order.InvoiceStatuses {
		require.NoError(t, insert("invoices", string(s)), s)
	}
	require.Error(t, insert("invoices", "bogus"))
}

// Every move the table allows has its name in the audit log.
func TestEveryAllowedTransitionHasAnAuditAction(t *testing.T) {
	t.Parallel()
	for _, from := range order.Statuses {
		for _, to := range order.Statuses {
			if order.CanTransition(from, to) {
				require.NotEmpty(t, order.TransitionAction(from, to), "%s → %s", from, to)
			}
		}
	}
}
