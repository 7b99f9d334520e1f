package identity

import (
	"context"
	"errors"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/rustbill/paymentd/internal/apperr"
	"github.com/rustbill/paymentd/internal/audit"
	"github.com/rustbill/paymentd/internal/store"
)

// Audit actions of the operator's command line.
const (
	ActionAdminCreate        = "admin.create"
	ActionAdminResetPassword = "admin.reset_password"
	ActionAdminDisable       = "admin.disable"
	ActionAdminEnable        = "admin.enable"
)

// adminAccount is the audit snapshot of an admin: never the hash.
type adminAccount struct {
	ID          string `json:"id"`
	Username    string `json:"username"`
	DisplayName string `json:"display_name"`
	Disabled    bool   `json:"disabled"`
}

func accountOf(a store.Admin) adminAccount {
	return adminAccount{ID: a.ID.String(), Username: a.Username, DisplayName: a.DisplayName, Disabled: a.DisabledAt != nil}
}

// CheckAdminPassword applies the password rule to a new admin password:
// 8 to 128 characters, not all spaces.
func CheckAdminPassword(password string) error {
	if n := utf8.RuneCountInString(password); n < minPasswordLen || n > maxPasswordLen {
		return apperr.New(apperr.InvalidArgument, "the password must be 8 to 128 characters")
	}
	if strings.TrimSpace(password) == "" {
		return apperr.New(apperr.InvalidArgument, "the password must not be blank")
	}
	return nil
}

// checkUsername: 1 to 64 printable characters without spaces.
func checkUsername(username string) error {
	if username == "" || utf8.RuneCountInString(username) > 64 {
		return apperr.New(apperr.InvalidArgument, "the username must be 1 to 64 characters")
	}
	for _, r := range username {
		if unicode.IsSpace(r) || !unicode.IsPrint(r) {
			return apperr.New(apperr.InvalidArgument, "the username must not contain spaces or control characters")
		}
	}
	return nil
}

// Operator runs the operator's commands on admin accounts (`paymentd admin
// …`) straight on the database, without a running service: the audit rows
// name By (the operator at the terminal) as a part of the system.
type Operator struct {
	DB store.DB
	// Cache is the service's shared session cache, nil when there is none
	// ([redis] off): the sessions a command ends are dropped from it too,
	// so that no instance trusts a cached copy for its minute
	// (recheckEvery).
	Cache SessionCache
	// By names who ran the command, "cli:<user>@<host>".
	By string
	// Clock is time.Now when nil.
	Clock func() time.Time
}

func (o Operator) now() time.Time {
	clock := o.Clock
	if clock == nil {
		clock = time.Now
	}
	return store.Timestamp(clock())
}

func (o Operator) actor() audit.Actor { return audit.System(o.By) }

// AdminAccessChange is what a command that cuts an admin off did.
type AdminAccessChange struct {
	Admin store.Admin
	// Changed is false when the command found the account as asked
	// (disabling a disabled admin, enabling an enabled one).
	Changed bool
	// SessionsEnded and KeysRevoked count the admin's sessions deleted and
	// API keys revoked.
	SessionsEnded int
	KeysRevoked   int
	// CacheErr is why a session could not be dropped from the shared
	// cache, if one could not: its cached copy is then refused within a
	// minute rather than at once.
	CacheErr error
}

// CreateAdmin adds an admin account (`paymentd admin create-admin`). A
// taken username is AlreadyExists.
func (o Operator) CreateAdmin(ctx context.Context, username, password string) (store.Admin, error) {
	if err := checkUsername(username); err != nil {
		return store.Admin{}, err
	}
	if err := CheckAdminPassword(password); err != nil {
		return store.Admin{}, err
	}
	hash, err := HashPassword(password)
	if err != nil {
		return store.Admin{}, err
	}
	var a store.Admin
	err = store.WithTx(ctx, o.DB, func(tx pgx.Tx) error {
		var err error
		a, err = store.CreateAdmin(ctx, tx, username, hash, username)
		if errors.Is(err, store.ErrConflict) {
			return apperr.New(apperr.AlreadyExists, "an admin named %q already exists", username)
		}
		if err != nil {
			return err
		}
		return audit.Write(ctx, tx, o.actor(), o.now(), ActionAdminCreate, "admin_user", a.ID.String(), nil, accountOf(a))
	})
	return a, err
}

