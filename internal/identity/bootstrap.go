package identity

import (
	"context"
	"errors"
	"log/slog"

	"github.com/rustbill/paymentd/internal/config"
	"github.com/rustbill/paymentd/internal/store"
)

// ErrBootstrapPasswordRequired stops a start on a database without admins when
// no bootstrap password is configured: nobody could ever log in.
var ErrBootstrapPasswordRequired = errors.New("[bootstrap].admin_password is required: the database has no admin users yet")

// EnsureBootstrapAdmin creates the [bootstrap] admin when the database has no
// admin users, and does nothing otherwise (the configured password is never
// applied to an existing admin).
func EnsureBootstrapAdmin(ctx context.Context, db store.DB, cfg config.Bootstrap, log *slog.Logger) error {
	n, err := store.CountAdmins(ctx, db)
	if err != nil {
		return err
	}
	if n > 0 {
		return nil
	}
	if cfg.AdminPassword == "" {
		return ErrBootstrapPasswordRequired
	}
	created, err := store.CreateFirstAdmin(ctx, db, cfg.AdminUsername, func() (string, error) {
		return HashPassword(cfg.AdminPassword)
	})
	if err != nil {
		return err
	}
	if created {
		log.InfoContext(ctx, "bootstrap admin created", "username", cfg.AdminUsername)
	}
	return nil
}
