package identity

import (
	"context"
	"errors"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/rustbill/paymentd/internal/apperr"
	"github.com/rustbill/paymentd/internal/audit"
	"github.com/rustbill/paymentd/internal/auth"
	"github.com/rustbill/paymentd/internal/paging"
	"github.com/rustbill/paymentd/internal/store"
	"github.com/rustbill/paymentd/internal/timerange"
)

// An admin API key reads "ak_<id>_<secret>", shaped as a customer's
// "pk_<id>_<secret>" (api_key.go): the prefix alone tells the two apart, so
// the API key layer knows which table to read before it reads one.
const (
	adminKeyPrefix = "ak_"
	// maxActiveAdminKeys bounds the unrevoked admin keys of the service.
	maxActiveAdminKeys = 50
)

// Audit actions of admin API keys.
const (
	ActionAdminAPIKeyCreated = "admin_api_key.created"
	ActionAdminAPIKeyRevoked = "admin_api_key.revoked"
)

var errKeysManagedBySession = apperr.New(apperr.PermissionDenied, "admin API keys are managed signed in with a password (an admin session), not with an API key")

// AdminAPIKey describes an admin API key: never its secret or the secret's
// hash.
type AdminAPIKey struct {
	ID            uuid.UUID  `json:"id"`
	Name          string     `json:"name"`
	Scope         string     `json:"scope"`
	AdminID       uuid.UUID  `json:"admin_id"`
	AdminUsername string     `json:"admin_username,omitempty"`
	CreatedAt     time.Time  `json:"created_at"`
	LastUsedAt    *time.Time `json:"last_used_at,omitempty"`
	RevokedAt     *time.Time `json:"revoked_at,omitempty"`
	RevokedBy     *uuid.UUID `json:"revoked_by,omitempty"`
	ExpiresAt     *time.Time `json:"expires_at,omitempty"`
}

// Prefix is the public part of the key, "ak_<id>", to recognise it by.
func (k AdminAPIKey) Prefix() string { return adminKeyPrefix + hexID(k.ID) }

func adminAPIKeyOf(k store.AdminAPIKey) AdminAPIKey {
	return AdminAPIKey{
		ID: k.ID, Name: k.Name, Scope: k.Scope, AdminID: k.AdminID, AdminUsername: k.AdminUsername,
		CreatedAt: k.CreatedAt, LastUsedAt: k.LastUsedAt, RevokedAt: k.RevokedAt, RevokedBy: k.RevokedBy, ExpiresAt: k.ExpiresAt,
	}
}

// authenticateAdminKey returns the admin an admin API key acts as, with
// the key's scope; *auth.Invalid for a malformed, unknown, wrong or revoked
// key and for a key of a disabled admin.
func (s *Service) authenticateAdminKey(ctx context.Context, key string) (auth.Principal, error) {
	id, sum, ok := parseKey(key, adminKeyPrefix)
	if !ok {
		return auth.Principal{}, &auth.Invalid{Reason: "malformed admin API key"}
	}
	k, err := store.GetAdminAPIKey(ctx, s.db, id)
	if errors.Is(err, store.ErrNotFound) {
		return auth.Principal{}, &auth.Invalid{Reason: "unknown admin API key " + id.String()}
	}
	if err != nil {
		return auth.Principal{}, err
	}
	if err := checkKey(storedKey{kind: "admin API key", owner: "admin", id: id, hash: k.SecretHash,
		revokedAt: k.RevokedAt, ownerDisabledAt: k.AdminDisabledAt}, sum); err != nil {
		return auth.Principal{}, err
	}
	if exp := s.keyExpiresAt(k.CreatedAt, k.ExpiresAt); exp != nil && !s.now().Before(*exp) {
		return auth.Principal{}, &auth.Invalid{Reason: "admin API key " + id.String() + " expired at " + exp.Format(time.RFC3339)}
	}
	scope, ok := auth.ParseScope(k.Scope)
	if !ok {
		return auth.Principal{}, &auth.Invalid{Reason: "admin API key " + id.String() + " has no known scope"}
	}
	s.touchKey(ctx, id, k.LastUsedAt, store.TouchAdminAPIKey)
	return auth.Principal{Role: auth.RoleAdmin, ID: k.AdminID, Kind: auth.KindAPIKey, CredentialID: id.String(), Scope: scope}, nil
}

// requireAdminSession returns the calling admin when signed in with a
// session: keys are never managed with a key, so a leaked key cannot mint
// a wider one or revoke the others.
func requireAdminSession(ctx context.Context) (auth.Principal, error) {
	p, err := auth.RequireAdmin(ctx)
	if err != nil {
		return p, err
	}
	if p.Kind != auth.KindSession {
		return p, errKeysManagedBySession
	}
	return p, nil
}