// ResetPassword sets an admin's password (`paymentd admin reset-password`,
// the remedy for a leaked one), ends every session of that admin and,
// unless keepKeys, revokes every API key of theirs: whatever the leaked
// password could have opened or minted stops from the next request, on
// every instance. A disabled admin stays disabled. An unknown username is
// NotFound.
func (o Operator) ResetPassword(ctx context.Context, username, password string, keepKeys bool) (AdminAccessChange, error) {
	if err := CheckAdminPassword(password); err != nil {
		return AdminAccessChange{}, err
	}
	hash, err := HashPassword(password)
	if err != nil {
		return AdminAccessChange{}, err
	}
	now := o.now()
	var out AdminAccessChange
	var ended [][]byte
	err = store.WithTx(ctx, o.DB, func(tx pgx.Tx) error {
		a, err := store.SetAdminPassword(ctx, tx, username, hash)
		if err != nil {
			return store.NotFound(err, "no admin named %q", username)
		}
		out = AdminAccessChange{Admin: a, Changed: true}
		ended, out.KeysRevoked, err = cutOff(ctx, tx, o.actor(), a.ID, nil, now, keepKeys, ActionAdminResetPassword)
		if err != nil {
			return err
		}
		out.SessionsEnded = len(ended)
		after := struct {
			adminAccount
			PasswordChanged bool `json:"password_changed"`
			SessionsEnded   int  `json:"sessions_ended"`
			APIKeysRevoked  int  `json:"api_keys_revoked"`
		}{accountOf(a), true, out.SessionsEnded, out.KeysRevoked}
		return audit.Write(ctx, tx, o.actor(), now, ActionAdminResetPassword, "admin_user", a.ID.String(), accountOf(a), after)
	})
	if err != nil {
		return AdminAccessChange{}, err
	}
	out.CacheErr = dropCachedSessions(ctx, o.Cache, ended)
	return out, nil
}

// Disable disables an admin (`paymentd admin disable`): their login is
// refused, their sessions end and their API keys are refused from the next
// request, on every instance. Unless keepKeys the keys are also revoked,
// so enabling the admin again does not bring them back. The last enabled
// admin cannot be disabled (FailedPrecondition): nobody could sign in to
// the console any more. Disabling a disabled admin changes nothing but
// still revokes keys kept before, unless keepKeys.
func (o Operator) Disable(ctx context.Context, username, reason string, keepKeys bool) (AdminAccessChange, error) {
	now := o.now()
	var out AdminAccessChange
	var ended [][]byte
	err := store.WithTx(ctx, o.DB, func(tx pgx.Tx) error {
		if err := store.Q(tx).LockAdminUsers(ctx); err != nil {
			return err
		}
		before, err := store.GetAdminByUsername(ctx, tx, username)
		if err != nil {
			return store.NotFound(err, "no admin named %q", username)
		}
		a := before
		if before.DisabledAt == nil {
			n, err := store.Q(tx).CountEnabledAdmins(ctx)
			if err != nil {
				return err
			}
			if n <= 1 {
				return apperr.New(apperr.FailedPrecondition,
					"admin %q is the last enabled admin and is not disabled: nobody could sign in any more; create or enable another admin first (paymentd admin create-admin), or reset this one's password", username)
			}
			if a, err = store.SetAdminDisabledAt(ctx, tx, before.ID, &now, now); err != nil {
				return err
			}
		}
		out = AdminAccessChange{Admin: a, Changed: before.DisabledAt == nil}
		ended, out.KeysRevoked, err = cutOff(ctx, tx, o.actor(), a.ID, nil, now, keepKeys, ActionAdminDisable)
		if err != nil {
			return err
		}
		out.SessionsEnded = len(ended)
		if !out.Changed && out.SessionsEnded == 0 && out.KeysRevoked == 0 {
			return nil
		}
		after := struct {
			adminAccount
			Reason         string `json:"reason,omitempty"`
			SessionsEnded  int    `json:"sessions_ended"`
			APIKeysRevoked int    `json:"api_keys_revoked"`
		}{accountOf(a), strings.TrimSpace(reason), out.SessionsEnded, out.KeysRevoked}
		return audit.Write(ctx, tx, o.actor(), now, ActionAdminDisable, "admin_user", a.ID.String(), accountOf(before), after)
	})
	if err != nil {
		return AdminAccessChange{}, err
	}
	out.CacheErr = dropCachedSessions(ctx, o.Cache, ended)
	return out, nil
}

