package identity

import (
	"context"
	"errors"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"

	"github.com/rustbill/paymentd/internal/apperr"
	"github.com/rustbill/paymentd/internal/audit"
	"github.com/rustbill/paymentd/internal/auth"
	"github.com/rustbill/paymentd/internal/store"
)

// Audit actions of password changes.
const (
	ActionCustomerPasswordChanged = "customer.password_changed"
	ActionAdminPasswordChanged    = "admin.password_changed"
)

var (
	errWrongCurrentPassword     = apperr.New(apperr.PermissionDenied, "the current password is not right")
	errSamePassword             = apperr.New(apperr.InvalidArgument, "the new password must differ from the current one")
	errPasswordChangedMeanwhile = apperr.New(apperr.FailedPrecondition, "the password was changed meanwhile; sign in again")
	errPasswordByAPIKey         = apperr.New(apperr.PermissionDenied, "a password is changed signed in with it (an access token or an admin session), not with an API key")
)

// PasswordChange is what ChangePassword hands back: a customer's new access
// token, or an admin's new session. The credential the call was made with
// has ended, as has every other one issued before.
type PasswordChange struct {
	// Token is the customer's new access token; zero for an admin.
	Token AccessToken
	// Session is the admin's new session; zero for a customer.
	Session AdminSession
	// APIKeysRevoked counts the admin's API keys the change revoked.
	APIKeysRevoked int
}

// ChangePasswordInput is a password change by the caller.
type ChangePasswordInput struct {
	Current string
	New     string
	// UserAgent and RemoteAddr are stored with an admin's new session.
	UserAgent  string
	RemoteAddr string
	// KeepAPIKeys keeps an admin's API keys; without it they are revoked
	// (a customer's never are).
	KeepAPIKeys bool
}

// ChangePassword sets the caller's password, given the current one: a customer
// signed in with an access token, or an admin with a session (an API key cannot:
// PermissionDenied). A wrong current password is PermissionDenied after one
// argon2id verification. Every access token of the customer, or every session of
// the admin, issued before ends — on this instance at once, on the others within
// the access cache's second — and a new one is handed back. An admin's API keys
// are revoked too, unless in.KeepAPIKeys: a password that leaked could have
// minted them (docs/decisions.md, "password change"). A customer's API keys are
// not touched: they are revoked one by one, or by an admin.
func (s *Service) ChangePassword(ctx context.Context, in ChangePasswordInput) (PasswordChange, error) {
	p, err := auth.Require(ctx)
	if err != nil {
		return PasswordChange{}, err
	}
	if in.New == in.Current {
		return PasswordChange{}, errSamePassword
	}
	switch {
	case p.Role == auth.RoleCustomer && p.Kind == auth.KindJWT:
		tok, err := s.changeCustomerPassword(ctx, p, in)
		return PasswordChange{Token: tok}, err
	case p.IsAdmin() && p.Kind == auth.KindSession:
		sess, revoked, err := s.changeAdminPassword(ctx, p, in)
		return PasswordChange{Session: sess, APIKeysRevoked: revoked}, err
	}
	return PasswordChange{}, errPasswordByAPIKey
}

