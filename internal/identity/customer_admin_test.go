package identity_test

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"testing"

	"connectrpc.com/connect"
	"github.com/stretchr/testify/require"

	identitypb "github.com/rustbill/paymentd/gen/billing/identity"
	"github.com/rustbill/paymentd/internal/money"
)

func TestAdjustBalanceRecordsBeforeAndAfterWithinTheCreditLimit(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := context.Background()
	cust := e.register(t, "ivan@example.com")
	admin := e.adminLogin(t)
	adminMe, err := e.me(cookie(admin.Value))
	require.NoError(t, err)
	adjust := func(amount string) (*identitypb.AdjustBalanceResponse, error) {
		res, err := e.admin.AdjustBalance(ctx, req(&identitypb.AdjustBalanceRequest{CustomerId: cust.id, Amount: amount, Note: "goodwill " + amount}, cookie(admin.Value)))
		if err != nil {
			return nil, err
		}
		return res.Msg, nil
	}

	res, err := adjust("100")
	require.NoError(t, err)
	require.Equal(t, "100.00", res.GetCustomer().GetBalance())
	tx := res.GetTransaction()
	require.Equal(t, "manual_adjust", tx.GetType())
	require.Equal(t, "100.00", tx.GetAmount())
	require.Equal(t, "0.00", tx.GetBalanceBefore())
	require.Equal(t, "100.00", tx.GetBalanceAfter())
	require.Equal(t, adminMe.GetId(), tx.GetCreatedBy())
	require.Equal(t, "goodwill 100", tx.GetDescription())
	require.Equal(t, cust.id, tx.GetCustomerId())

	// No credit: the balance may not go below zero.
	_, err = adjust("-100.01")
	requireCode(t, connect.CodeInvalidArgument, err)
	res, err = adjust("-100.00")
	require.NoError(t, err)
	require.Equal(t, "0.00", res.GetCustomer().GetBalance())

	for _, bad := range []string{"0", "0.00", "-0", "1.005", "01", "1e3", "", "abc", "99999999999"} {
		_, err = adjust(bad)
		requireCode(t, connect.CodeInvalidArgument, err)
	}

	lim, err := e.admin.SetCreditLimit(ctx, req(&identitypb.SetCreditLimitRequest{CustomerId: cust.id, CreditLimit: "50"}, cookie(admin.Value)))
	require.NoError(t, err)
	require.Equal(t, "50.00", lim.Msg.GetCustomer().GetCreditLimit())
	res, err = adjust("-50")
	require.NoError(t, err)
	require.Equal(t, "-50.00", res.GetCustomer().GetBalance())
	require.Equal(t, "0.00", res.GetTransaction().GetBalanceBefore())
	require.Equal(t, "-50.00", res.GetTransaction().GetBalanceAfter())
	_, err = adjust("-0.01")
	requireCode(t, connect.CodeInvalidArgument, err)

	// The limit cannot be lowered below what the balance already uses.
	_, err = e.admin.SetCreditLimit(ctx, req(&identitypb.SetCreditLimitRequest{CustomerId: cust.id, CreditLimit: "49.99"}, cookie(admin.Value)))
	requireCode(t, connect.CodeInvalidArgument, err)
	_, err = e.admin.SetCreditLimit(ctx, req(&identitypb.SetCreditLimitRequest{CustomerId: cust.id, CreditLimit: "-1"}, cookie(admin.Value)))
	requireCode(t, connect.CodeInvalidArgument, err)

	got, err := e.admin.GetCustomer(ctx, req(&identitypb.GetCustomerRequest{Id: cust.id}, cookie(admin.Value)))
	require.NoError(t, err)
	require.Equal(t, "-50.00", got.Msg.GetCustomer().GetBalance())
	require.Equal(t, "50.00", got.Msg.GetCustomer().GetCreditLimit())

	_, err = e.admin.GetCustomer(ctx, req(&identitypb.GetCustomerRequest{Id: "7b0f1c3e-8a7d-4f51-9d1e-2a3b4c5d6e7f"}, cookie(admin.Value)))
	requireCode(t, connect.CodeNotFound, err)
	_, err = e.admin.AdjustBalance(ctx, req(&identitypb.AdjustBalanceRequest{CustomerId: "7b0f1c3e-8a7d-4f51-9d1e-2a3b4c5d6e7f", Amount: "1", Note: "x"}, cookie(admin.Value)))
	requireCode(t, connect.CodeNotFound, err)

	require.Equal(t, 3, e.count(t, `SELECT count(*) FROM balance_transactions WHERE customer_id = $1`, cust.id))
	require.Equal(t, 3, e.count(t, `SELECT count(*) FROM audit_log WHERE action = 'customer.balance_adjusted' AND entity_id = $1 AND actor_id = $2 AND before ? 'balance' AND after ? 'balance'`, cust.id, adminMe.GetId()))
	require.Equal(t, 1, e.count(t, `SELECT count(*) FROM audit_log WHERE action = 'customer.balance_adjusted' AND before->>'balance' = '0.00' AND after->>'balance' = '-50.00'`))
	require.Equal(t, 1, e.count(t, `SELECT count(*) FROM audit_log WHERE action = 'customer.credit_limit_changed' AND before->>'credit_limit' = '0.00' AND after->>'credit_limit' = '50.00'`))
}

