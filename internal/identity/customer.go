package identity

import (
	"context"
	"errors"
	"strings"
	"unicode/utf8"

	"github.com/rustbill/paymentd/internal/apperr"
	"github.com/rustbill/paymentd/internal/auth"
	"github.com/rustbill/paymentd/internal/store"
)

// Password length bounds, in characters (as the wire contract's rules).
const (
	minPasswordLen = 8
	maxPasswordLen = 128
)

// NormalizeEmail is how an e-mail address is stored and looked up: trimmed
// and in lower case.
func NormalizeEmail(email string) string { return strings.ToLower(strings.TrimSpace(email)) }

// Register creates a customer with a balance in the first configured
// currency and returns an access token for it. An address already registered
// in any letter case is AlreadyExists.
func (s *Service) Register(ctx context.Context, email, password, name string) (Customer, AccessToken, error) {
	email = NormalizeEmail(email)
	if email == "" || !strings.Contains(email, "@") {
		return Customer{}, AccessToken{}, apperr.New(apperr.InvalidArgument, "email is not valid")
	}
	if n := utf8.RuneCountInString(password); n < minPasswordLen || n > maxPasswordLen {
		return Customer{}, AccessToken{}, apperr.New(apperr.InvalidArgument, "password must be 8 to 128 characters")
	}
	if err := s.admitPassword(ctx, customerBudgetKey(email)); err != nil {
		return Customer{}, AccessToken{}, err
	}
	hash, err := s.hashPassword(ctx, password)
	if err != nil {
		return Customer{}, AccessToken{}, err
	}
	c, err := store.InsertCustomer(ctx, s.db, store.NewCustomer{
		Email: email, PasswordHash: hash, Name: strings.TrimSpace(name), Currency: s.currency,
	})
	if errors.Is(err, store.ErrConflict) {
		return Customer{}, AccessToken{}, apperr.New(apperr.AlreadyExists, "email already registered")
	}
	if err != nil {
		return Customer{}, AccessToken{}, err
	}
	tok, err := s.issueToken(c.ID, c.TokenGeneration)
	if err != nil {
		return Customer{}, AccessToken{}, err
	}
	return customerOf(c), tok, nil
}

// Login checks a customer's password and returns an access token. A wrong
// password, an unknown address and a disabled account all answer the same
// Unauthenticated, after the same one password verification.
func (s *Service) Login(ctx context.Context, email, password string) (Customer, AccessToken, error) {
	if err := s.admitPassword(ctx, customerBudgetKey(email)); err != nil {
		return Customer{}, AccessToken{}, err
	}
	c, err := store.GetCustomerByEmail(ctx, s.db, NormalizeEmail(email))
	switch {
	case errors.Is(err, store.ErrNotFound):
		if _, err := s.checkPassword(ctx, "", password); err != nil {
			return Customer{}, AccessToken{}, err
		}
		return Customer{}, AccessToken{}, errBadCustomerCredentials
	case err != nil:
		return Customer{}, AccessToken{}, err
	}
	ok, err := s.checkPassword(ctx, c.PasswordHash, password)
	if err != nil {
		return Customer{}, AccessToken{}, err
	}
	if !ok || c.DisabledAt != nil {
		return Customer{}, AccessToken{}, errBadCustomerCredentials
	}
	tok, err := s.issueToken(c.ID, c.TokenGeneration)
	if err != nil {
		return Customer{}, AccessToken{}, err
	}
	return customerOf(c), tok, nil
}

// Me describes the caller.
func (s *Service) Me(ctx context.Context) (Me, error) {
	p, err := auth.Require(ctx)
	if err != nil {
		return Me{}, err
	}
	me := Me{Role: p.Role, ID: p.ID, Credential: p.Kind, Scope: p.Scope}
	switch p.Role {
	case auth.RoleAdmin:
		a, err := store.GetAdmin(ctx, s.db, p.ID)
		if errors.Is(err, store.ErrNotFound) {
			return Me{}, apperr.New(apperr.Unauthenticated, "account not found")
		}
		if err != nil {
			return Me{}, err
		}
		me.Username = a.Username
		me.TOTPEnabled = a.TOTPConfirmedAt != nil
		me.TOTPRequired = p.Enrolling
	case auth.RoleCustomer:
		c, err := store.GetCustomer(ctx, s.db, p.ID)
		if errors.Is(err, store.ErrNotFound) {
			return Me{}, apperr.New(apperr.Unauthenticated, "account not found")
		}
		if err != nil {
			return Me{}, err
		}
		me.Email = c.Email
		me.CanCreateAPIKeys = c.CanCreateAPIKeys
	default:
		return Me{}, apperr.New(apperr.PermissionDenied, "unknown role")
	}
	return me, nil
}
