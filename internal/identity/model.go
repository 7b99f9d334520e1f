package identity

import (
	"time"

	"github.com/google/uuid"

	"github.com/rustbill/paymentd/internal/auth"
	"github.com/rustbill/paymentd/internal/money"
	"github.com/rustbill/paymentd/internal/store"
)

// Customer is a customer account as the domain shows it: never its password hash.
type Customer struct {
	ID               uuid.UUID    `json:"id"`
	Email            string       `json:"email"`
	Name             string       `json:"name"`
	Currency         string       `json:"currency"`
	Balance          money.Amount `json:"balance"`
	CreditLimit      money.Amount `json:"credit_limit"`
	CanCreateAPIKeys bool         `json:"can_create_api_keys"`
	DisabledAt       *time.Time   `json:"disabled_at,omitempty"`
	CreatedAt        time.Time    `json:"created_at"`
	UpdatedAt        time.Time    `json:"updated_at"`
}

func customerOf(c store.Customer) Customer {
	return Customer{
		ID:               c.ID,
		Email:            c.Email,
		Name:             c.Name,
		Currency:         c.Currency,
		Balance:          c.Balance,
		CreditLimit:      c.CreditLimit,
		CanCreateAPIKeys: c.CanCreateAPIKeys,
		DisabledAt:       c.DisabledAt,
		CreatedAt:        c.CreatedAt,
		UpdatedAt:        c.UpdatedAt,
	}
}

// Admin is an admin user: never its password hash.
type Admin struct {
	ID          uuid.UUID
	Username    string
	DisplayName string
	LastLoginAt *time.Time
	CreatedAt   time.Time
}

func adminOf(a store.Admin) Admin {
	return Admin{ID: a.ID, Username: a.Username, DisplayName: a.DisplayName, LastLoginAt: a.LastLoginAt, CreatedAt: a.CreatedAt}
}

// APIKey describes an API key: never its secret or the secret's hash.
type APIKey struct {
	ID         uuid.UUID  `json:"id"`
	CustomerID uuid.UUID  `json:"customer_id"`
	Name       string     `json:"name"`
	CreatedAt  time.Time  `json:"created_at"`
	LastUsedAt *time.Time `json:"last_used_at,omitempty"`
	RevokedAt  *time.Time `json:"revoked_at,omitempty"`
}

// Prefix is the public part of the key, "pk_<id>", to recognise it by.
func (k APIKey) Prefix() string { return apiKeyPrefix + hexID(k.ID) }

func apiKeyOf(k store.APIKey) APIKey {
	return APIKey{ID: k.ID, CustomerID: k.CustomerID, Name: k.Name, CreatedAt: k.CreatedAt, LastUsedAt: k.LastUsedAt, RevokedAt: k.RevokedAt}
}

// BalanceTransaction is one entry of a customer's balance ledger.
type BalanceTransaction struct {
	ID            uuid.UUID    `json:"id"`
	CustomerID    uuid.UUID    `json:"customer_id"`
	Type          string       `json:"type"`
	Amount        money.Amount `json:"amount"`
	BalanceBefore money.Amount `json:"balance_before"`
	BalanceAfter  money.Amount `json:"balance_after"`
	CreatedBy     *uuid.UUID   `json:"created_by,omitempty"`
	Description   string       `json:"description"`
	CreatedAt     time.Time    `json:"created_at"`
}

func balanceTransactionOf(t store.BalanceTransaction) BalanceTransaction {
	return BalanceTransaction{
		ID:            t.ID,
		CustomerID:    t.CustomerID,
		Type:          t.Type,
		Amount:        t.Amount,
		BalanceBefore: t.BalanceBefore,
		BalanceAfter:  t.BalanceAfter,
		CreatedBy:     t.CreatedBy,
		Description:   t.Description,
		CreatedAt:     t.CreatedAt,
	}
}

// Me describes the caller.
type Me struct {
	Role auth.Role
	ID   uuid.UUID
	// Username is the admin's login name; empty for customers.
	Username string
	// Email is the customer's address; empty for admins.
	Email string
	// CanCreateAPIKeys is the customer's permission; false for admins.
	CanCreateAPIKeys bool
	// Credential is the kind of credential the request carried.
	Credential auth.Kind
	// Scope is the admin API key's scope; zero for any other credential.
	Scope auth.Scope
	// TOTPEnabled: the admin's two-factor sign-in is confirmed.
	TOTPEnabled bool
	// TOTPRequired: the admin must enrol a second factor before anything
	// else ([admin].require_2fa): only GetMe, Logout and the enrolment
	// answer this session until ConfirmTotpEnrolment replaces it.
	TOTPRequired bool
}

// AccessToken is a customer's JWT and when it expires.
type AccessToken struct {
	Token     string
	ExpiresAt time.Time
}
