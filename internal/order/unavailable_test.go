package order_test

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/stretchr/testify/require"

	"github.com/rustbill/paymentd/internal/apperr"
	"github.com/rustbill/paymentd/internal/rpc"
)

// The database dropping a balance payment's connection in the middle of the
// call — its backend terminated (pg_terminate_backend, as a failover or an
// operator does) while it writes the ledger row — is no bug: the call
// answers Unavailable, which a client retries with its Idempotency-Key,
// never Internal; nothing changed, and the retry pays the order once.
func TestABalancePaymentWhoseConnectionIsTerminatedMidCallAnswersUnavailable(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	b.setAccount(t, b.alice, "50.00", "0.00")
	o := b.order(t, b.asAlice, "12.30")
	before := b.state(t, b.alice, o.ID)

	// A lock the ledger insert waits for, so the backend can be
	// terminated exactly there (the only backend of this database that
	// waits for a lock).
	hold, err := b.pool.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = hold.Rollback(ctx) }()
	_, err = hold.Exec(ctx, `LOCK TABLE balance_transactions IN SHARE MODE`)
	require.NoError(t, err)
	done := make(chan error, 1)
	go func() {
		_, err := b.svc.PayWithBalance(b.asAlice, o.ID)
		done <- err
	}()
	// Asked from a connection of the pool, one statement a transaction:
	// pg_stat_activity is a snapshot taken at its first read in a
	// transaction, so asking inside hold would see the payment's state as
	// it was at the first look, forever. No require in the condition: it
	// runs outside the test's goroutine.
	var early error
	returned := false
	require.Eventually(t, func() bool {
		select {
		case early = <-done:
			returned = true
			return true
		default:
		}
		var n int
		if err := b.pool.QueryRow(ctx, `SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
			WHERE datname = current_database() AND pid <> pg_backend_pid() AND wait_event_type = 'Lock'`).Scan(&n); err != nil {
			return false
		}
		return n == 1
	}, 10*time.Second, 5*time.Millisecond, "the payment waits on the ledger insert")
	require.False(t, returned, "the payment did not wait for the ledger insert: %v", early)
	err = <-done
	require.NoError(t, hold.Rollback(ctx))

	require.Error(t, err)
	require.False(t, apperr.Is(err, apperr.Internal), "a terminated connection is no bug: %v", err)
	require.Equal(t, connect.CodeUnavailable, connect.CodeOf(rpc.Error(ctx, slog.New(slog.DiscardHandler), err)), "%v", err)
	require.Equal(t, before, b.state(t, b.alice, o.ID), "nothing changed")

	paid, err := b.svc.PayWithBalance(b.asAlice, o.ID)
	require.NoError(t, err, "the retry pays")
	require.Equal(t, "37.70", paid.Balance.String())
	require.Equal(t, 1, b.count(t, `SELECT count(*) FROM payments WHERE order_id = $1`, o.ID))
}