func (s *Service) changeCustomerPassword(ctx context.Context, p auth.Principal, in ChangePasswordInput) (AccessToken, error) {
	if n := utf8.RuneCountInString(in.New); n < minPasswordLen || n > maxPasswordLen {
		return AccessToken{}, apperr.New(apperr.InvalidArgument, "the new password must be 8 to 128 characters")
	}
	c, err := store.GetCustomer(ctx, s.db, p.ID)
	if errors.Is(err, store.ErrNotFound) {
		return AccessToken{}, apperr.New(apperr.Unauthenticated, "account not found")
	}
	if err != nil {
		return AccessToken{}, err
	}
	if err := s.admitPassword(ctx, customerBudgetKey(c.Email)); err != nil {
		return AccessToken{}, err
	}
	hash, err := s.checkAndHash(ctx, c.PasswordHash, in)
	if err != nil {
		return AccessToken{}, err
	}
	now := s.now()
	var after store.Customer
	err = store.WithTx(ctx, s.db, func(tx pgx.Tx) error {
		after, err = store.ChangeCustomerPassword(ctx, tx, c.ID, c.PasswordHash, hash, now)
		if errors.Is(err, store.ErrNotFound) {
			return errPasswordChangedMeanwhile
		}
		if err != nil {
			return err
		}
		return audit.Write(ctx, tx, audit.Of(p), now, ActionCustomerPasswordChanged, "customer", c.ID.String(),
			map[string]any{"token_generation": c.TokenGeneration},
			map[string]any{"token_generation": after.TokenGeneration, "password_changed": true})
	})
	if err != nil {
		return AccessToken{}, err
	}
	s.access.publish(ctx, c.ID, AccessState{Generation: after.TokenGeneration, Disabled: after.DisabledAt != nil})
	return s.issueToken(c.ID, after.TokenGeneration)
}

func (s *Service) changeAdminPassword(ctx context.Context, p auth.Principal, in ChangePasswordInput) (AdminSession, int, error) {
	if err := CheckAdminPassword(in.New); err != nil {
		return AdminSession{}, 0, err
	}
	a, err := store.GetAdmin(ctx, s.db, p.ID)
	if errors.Is(err, store.ErrNotFound) {
		return AdminSession{}, 0, apperr.New(apperr.Unauthenticated, "account not found")
	}
	if err != nil {
		return AdminSession{}, 0, err
	}
	if err := s.admitPassword(ctx, adminBudgetKey(a.Username)); err != nil {
		return AdminSession{}, 0, err
	}
	hash, err := s.checkAndHash(ctx, a.PasswordHash, in)
	if err != nil {
		return AdminSession{}, 0, err
	}
	now := s.now()
	token, row, err := s.newSession(a.ID, in.UserAgent, in.RemoteAddr, now)
	if err != nil {
		return AdminSession{}, 0, err
	}
	var ended [][]byte
	var revoked int
	err = store.WithTx(ctx, s.db, func(tx pgx.Tx) error {
		a, err = store.ChangeAdminPassword(ctx, tx, a.ID, a.PasswordHash, hash, now)
		if errors.Is(err, store.ErrNotFound) {
			return errPasswordChangedMeanwhile
		}
		if err != nil {
			return err
		}
		if ended, revoked, err = cutOff(ctx, tx, audit.Of(p), a.ID, &p.ID, now, in.KeepAPIKeys, ActionAdminPasswordChanged); err != nil {
			return err
		}
		if _, err := store.InsertSession(ctx, tx, row); err != nil {
			return err
		}
		return audit.Write(ctx, tx, audit.Of(p), now, ActionAdminPasswordChanged, "admin_user", a.ID.String(), nil, map[string]any{
			"password_changed": true, "sessions_ended": len(ended), "session": sessionLabel(row.ID), "api_keys_revoked": revoked,
		})
	})
	if err != nil {
		return AdminSession{}, 0, err
	}
	// The rows are gone, so every instance refuses the sessions once it
	// reads the database; dropping the shared cache's copies makes that the
	// next request. A copy whose delete failed lives until its minute of
	// trust is over (session.go, recheckEvery).
	for _, id := range ended {
		s.cacheDelete(ctx, id)
	}
	s.cacheNewSession(ctx, row, a.TOTPConfirmedAt != nil)
	return AdminSession{Admin: adminOf(a), Token: token, ExpiresAt: row.AbsoluteExpiresAt}, revoked, nil
}

// checkAndHash verifies the current password against hash and hashes the
// new one: two argon2id runs, each within the hashing bound.
func (s *Service) checkAndHash(ctx context.Context, hash string, in ChangePasswordInput) (string, error) {
	ok, err := s.checkPassword(ctx, hash, in.Current)
	if err != nil {
		return "", err
	}
	if !ok {
		return "", errWrongCurrentPassword
	}
	return s.hashPassword(ctx, in.New)
}