// CreateAdminAPIKey creates a key acting as the calling admin within scope
// (read, operate or admin) and returns it in full, the only time it exists
// outside the caller: only SHA-256 of its secret is stored. The key stops
// working at expiresAt: nil means never while no maximum lifetime is
// configured, and the maximum lifetime from now otherwise; a time in the
// past or beyond the maximum lifetime is InvalidArgument.
func (s *Service) CreateAdminAPIKey(ctx context.Context, name, scope string, expiresAt *time.Time) (AdminAPIKey, string, error) {
	p, err := requireAdminSession(ctx)
	if err != nil {
		return AdminAPIKey{}, "", err
	}
	name = strings.TrimSpace(name)
	if name == "" {
		return AdminAPIKey{}, "", apperr.New(apperr.InvalidArgument, "name is required")
	}
	if _, ok := auth.ParseScope(scope); !ok {
		return AdminAPIKey{}, "", apperr.New(apperr.InvalidArgument, "scope must be read, operate or admin")
	}
	now := s.now()
	expiresAt, err = s.keyExpiry(now, expiresAt)
	if err != nil {
		return AdminAPIKey{}, "", err
	}
	secret, hash, err := newSecret()
	if err != nil {
		return AdminAPIKey{}, "", err
	}
	var k store.AdminAPIKey
	err = store.WithTx(ctx, s.db, func(tx pgx.Tx) error {
		if err := store.Q(tx).LockAdminApiKeys(ctx); err != nil {
			return err
		}
		n, err := store.Q(tx).CountActiveAdminApiKeys(ctx)
		if err != nil {
			return err
		}
		if n >= maxActiveAdminKeys {
			return apperr.New(apperr.FailedPrecondition, "at most %d active admin API keys; revoke one first", maxActiveAdminKeys)
		}
		k, err = store.InsertAdminAPIKey(ctx, tx, store.NewAdminAPIKey{AdminID: p.ID, Name: name, Scope: scope, SecretHash: hash, CreatedAt: now, ExpiresAt: expiresAt})
		if err != nil {
			return err
		}
		return audit.Write(ctx, tx, audit.Of(p), now, ActionAdminAPIKeyCreated, "admin_api_key", k.ID.String(), nil, adminAPIKeyOf(k))
	})
	if err != nil {
		return AdminAPIKey{}, "", err
	}
	out := adminAPIKeyOf(k)
	if a, err := store.GetAdmin(ctx, s.db, p.ID); err == nil {
		out.AdminUsername = a.Username
	}
	return out, adminKeyPrefix + hexID(k.ID) + "_" + secret, nil
}

// ListAdminAPIKeys pages through every admin's keys, newest first.
func (s *Service) ListAdminAPIKeys(ctx context.Context, page, size uint32) ([]AdminAPIKey, paging.Page, error) {
	if _, err := requireAdminSession(ctx); err != nil {
		return nil, paging.Page{}, err
	}
	pg, err := paging.Normalize(page, size)
	if err != nil {
		return nil, paging.Page{}, err
	}
	rows, total, err := store.ListAdminAPIKeys(ctx, s.db, store.PageOf(pg))
	if err != nil {
		return nil, paging.Page{}, err
	}
	out := make([]AdminAPIKey, len(rows))
	for i, r := range rows {
		out[i] = adminAPIKeyOf(r)
		out[i].ExpiresAt = s.keyExpiresAt(r.CreatedAt, r.ExpiresAt)
	}
	return out, pg.WithTotal(total), nil
}

// RevokeAdminAPIKey revokes an admin key (any admin's): it is refused from
// the next request on. A revoked key is returned unchanged; an unknown one
// is NotFound.
func (s *Service) RevokeAdminAPIKey(ctx context.Context, id uuid.UUID) (AdminAPIKey, error) {
	p, err := requireAdminSession(ctx)
	if err != nil {
		return AdminAPIKey{}, err
	}
	now := s.now()
	var k store.AdminAPIKey
	err = store.WithTx(ctx, s.db, func(tx pgx.Tx) error {
		before, err := store.GetAdminAPIKey(ctx, tx, id)
		if err != nil {
			return store.NotFound(err, "admin API key not found")
		}
		revoked, err := store.RevokeAdminAPIKey(ctx, tx, id, p.ID, now)
		if errors.Is(err, store.ErrNotFound) { // revoked already, maybe just now
			k, err = store.GetAdminAPIKey(ctx, tx, id)
			return err
		}
		if err != nil {
			return err
		}
		k = before
		k.RevokedAt, k.RevokedBy = revoked.RevokedAt, revoked.RevokedBy
		return audit.Write(ctx, tx, audit.Of(p), now, ActionAdminAPIKeyRevoked, "admin_api_key", id.String(), adminAPIKeyOf(before), adminAPIKeyOf(k))
	})
	if err != nil {
		return AdminAPIKey{}, err
	}
	out := adminAPIKeyOf(k)
	out.ExpiresAt = s.keyExpiresAt(k.CreatedAt, k.ExpiresAt)
	return out, nil
}

// keyExpiresAt is when an admin key created at created stops working: at
// its own expiry, or [admin].api_key_max_lifetime_days after its creation
// when that comes first. The maximum is applied at every check, not only
// when a key is made, so that setting it (or lowering it) bounds the keys
// made before as well; nil when the key never expires.
func (s *Service) keyExpiresAt(created time.Time, stored *time.Time) *time.Time {
	if s.keyMaxLifetime == 0 {
		return stored
	}
	limit := created.Add(s.keyMaxLifetime)
	if stored != nil && stored.Before(limit) {
		return stored
	}
	return &limit
}

// keyExpiry checks a new admin key's expiry against now and the maximum
// lifetime, and fills it in when the caller gave none and a maximum is set.
func (s *Service) keyExpiry(now time.Time, at *time.Time) (*time.Time, error) {
	if at == nil {
		if s.keyMaxLifetime == 0 {
			return nil, nil
		}
		t := now.Add(s.keyMaxLifetime)
		return &t, nil
	}
	t := store.Timestamp(*at)
	if !t.After(now) {
		return nil, apperr.New(apperr.InvalidArgument, "expires_at must be in the future, got %s", t.Format(time.RFC3339))
	}
	if err := timerange.CheckAhead("expires_at", t, now); err != nil {
		return nil, err
	}
	if s.keyMaxLifetime > 0 && t.Sub(now) > s.keyMaxLifetime {
		return nil, apperr.New(apperr.InvalidArgument, "expires_at must be within %d days of now ([admin].api_key_max_lifetime_days), got %s",
			int(s.keyMaxLifetime/(24*time.Hour)), t.Format(time.RFC3339))
	}
	return &t, nil
}
