package store

import (
	"context"
	"time"

	"github.com/google/uuid"

	"github.com/rustbill/paymentd/internal/store/dbsqlc"
)

// AdminAPIKey is a row of admin_api_keys with the state of the admin it acts
// as. SecretHash is SHA-256 of the key's secret.
type AdminAPIKey struct {
	ID         uuid.UUID
	AdminID    uuid.UUID
	Name       string
	Scope      string
	SecretHash []byte
	CreatedAt  time.Time
	LastUsedAt *time.Time
	RevokedAt  *time.Time
	RevokedBy  *uuid.UUID
	// ExpiresAt is when the key stops working; nil never.
	ExpiresAt *time.Time
	// AdminUsername and AdminDisabledAt are the admin's (reads only; zero
	// in what an insert or a revocation returns).
	AdminUsername   string
	AdminDisabledAt *time.Time
}

func adminAPIKeyResult(k dbsqlc.AdminApiKey, err error) (AdminAPIKey, error) {
	if err != nil {
		return AdminAPIKey{}, MapError(err)
	}
	return AdminAPIKey{
		ID: k.ID, AdminID: k.AdminID, Name: k.Name, Scope: k.Scope, SecretHash: k.SecretHash,
		CreatedAt: k.CreatedAt, LastUsedAt: k.LastUsedAt, RevokedAt: k.RevokedAt, RevokedBy: k.RevokedBy, ExpiresAt: k.ExpiresAt,
	}, nil
}

// NewAdminAPIKey is what InsertAdminAPIKey needs.
type NewAdminAPIKey struct {
	AdminID    uuid.UUID
	Name       string
	Scope      string
	SecretHash []byte
	CreatedAt  time.Time
	ExpiresAt  *time.Time
}

// InsertAdminAPIKey stores a new admin key.
func InsertAdminAPIKey(ctx context.Context, db DB, k NewAdminAPIKey) (AdminAPIKey, error) {
	return adminAPIKeyResult(dbsqlc.New(db).InsertAdminApiKey(ctx, dbsqlc.InsertAdminApiKeyParams{
		AdminID: k.AdminID, Name: k.Name, Scope: k.Scope, SecretHash: k.SecretHash, CreatedAt: k.CreatedAt, ExpiresAt: k.ExpiresAt,
	}))
}

// GetAdminAPIKey reads a key with its admin's state; ErrNotFound when there
// is none.
func GetAdminAPIKey(ctx context.Context, db DB, id uuid.UUID) (AdminAPIKey, error) {
	r, err := dbsqlc.New(db).GetAdminApiKeyWithAdmin(ctx, id)
	if err != nil {
		return AdminAPIKey{}, MapError(err)
	}
	return AdminAPIKey(r), nil
}

// ListAdminAPIKeys returns one page of every admin's keys, newest first, and
// how many keys there are.
func ListAdminAPIKeys(ctx context.Context, db DB, page Page) ([]AdminAPIKey, int64, error) {
	q := dbsqlc.New(db)
	rows, total, err := countThenList(func() (int64, error) {
		return q.CountAdminApiKeys(ctx)
	}, page.Offset, func() ([]dbsqlc.ListAdminApiKeysRow, error) {
		return q.ListAdminApiKeys(ctx, dbsqlc.ListAdminApiKeysParams{RowLimit: page.Limit, RowOffset: page.Offset})
	})
	out := make([]AdminAPIKey, len(rows))
	for i, r := range rows {
		out[i] = AdminAPIKey(r)
	}
	return out, total, err
}

// RevokeAdminAPIKey marks an active key revoked at now by admin by;
// ErrNotFound when the key does not exist or is revoked already.
func RevokeAdminAPIKey(ctx context.Context, db DB, id, by uuid.UUID, now time.Time) (AdminAPIKey, error) {
	return adminAPIKeyResult(dbsqlc.New(db).RevokeAdminApiKey(ctx, dbsqlc.RevokeAdminApiKeyParams{ID: id, RevokedAt: &now, RevokedBy: &by}))
}

// TouchAdminAPIKey moves last_used_at forward to at (never back).
func TouchAdminAPIKey(ctx context.Context, db DB, id uuid.UUID, at time.Time) error {
	_, err := dbsqlc.New(db).TouchAdminApiKey(ctx, dbsqlc.TouchAdminApiKeyParams{ID: id, LastUsedAt: &at})
	return MapError(err)
}

// RevokeAdminAPIKeysOfAdmin revokes every active key of an admin at now,
// by an admin (nil: an operator's command), and returns them as revoked.
func RevokeAdminAPIKeysOfAdmin(ctx context.Context, db DB, adminID uuid.UUID, by *uuid.UUID, now time.Time) ([]AdminAPIKey, error) {
	rows, err := dbsqlc.New(db).RevokeAdminApiKeysOfAdmin(ctx, dbsqlc.RevokeAdminApiKeysOfAdminParams{AdminID: adminID, RevokedAt: &now, RevokedBy: by})
	if err != nil {
		return nil, MapError(err)
	}
	out := make([]AdminAPIKey, len(rows))
	for i, r := range rows {
		out[i], _ = adminAPIKeyResult(r, nil)
	}
	return out, nil
}
