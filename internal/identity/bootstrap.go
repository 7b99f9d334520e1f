package identity

import (
	"cmp"
	"context"
	"errors"
	"log/slog"

	"github.com/rustbill/paymentd/internal/store"
)

// ErrBootstrapPasswordRequired stops a start on a database without admins when
// no bootstrap password is configured: nobody could ever log in.
var ErrBootstrapPasswordRequired = errors.New("[bootstrap].admin_password is required: the database has no admin users yet")

// CheckBootstrap returns ErrBootstrapPasswordRequired when the database
// (migrated or not) has no admin users and o has no password: the start
// asks before it migrates, so that an empty database is left as it was.
func CheckBootstrap(ctx context.Context, db store.DB, o BootstrapOptions) error {
	if o.AdminPassword != "" {
		return nil
	}
	has, err := store.HasAdmins(ctx, db)
	if err != nil {
		return err
	}
	if !has {
		return ErrBootstrapPasswordRequired
	}
	return nil
}

// EnsureBootstrapAdmin creates the [bootstrap] admin when the database has no
// admin users, and does nothing otherwise (the configured password is never
// applied to an existing admin).
func EnsureBootstrapAdmin(ctx context.Context, db store.DB, o BootstrapOptions, log *slog.Logger) error {
	n, err := store.Q(db).CountAdmins(ctx)
	if err != nil {
		return err
	}
	if n > 0 {
		return nil
	}
	if o.AdminPassword == "" {
		return ErrBootstrapPasswordRequired
	}
	o.AdminUsername = cmp.Or(o.AdminUsername, DefaultBootstrapAdminUsername)
	created, err := store.CreateFirstAdmin(ctx, db, o.AdminUsername, func() (string, error) {
		return HashPassword(o.AdminPassword)
	})
	if err != nil {
		return err
	}
	if created {
		log.InfoContext(ctx, "bootstrap admin created", "username", o.AdminUsername)
	}
	return nil
}
