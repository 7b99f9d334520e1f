package store

import (
	"context"
	"errors"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/rustbill/paymentd/internal/store/dbsqlc"
)

// HasAdmins reports whether the database holds an admin user; a database
// not migrated yet (no admin_users table) holds none. The start asks it
// before migrating, and config check asks it too.
func HasAdmins(ctx context.Context, db DB) (bool, error) {
	n, err := dbsqlc.New(db).CountAdmins(ctx)
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == "42P01" { // undefined_table
		return false, nil
	}
	return n > 0, MapError(err)
}

// CreateFirstAdmin creates an admin named username when admin_users is empty,
// and reports whether it did. Instances starting at once are serialised by a
// table lock, so exactly one creates it. hash is called only when the admin is
// really created (password hashing is deliberately slow).
func CreateFirstAdmin(ctx context.Context, db DB, username string, hash func() (string, error)) (created bool, err error) {
	err = WithTx(ctx, db, func(tx pgx.Tx) error {
		q := dbsqlc.New(tx)
		if err := q.LockAdminUsers(ctx); err != nil {
			return MapError(err)
		}
		n, err := q.CountAdmins(ctx)
		if err != nil {
			return MapError(err)
		}
		if n > 0 {
			return nil
		}
		h, err := hash()
		if err != nil {
			return err
		}
		if _, err := q.CreateAdmin(ctx, dbsqlc.CreateAdminParams{Username: username, PasswordHash: h, DisplayName: username}); err != nil {
			return MapError(err)
		}
		created = true
		return nil
	})
	return created, err
}

// CreateAdmin adds an admin (`paymentd admin create-admin`); a taken
// username is ErrConflict.
func CreateAdmin(ctx context.Context, db DB, username, passwordHash, displayName string) (Admin, error) {
	return adminResult(dbsqlc.New(db).CreateAdmin(ctx, dbsqlc.CreateAdminParams{
		Username: username, PasswordHash: passwordHash, DisplayName: displayName,
	}))
}

// SetAdminPassword replaces an admin's password hash; ErrNotFound when
// there is no such admin.
func SetAdminPassword(ctx context.Context, db DB, username, passwordHash string) (Admin, error) {
	return adminResult(dbsqlc.New(db).SetAdminPassword(ctx, dbsqlc.SetAdminPasswordParams{
		Username: username, PasswordHash: passwordHash,
	}))
}

// ChangeAdminPassword replaces the admin's password hash while it is still
// oldHash; ErrNotFound when the admin does not exist or the hash changed
// meanwhile.
func ChangeAdminPassword(ctx context.Context, db DB, id uuid.UUID, oldHash, newHash string, now time.Time) (Admin, error) {
	return adminResult(dbsqlc.New(db).ChangeAdminPassword(ctx, dbsqlc.ChangeAdminPasswordParams{
		ID: id, OldHash: oldHash, NewHash: newHash, UpdatedAt: now,
	}))
}

// SetAdminDisabledAt disables the admin at *at, or enables them (nil);
// ErrNotFound when there is no such admin.
func SetAdminDisabledAt(ctx context.Context, db DB, id uuid.UUID, at *time.Time, now time.Time) (Admin, error) {
	return adminResult(dbsqlc.New(db).SetAdminDisabledAt(ctx, dbsqlc.SetAdminDisabledAtParams{ID: id, DisabledAt: at, UpdatedAt: now}))
}
