package store

import (
	"context"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/rustbill/paymentd/internal/money"
	"github.com/rustbill/paymentd/internal/store/dbsqlc"
)

// Customer is a row of customers.
type Customer struct {
	ID           uuid.UUID
	Email        string
	PasswordHash string
	Name         string
	Currency     string
	Balance      money.Amount
	CreditLimit  money.Amount
	// CanCreateAPIKeys allows the customer to create, and to use, API keys.
	CanCreateAPIKeys bool
	DisabledAt       *time.Time
	// TokenGeneration is the generation every valid access token of the
	// customer carries; it grows when tokens are ended.
	TokenGeneration int64
	CreatedAt       time.Time
	UpdatedAt       time.Time
}

func customerFrom(c dbsqlc.Customer) Customer {
	return Customer{
		ID:               c.ID,
		Email:            c.Email,
		PasswordHash:     c.PasswordHash,
		Name:             c.Name,
		Currency:         c.Currency,
		Balance:          c.Balance,
		CreditLimit:      c.CreditLimit,
		CanCreateAPIKeys: c.CanCreateApiKeys,
		DisabledAt:       c.DisabledAt,
		TokenGeneration:  c.TokenGeneration,
		CreatedAt:        c.CreatedAt,
		UpdatedAt:        c.UpdatedAt,
	}
}

func customerResult(c dbsqlc.Customer, err error) (Customer, error) {
	if err != nil {
		return Customer{}, MapError(err)
	}
	return customerFrom(c), nil
}

// NewCustomer is what InsertCustomer needs.
type NewCustomer struct {
	Email        string
	PasswordHash string
	Name         string
	Currency     string
}

// InsertCustomer creates a customer. An e-mail address taken in any letter
// case is ErrConflict (constraint customers_email_lower_key).
func InsertCustomer(ctx context.Context, db DB, c NewCustomer) (Customer, error) {
	return customerResult(dbsqlc.New(db).InsertCustomer(ctx, dbsqlc.InsertCustomerParams{
		Email: c.Email, PasswordHash: c.PasswordHash, Name: c.Name, Currency: c.Currency,
	}))
}

// GetCustomer reads a customer; ErrNotFound when there is none.
func GetCustomer(ctx context.Context, db DB, id uuid.UUID) (Customer, error) {
	return customerResult(dbsqlc.New(db).GetCustomer(ctx, id))
}

// GetCustomerForUpdate reads a customer and locks the row until db's
// transaction ends; db must be a pgx.Tx.
func GetCustomerForUpdate(ctx context.Context, db DB, id uuid.UUID) (Customer, error) {
	return customerResult(dbsqlc.New(db).GetCustomerForUpdate(ctx, id))
}

// GetCustomerByEmail finds a customer by e-mail address in any letter case.
func GetCustomerByEmail(ctx context.Context, db DB, email string) (Customer, error) {
	return customerResult(dbsqlc.New(db).GetCustomerByEmail(ctx, email))
}

// CustomerFilter selects customers for ListCustomers.
type CustomerFilter struct {
	// EmailContains keeps customers whose e-mail address contains it, in any
	// letter case; empty for all.
	EmailContains string
}

// ListCustomers returns one page of customers, newest first, and the number
// of customers matching the filter.
func ListCustomers(ctx context.Context, db DB, f CustomerFilter, page Page) ([]Customer, int64, error) {
	var pattern *string
	if f.EmailContains != "" {
		p := "%" + EscapeLike(strings.ToLower(f.EmailContains)) + "%"
		pattern = &p
	}
	q := dbsqlc.New(db)
	rows, total, err := countThenList(func() (int64, error) {
		return q.CountCustomers(ctx, pattern)
	}, page.Offset, func() ([]dbsqlc.Customer, error) {
		return q.ListCustomers(ctx, dbsqlc.ListCustomersParams{EmailPattern: pattern, RowLimit: page.Limit, RowOffset: page.Offset})
	})
	if err != nil {
		return nil, 0, err
	}
	out := make([]Customer, len(rows))
	for i, r := range rows {
		out[i] = customerFrom(r)
	}
	return out, total, nil
}

// SetCustomerCanCreateAPIKeys sets the API key permission.
func SetCustomerCanCreateAPIKeys(ctx context.Context, db DB, id uuid.UUID, allowed bool, now time.Time) (Customer, error) {
	return customerResult(dbsqlc.New(db).SetCustomerCanCreateApiKeys(ctx, dbsqlc.SetCustomerCanCreateApiKeysParams{
		ID: id, CanCreateApiKeys: allowed, UpdatedAt: now,
	}))
}

// SetCustomerCreditLimit writes a new credit limit; ErrCheckViolation when
// the balance is below -limit or the limit is negative.
func SetCustomerCreditLimit(ctx context.Context, db DB, id uuid.UUID, limit money.Amount, now time.Time) (Customer, error) {
	return customerResult(dbsqlc.New(db).SetCustomerCreditLimit(ctx, dbsqlc.SetCustomerCreditLimitParams{
		ID: id, CreditLimit: limit, UpdatedAt: now,
	}))
}

// CustomerAccess is what decides whether a customer's access token is still
// good.
type CustomerAccess struct {
	TokenGeneration int64
	Disabled        bool
}

// GetCustomerAccess reads a customer's token generation and whether the
// account is disabled; ErrNotFound when there is no such customer.
func GetCustomerAccess(ctx context.Context, db DB, id uuid.UUID) (CustomerAccess, error) {
	r, err := dbsqlc.New(db).GetCustomerAccess(ctx, id)
	if err != nil {
		return CustomerAccess{}, MapError(err)
	}
	return CustomerAccess{TokenGeneration: r.TokenGeneration, Disabled: r.DisabledAt != nil}, nil
}

// ChangeCustomerPassword replaces the password hash while it is still
// oldHash and moves the token generation on; ErrNotFound when the customer
// does not exist or the hash changed meanwhile.
func ChangeCustomerPassword(ctx context.Context, db DB, id uuid.UUID, oldHash, newHash string, now time.Time) (Customer, error) {
	return customerResult(dbsqlc.New(db).ChangeCustomerPassword(ctx, dbsqlc.ChangeCustomerPasswordParams{
		ID: id, OldHash: oldHash, NewHash: newHash, UpdatedAt: now,
	}))
}

// EndCustomerTokens moves the customer's token generation on: every access
// token issued before is refused.
func EndCustomerTokens(ctx context.Context, db DB, id uuid.UUID, now time.Time) (Customer, error) {
	return customerResult(dbsqlc.New(db).EndCustomerTokens(ctx, dbsqlc.EndCustomerTokensParams{ID: id, UpdatedAt: now}))
}

// SetCustomerDisabled disables the customer at disabledAt, or enables them
// when it is nil, and moves the token generation on.
func SetCustomerDisabled(ctx context.Context, db DB, id uuid.UUID, disabledAt *time.Time, now time.Time) (Customer, error) {
	return customerResult(dbsqlc.New(db).SetCustomerDisabled(ctx, dbsqlc.SetCustomerDisabledParams{
		ID: id, DisabledAt: disabledAt, UpdatedAt: now,
	}))
}
