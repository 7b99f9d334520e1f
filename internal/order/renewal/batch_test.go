package renewal_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/rustbill/paymentd/internal/store"
	"github.com/rustbill/paymentd/internal/testfixture"
)

// The renewal step issues a batch of services in one transaction. Services
// of one customer in the same batch are paid from the balance in turn,
// each on the balance the one before left: a balance of 25.00 pays two of
// three renewals of 10.00 and leaves the third issued, unpaid; a customer
// whose balance covers all pays all.
func TestServicesOfOneCustomerInABatchArePaidFromTheBalanceInTurn(t *testing.T) {
	t.Parallel()
	b := setup(t, at(time.January, 1, 0), defaults())
	short, ample, none := testfixture.Customer(t, b.pool), testfixture.Customer(t, b.pool), testfixture.Customer(t, b.pool)
	b.topUp(t, short, "25.00")
	b.topUp(t, ample, "100.00")
	var shorts []uuid.UUID
	for range 3 {
		shorts = append(shorts, b.activeOrder(t, short, "monthly", "10.00"))
	}
	for range 3 {
		b.activeOrder(t, ample, "monthly", "10.00")
	}
	b.activeOrder(t, none, "monthly", "10.00")

	b.clock.Set(at(time.January, 29, 0))
	r := b.pass(t)
	require.Equal(t, 7, r.Issued)
	require.Equal(t, 5, r.AutoPaid, "two of the short customer's, three of the ample one's")

	balances := map[uuid.UUID]string{short: "5.00", ample: "70.00", none: "0.00"}
	for customer, want := range balances {
		acct, err := store.GetBalanceAccount(context.Background(), b.pool, customer)
		require.NoError(t, err)
		require.Equal(t, want, acct.Balance.String())
	}
	paid := 0
	for _, id := range shorts {
		ps := b.periods(t, id)
		require.Len(t, ps, 2)
		if ps[1].Status == store.PeriodPaid {
			paid++
		}
	}
	require.Equal(t, 2, paid)
	b.checkMoney(t)
}

// One service whose renewal fails does not hold back the others of its
// batch: the batch's transaction rolls back, its services are issued one
// transaction each, and the failing one is counted an error and issued on
// a later pass, once it can be.
func TestOneFailingRenewalLeavesTheOthersOfItsBatchIssued(t *testing.T) {
	t.Parallel()
	b := setup(t, at(time.January, 1, 0), defaults())
	ctx := context.Background()
	var ids []uuid.UUID
	for range 6 {
		ids = append(ids, b.activeOrder(t, testfixture.Customer(t, b.pool), "monthly", "10.00"))
	}
	bad := ids[3]
	// A period of the bad order cannot be written while this trigger is
	// there (as a constraint an operator added might refuse it).
	_, err := b.pool.Exec(ctx, fmt.Sprintf(`
		CREATE FUNCTION refuse_bad_period() RETURNS trigger LANGUAGE plpgsql AS $$
		BEGIN
			IF NEW.order_id = '%s' AND NEW.seq > 1 THEN
				RAISE EXCEPTION 'refused by the test';
			END IF;
			RETURN NEW;
		END $$;
		CREATE TRIGGER refuse_bad_period BEFORE INSERT ON service_periods FOR EACH ROW EXECUTE FUNCTION refuse_bad_period();`, bad))
	require.NoError(t, err)

	b.clock.Set(at(time.January, 29, 0))
	r, err := b.run.RunOnce(ctx)
	require.NoError(t, err)
	require.Equal(t, 5, r.Issued)
	require.Equal(t, 1, r.Errors)
	for _, id := range ids {
		want := 2
		if id == bad {
			want = 1
		}
		require.Len(t, b.periods(t, id), want, "order %s", id)
	}
	var invoices int
	require.NoError(t, b.pool.QueryRow(ctx, `SELECT count(*) FROM invoices WHERE order_id = $1`, bad).Scan(&invoices))
	require.Zero(t, invoices, "the bad order's invoice went with its transaction")

	_, err = b.pool.Exec(ctx, `DROP TRIGGER refuse_bad_period ON service_periods`)
	require.NoError(t, err)
	r = b.pass(t)
	require.Equal(t, 1, r.Issued)
	require.Len(t, b.periods(t, bad), 2)
	b.checkMoney(t)
}