// Enable enables a disabled admin again (`paymentd admin enable`): they can
// log in; their keys that were kept (disabled with keepKeys) work again,
// revoked ones stay revoked. Enabling an enabled admin changes nothing.
func (o Operator) Enable(ctx context.Context, username string) (AdminAccessChange, error) {
	now := o.now()
	var out AdminAccessChange
	err := store.WithTx(ctx, o.DB, func(tx pgx.Tx) error {
		before, err := store.GetAdminByUsername(ctx, tx, username)
		if err != nil {
			return store.NotFound(err, "no admin named %q", username)
		}
		out = AdminAccessChange{Admin: before}
		if before.DisabledAt == nil {
			return nil
		}
		a, err := store.SetAdminDisabledAt(ctx, tx, before.ID, nil, now)
		if err != nil {
			return err
		}
		out = AdminAccessChange{Admin: a, Changed: true}
		return audit.Write(ctx, tx, o.actor(), now, ActionAdminEnable, "admin_user", a.ID.String(), accountOf(before), accountOf(a))
	})
	return out, err
}

// cutOff ends every session of an admin and, unless keepKeys, revokes
// every active API key of theirs (revokedBy: the admin who did it, nil for
// an operator's command), with an audit row per key naming the cause (the
// action that revoked it). It returns the ended sessions' ids, for the
// caller to drop from the shared cache once committed, and how many keys
// it revoked. A key's validity is never cached (authenticateAdminKey reads
// the row on every request), so a revocation committed here is refused by
// every instance from the next request.
func cutOff(ctx context.Context, tx pgx.Tx, actor audit.Actor, adminID uuid.UUID, revokedBy *uuid.UUID, now time.Time, keepKeys bool, cause string) ([][]byte, int, error) {
	ended, err := store.Q(tx).DeleteAdminSessions(ctx, adminID)
	if err != nil || keepKeys {
		return ended, 0, err
	}
	keys, err := store.RevokeAdminAPIKeysOfAdmin(ctx, tx, adminID, revokedBy, now)
	if err != nil {
		return nil, 0, err
	}
	for _, k := range keys {
		before := adminAPIKeyOf(k)
		before.RevokedAt, before.RevokedBy = nil, nil
		after := struct {
			AdminAPIKey
			Cause string `json:"cause"`
		}{adminAPIKeyOf(k), cause}
		if err := audit.Write(ctx, tx, actor, now, ActionAdminAPIKeyRevoked, "admin_api_key", k.ID.String(), before, after); err != nil {
			return nil, 0, err
		}
	}
	return ended, len(keys), nil
}

// dropCachedSessions removes ended sessions from the shared cache (nil:
// none) and returns the first failure: a copy left there is refused once
// its minute of trust is over (recheckEvery).
func dropCachedSessions(ctx context.Context, c SessionCache, ids [][]byte) error {
	if c == nil {
		return nil
	}
	var first error
	for _, id := range ids {
		if err := c.Delete(ctx, id); err != nil && first == nil {
			first = err
		}
	}
	return first
}
