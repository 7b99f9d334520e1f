package balance_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rustbill/paymentd/internal/apperr"
	"github.com/rustbill/paymentd/internal/audit"
	"github.com/rustbill/paymentd/internal/balance"
	"github.com/rustbill/paymentd/internal/ledger"
	"github.com/rustbill/paymentd/internal/money"
	"github.com/rustbill/paymentd/internal/store"
	"github.com/rustbill/paymentd/internal/testdb"
)

func customer(t *testing.T, db *pgxpool.Pool, limit string) uuid.UUID {
	t.Helper()
	c, err := store.InsertCustomer(context.Background(), db, store.NewCustomer{
		Email: uuid.NewString() + "@example.com", PasswordHash: "h", Currency: "CNY"})
	require.NoError(t, err)
	_, err = db.Exec(context.Background(), `UPDATE customers SET credit_limit = $2 WHERE id = $1`, c.ID, limit)
	require.NoError(t, err)
	return c.ID
}

func post(db *pgxpool.Pool, e balance.Entry) (balance.Posted, error) {
	var out balance.Posted
	err := store.WithTx(context.Background(), db, func(tx pgx.Tx) error {
		var err error
		out, err = balance.Post(context.Background(), tx, e)
		return err
	})
	return out, err
}

// Credits are always taken; a debit may go down to -credit_limit and not a
// cent further, and a refused one writes nothing. Each entry leaves its
// ledger row and its audit row, and the ledger checks clean (a recharge
// must come from a payment, so these are manual adjustments).
func TestPostTakesCreditsAndDebitsDownToTheCreditLimit(t *testing.T) {
	t.Parallel()
	db := testdb.Pool(t)
	id := customer(t, db, "10.00")
	by := audit.System("test")

	p, err := post(db, balance.Entry{CustomerID: id, Kind: balance.ManualAdjust, Amount: money.MustParse("5.00"), By: by})
	require.NoError(t, err)
	require.Equal(t, "0.00", p.Before.String())
	require.Equal(t, "5.00", p.Account.Balance.String())
	require.Equal(t, "manual_adjust", p.Ledger.Type)

	_, err = post(db, balance.Entry{CustomerID: id, Kind: balance.ManualAdjust, Amount: money.MustParse("-15.01"), By: by})
	require.True(t, apperr.Is(err, apperr.InvalidArgument), "%v", err)
	var short *balance.InsufficientError
	require.True(t, errors.As(err, &short))
	require.Equal(t, "-10.01", short.After.String())
	var ae *apperr.Error
	require.True(t, errors.As(err, &ae))
	require.Equal(t, "insufficient balance", ae.Message, "what the caller is told")

	p, err = post(db, balance.Entry{CustomerID: id, Kind: balance.ManualAdjust, Amount: money.MustParse("-15.00"), By: by, Description: "fix"})
	require.NoError(t, err)
	require.Equal(t, "-10.00", p.Account.Balance.String())

	_, err = post(db, balance.Entry{CustomerID: id, Kind: balance.Recharge, Amount: money.MustParse("1.00"), Currency: "USD", By: by})
	require.True(t, apperr.Is(err, apperr.InvalidArgument), "another currency: %v", err)
	_, err = post(db, balance.Entry{CustomerID: uuid.New(), Kind: balance.Recharge, Amount: money.MustParse("1.00"), By: by})
	require.True(t, apperr.Is(err, apperr.NotFound), "%v", err)

	var rows, audits int
	require.NoError(t, db.QueryRow(context.Background(), `SELECT count(*) FROM balance_transactions WHERE customer_id = $1`, id).Scan(&rows))
	require.NoError(t, db.QueryRow(context.Background(), `SELECT count(*) FROM audit_log WHERE entity_id = $1 AND actor_kind = 'system'`, id.String()).Scan(&audits))
	require.Equal(t, 2, rows)
	require.Equal(t, 2, audits)
	r, err := ledger.Verify(context.Background(), db)
	require.NoError(t, err)
	require.True(t, r.OK(), "%s", r)
}

// Concurrent debits are decided one at a time on the current balance: of
// twenty debits of 1.00 against 10.00 with no credit, exactly ten are taken
// and the balance ends at 0.00, never below.
func TestConcurrentDebitsNeverOverdrawTheBalance(t *testing.T) {
	t.Parallel()
	db := testdb.Pool(t)
	id := customer(t, db, "0.00")
	_, err := post(db, balance.Entry{CustomerID: id, Kind: balance.ManualAdjust, Amount: money.MustParse("10.00"), By: audit.System("test")})
	require.NoError(t, err)

	var wg sync.WaitGroup
	var mu sync.Mutex
	taken, refused := 0, 0
	for range 20 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := post(db, balance.Entry{CustomerID: id, Kind: balance.ManualAdjust, Amount: money.MustParse("-1.00"), By: audit.System("test")})
			mu.Lock()
			defer mu.Unlock()
			if err == nil {
				taken++
			} else {
				// assert, not require: FailNow here would end this
				// goroutine, not the test.
				assert.True(t, apperr.Is(err, apperr.InvalidArgument), "%v", err)
				refused++
			}
		}()
	}
	wg.Wait()
	require.Equal(t, 10, taken)
	require.Equal(t, 10, refused)
	acct, err := store.GetBalanceAccount(context.Background(), db, id)
	require.NoError(t, err)
	require.Equal(t, "0.00", acct.Balance.String())
	r, err := ledger.Verify(context.Background(), db)
	require.NoError(t, err)
	require.True(t, r.OK(), "%s", r)
}

// The ledger's order by time is the chain's order even when the clock
// stands still or goes back (a frozen test clock, an instance whose clock is
// behind another's): each row comes at least a microsecond after the
// customer's previous one.
func TestEntriesChainInOrderWhenTheClockStandsStillOrGoesBack(t *testing.T) {
	t.Parallel()
	db := testdb.Pool(t)
	id := customer(t, db, "0.00")
	by := audit.System("test")
	at := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	var times []time.Time
	for i, when := range []time.Time{at, at, at.Add(-time.Hour), at} {
		amount := "3.00"
		if i%2 == 1 {
			amount = "-1.00"
		}
		p, err := post(db, balance.Entry{CustomerID: id, Kind: balance.ManualAdjust, Amount: money.MustParse(amount), By: by, At: when})
		require.NoError(t, err)
		times = append(times, p.Ledger.CreatedAt)
	}
	for i := 1; i < len(times); i++ {
		require.True(t, times[i].After(times[i-1]), "row %d at %s is not after row %d at %s", i, times[i], i-1, times[i-1])
	}
	require.True(t, times[0].Equal(at), "a clock that moves on is taken as it is")
	r, err := ledger.Verify(context.Background(), db)
	require.NoError(t, err)
	require.True(t, r.OK(), "%s", r)
}
