package identity

import (
	"context"
	"errors"
	"strings"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/rustbill/paymentd/internal/apperr"
	"github.com/rustbill/paymentd/internal/audit"
	"github.com/rustbill/paymentd/internal/auth"
	"github.com/rustbill/paymentd/internal/balance"
	"github.com/rustbill/paymentd/internal/money"
	"github.com/rustbill/paymentd/internal/paging"
	"github.com/rustbill/paymentd/internal/store"
)

var (
	errAmountNotDecimal = apperr.New(apperr.InvalidArgument, "amount must be a decimal with at most two fractional digits, such as 12.30 or -5")
	errLimitNotDecimal  = apperr.New(apperr.InvalidArgument, "credit_limit must be a non-negative decimal with at most two fractional digits")
	errZeroAdjustment   = apperr.New(apperr.InvalidArgument, "amount must not be zero")
)

// ListCustomers pages through customers, newest first (admin).
func (s *Service) ListCustomers(ctx context.Context, emailContains string, page, size uint32) ([]Customer, paging.Page, error) {
	if _, err := auth.RequireAdmin(ctx); err != nil {
		return nil, paging.Page{}, err
	}
	pg, err := paging.Normalize(page, size)
	if err != nil {
		return nil, paging.Page{}, err
	}
	rows, total, err := store.ListCustomers(ctx, s.db, store.CustomerFilter{EmailContains: strings.TrimSpace(emailContains)}, store.PageOf(pg))
	if err != nil {
		return nil, paging.Page{}, err
	}
	out := make([]Customer, len(rows))
	for i, r := range rows {
		out[i] = customerOf(r)
	}
	return out, pg.WithTotal(total), nil
}

// GetCustomer reads one customer (admin).
func (s *Service) GetCustomer(ctx context.Context, id uuid.UUID) (Customer, error) {
	if _, err := auth.RequireAdmin(ctx); err != nil {
		return Customer{}, err
	}
	c, err := store.GetCustomer(ctx, s.db, id)
	if err != nil {
		return Customer{}, store.NotFound(err, "customer not found")
	}
	return customerOf(c), nil
}

// SetCanCreateAPIKeys allows or forbids a customer API keys (admin). While
// forbidden, the customer's existing keys are refused too; allowing again
// brings back the keys not revoked.
func (s *Service) SetCanCreateAPIKeys(ctx context.Context, id uuid.UUID, allowed bool) (Customer, error) {
	p, err := auth.RequireAdmin(ctx)
	if err != nil {
		return Customer{}, err
	}
	var after store.Customer
	err = store.WithTx(ctx, s.db, func(tx pgx.Tx) error {
		before, err := store.GetCustomerForUpdate(ctx, tx, id)
		if err != nil {
			return store.NotFound(err, "customer not found")
		}
		if before.CanCreateAPIKeys == allowed {
			after = before
			return nil
		}
		if after, err = store.SetCustomerCanCreateAPIKeys(ctx, tx, id, allowed, s.now()); err != nil {
			return err
		}
		return audit.Write(ctx, tx, audit.Of(p), s.now(), "customer.can_create_api_keys_changed", "customer", id.String(),
			map[string]any{"can_create_api_keys": before.CanCreateAPIKeys},
			map[string]any{"can_create_api_keys": after.CanCreateAPIKeys})
	})
	if err != nil {
		return Customer{}, err
	}
	return customerOf(after), nil
}

// AdjustBalance changes a customer's balance by amount, a signed decimal
// string, and records a manual_adjust ledger row with note (admin). In one
// transaction with the customer row locked, so concurrent adjustments chain:
// each row's balance_before is the previous row's balance_after. The balance
// may not fall below -credit_limit; a zero amount is refused.
func (s *Service) AdjustBalance(ctx context.Context, id uuid.UUID, amount, note string) (Customer, BalanceTransaction, error) {
	p, err := auth.RequireAdmin(ctx)
	if err != nil {
		return Customer{}, BalanceTransaction{}, err
	}
	delta, err := money.Parse(amount)
	if err != nil {
		return Customer{}, BalanceTransaction{}, errAmountNotDecimal
	}
	if delta.IsZero() {
		return Customer{}, BalanceTransaction{}, errZeroAdjustment
	}
	note = strings.TrimSpace(note)
	var (
		after store.Customer
		txn   store.BalanceTransaction
	)
	err = store.WithTx(ctx, s.db, func(tx pgx.Tx) error {
		adminID := p.ID
		posted, err := balance.Post(ctx, tx, balance.Entry{
			CustomerID: id, Kind: balance.ManualAdjust, Amount: delta,
			CreatedBy: &adminID, Description: note, By: audit.Of(p), At: s.now(),
		})
		var short *balance.InsufficientError
		switch {
		case apperr.Is(err, apperr.NotFound):
			return apperr.New(apperr.NotFound, "customer not found")
		case errors.As(err, &short):
			return apperr.New(apperr.InvalidArgument, "the balance would be %s, below the credit limit of %s", short.After, short.CreditLimit)
		case err != nil:
			return err
		}
		txn = posted.Ledger
		after, err = store.GetCustomer(ctx, tx, id)
		return err
	})
	if err != nil {
		return Customer{}, BalanceTransaction{}, err
	}
	return customerOf(after), balanceTransactionOf(txn), nil
}

// SetCreditLimit sets how far below zero a customer's balance may go
// (admin). limit is a non-negative decimal string; the current balance must
// stay at or above -limit.
func (s *Service) SetCreditLimit(ctx context.Context, id uuid.UUID, limit string) (Customer, error) {
	p, err := auth.RequireAdmin(ctx)
	if err != nil {
		return Customer{}, err
	}
	newLimit, err := money.ParseNonNegative(limit)
	if err != nil {
		return Customer{}, errLimitNotDecimal
	}
	var after store.Customer
	err = store.WithTx(ctx, s.db, func(tx pgx.Tx) error {
		before, err := store.GetCustomerForUpdate(ctx, tx, id)
		if err != nil {
			return store.NotFound(err, "customer not found")
		}
		if before.CreditLimit.Equal(newLimit) {
			after = before
			return nil
		}
		if before.Balance.Cmp(newLimit.Neg()) < 0 {
			return apperr.New(apperr.InvalidArgument, "the balance %s is below -%s; raise the balance first", before.Balance, newLimit)
		}
		if after, err = store.SetCustomerCreditLimit(ctx, tx, id, newLimit, s.now()); err != nil {
			return err
		}
		return audit.Write(ctx, tx, audit.Of(p), s.now(), "customer.credit_limit_changed", "customer", id.String(),
			map[string]any{"credit_limit": before.CreditLimit},
			map[string]any{"credit_limit": after.CreditLimit})
	})
	if err != nil {
		return Customer{}, err
	}
	return customerOf(after), nil
}