func TestConcurrentAdjustmentsChainTheLedger(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := context.Background()
	cust := e.register(t, "judy@example.com")
	admin := e.adminLogin(t)

	const n = 20
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i := range n {
		wg.Go(func() {
			amount := fmt.Sprintf("%d.%02d", i+1, i) // distinct amounts, so the chain is unambiguous
			_, errs[i] = e.admin.AdjustBalance(ctx, req(&identitypb.AdjustBalanceRequest{CustomerId: cust.id, Amount: amount, Note: "concurrent"}, cookie(admin.Value)))
		})
	}
	wg.Wait()
	want := money.Zero()
	for i, err := range errs {
		require.NoError(t, err, i)
		var addErr error
		want, addErr = want.Add(money.MustParse(fmt.Sprintf("%d.%02d", i+1, i)))
		require.NoError(t, addErr)
	}

	got, err := e.admin.GetCustomer(ctx, req(&identitypb.GetCustomerRequest{Id: cust.id}, cookie(admin.Value)))
	require.NoError(t, err)
	require.Equal(t, want.String(), got.Msg.GetCustomer().GetBalance())

	rows, err := e.app.Pool().Query(ctx, `SELECT amount, balance_before, balance_after FROM balance_transactions WHERE customer_id = $1`, cust.id)
	require.NoError(t, err)
	type entry struct{ amount, before, after money.Amount }
	var ledger []entry
	for rows.Next() {
		var en entry
		require.NoError(t, rows.Scan(&en.amount, &en.before, &en.after))
		ledger = append(ledger, en)
	}
	require.NoError(t, rows.Err())
	require.Len(t, ledger, n)
	// Every amount is positive, so the balance only grows: sorted by
	// balance_before, each row must start where the previous ended.
	sort.Slice(ledger, func(i, j int) bool { return ledger[i].before.Cmp(ledger[j].before) < 0 })
	prev := money.Zero()
	for i, en := range ledger {
		require.Equal(t, prev, en.before, "row %d starts where row %d ended", i, i-1)
		sum, err := en.before.Add(en.amount)
		require.NoError(t, err)
		require.Equal(t, sum, en.after)
		prev = en.after
	}
	require.Equal(t, want, prev)
}

