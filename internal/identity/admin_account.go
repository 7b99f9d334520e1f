package identity

import (
	"context"
	"errors"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"

	"github.com/rustbill/paymentd/internal/apperr"
	"github.com/rustbill/paymentd/internal/audit"
	"github.com/rustbill/paymentd/internal/store"
)

// Audit actions of the operator's command line.
const (
	ActionAdminCreate        = "admin.create"
	ActionAdminResetPassword = "admin.reset_password"
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

// CreateAdmin adds an admin account (`paymentd admin create-admin`), with
// an audit row whose actor is the system and whose id is by (the operator
// at the terminal). A taken username is AlreadyExists.
func CreateAdmin(ctx context.Context, db store.DB, username, password, by string) (store.Admin, error) {
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
	err = store.WithTx(ctx, db, func(tx pgx.Tx) error {
		var err error
		a, err = store.CreateAdmin(ctx, tx, username, hash, username)
		if errors.Is(err, store.ErrConflict) {
			return apperr.New(apperr.AlreadyExists, "an admin named %q already exists", username)
		}
		if err != nil {
			return err
		}
		return systemAudit(ctx, tx, by, ActionAdminCreate, a, nil, accountOf(a))
	})
	return a, err
}

// ResetAdminPassword sets an admin's password (`paymentd admin
// reset-password`) and ends every session of that admin, so whoever knew
// the old password is logged out too; audit row as for CreateAdmin. It
// returns the admin and how many sessions ended. An unknown username is
// NotFound.
func ResetAdminPassword(ctx context.Context, db store.DB, username, password, by string) (store.Admin, int64, error) {
	if err := CheckAdminPassword(password); err != nil {
		return store.Admin{}, 0, err
	}
	hash, err := HashPassword(password)
	if err != nil {
		return store.Admin{}, 0, err
	}
	var a store.Admin
	var ended int64
	err = store.WithTx(ctx, db, func(tx pgx.Tx) error {
		var err error
		a, err = store.SetAdminPassword(ctx, tx, username, hash)
		if errors.Is(err, store.ErrNotFound) {
			return apperr.New(apperr.NotFound, "no admin named %q", username)
		}
		if err != nil {
			return err
		}
		ids, err := store.DeleteAdminSessions(ctx, tx, a.ID)
		if err != nil {
			return err
		}
		ended = int64(len(ids))
		after := struct {
			adminAccount
			PasswordChanged bool  `json:"password_changed"`
			SessionsEnded   int64 `json:"sessions_ended"`
		}{accountOf(a), true, ended}
		return systemAudit(ctx, tx, by, ActionAdminResetPassword, a, accountOf(a), after)
	})
	return a, ended, err
}

func systemAudit(ctx context.Context, tx pgx.Tx, by, action string, a store.Admin, before, after any) error {
	return audit.Write(ctx, tx, audit.System(by), time.Time{}, action, "admin_user", a.ID.String(), before, after)
}