func TestCustomerAdminServiceIsForAdminsOnly(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := context.Background()
	cust := e.register(t, "ken@example.com")
	admin := e.adminLogin(t)
	e.allowAPIKeys(t, admin.Value, cust, true)
	created, err := e.identity.CreateApiKey(ctx, req(&identitypb.CreateApiKeyRequest{Name: "ci"}, bearer(cust.token)))
	require.NoError(t, err)

	calls := map[string]func(...cred) error{
		"ListCustomers": func(c ...cred) error {
			_, err := e.admin.ListCustomers(ctx, req(&identitypb.ListCustomersRequest{Pagination: &identitypb.PageRequest{}}, c...))
			return err
		},
		"GetCustomer": func(c ...cred) error {
			_, err := e.admin.GetCustomer(ctx, req(&identitypb.GetCustomerRequest{Id: cust.id}, c...))
			return err
		},
		"SetCanCreateApiKeys": func(c ...cred) error {
			_, err := e.admin.SetCanCreateApiKeys(ctx, req(&identitypb.SetCanCreateApiKeysRequest{CustomerId: cust.id, Allowed: true}, c...))
			return err
		},
		"AdjustBalance": func(c ...cred) error {
			_, err := e.admin.AdjustBalance(ctx, req(&identitypb.AdjustBalanceRequest{CustomerId: cust.id, Amount: "1000", Note: "free money"}, c...))
			return err
		},
		"SetCreditLimit": func(c ...cred) error {
			_, err := e.admin.SetCreditLimit(ctx, req(&identitypb.SetCreditLimitRequest{CustomerId: cust.id, CreditLimit: "1000"}, c...))
			return err
		},
	}
	for name, call := range calls {
		requireCode(t, connect.CodeUnauthenticated, call())
		requireCode(t, connect.CodePermissionDenied, call(bearer(cust.token)))
		requireCode(t, connect.CodePermissionDenied, call(apiKey(created.Msg.GetKey())))
		require.NoError(t, call(cookie(admin.Value)), name)
	}
	got, err := e.admin.GetCustomer(ctx, req(&identitypb.GetCustomerRequest{Id: cust.id}, cookie(admin.Value)))
	require.NoError(t, err)
	require.Equal(t, "1000.00", got.Msg.GetCustomer().GetBalance(), "only the admin's adjustment happened")
}

func TestListCustomersFiltersAndPages(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := context.Background()
	for _, email := range []string{"lisa@shop.example", "mallory@example.com", "lisa_x@example.com", "nina@shop.example"} {
		e.register(t, email)
		e.clock.Advance(0)
	}
	admin := e.adminLogin(t)
	list := func(filter *string, page, size uint32) *identitypb.ListCustomersResponse {
		res, err := e.admin.ListCustomers(ctx, req(&identitypb.ListCustomersRequest{
			Pagination: &identitypb.PageRequest{Page: page, PageSize: size}, EmailContains: filter,
		}, cookie(admin.Value)))
		require.NoError(t, err)
		return res.Msg
	}
	all := list(nil, 0, 0)
	require.Equal(t, uint64(4), all.GetMeta().GetTotal())
	require.Equal(t, uint32(20), all.GetMeta().GetPageSize())
	require.Equal(t, uint32(1), all.GetMeta().GetPage())

	shop := "SHOP.example"
	require.Equal(t, uint64(2), list(&shop, 0, 0).GetMeta().GetTotal(), "any letter case")
	underscore := "_"
	got := list(&underscore, 0, 0)
	require.Equal(t, uint64(1), got.GetMeta().GetTotal(), "_ matches itself, not any character")
	require.Equal(t, "lisa_x@example.com", got.GetCustomers()[0].GetEmail())

	p2 := list(nil, 2, 3)
	require.Len(t, p2.GetCustomers(), 1)
	require.Equal(t, uint32(2), p2.GetMeta().GetTotalPages())

	_, err := e.admin.ListCustomers(ctx, req(&identitypb.ListCustomersRequest{Pagination: &identitypb.PageRequest{PageSize: 101}}, cookie(admin.Value)))
	requireCode(t, connect.CodeInvalidArgument, err)
	_, err = e.admin.ListCustomers(ctx, req(&identitypb.ListCustomersRequest{}, cookie(admin.Value)))
	requireCode(t, connect.CodeInvalidArgument, err)
}
