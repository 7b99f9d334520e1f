package identity

import (
	"context"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"net/http"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/rustbill/paymentd/internal/apperr"
	"github.com/rustbill/paymentd/internal/audit"
	"github.com/rustbill/paymentd/internal/auth"
	"github.com/rustbill/paymentd/internal/paging"
	"github.com/rustbill/paymentd/internal/store"
)

// APIKeyHeader carries an API key (gRPC metadata or HTTP header).
const APIKeyHeader = "X-Api-Key"

// An API key reads "pk_<id>_<secret>": id is the api_keys row id as 32
// lower-case hex digits (a UUID without hyphens), secret 32 random bytes in
// unpadded base64url (43 characters, which may themselves hold '_' or '-').
// The id is not secret: it finds the row, whose secret_hash is compared with
// SHA-256 of the secret in constant time.
const (
	apiKeyPrefix = "pk_"
	apiKeyIDLen  = 32
	apiKeyLen    = len(apiKeyPrefix) + apiKeyIDLen + 1 + tokenLen
	// maxActiveAPIKeys bounds a customer's unrevoked keys.
	maxActiveAPIKeys = 20
)

var errAPIKeysManagedByKey = apperr.New(apperr.PermissionDenied, "an API key cannot create or revoke API keys; log in with a password")

func hexID(id uuid.UUID) string { return hex.EncodeToString(id[:]) }

func formatAPIKey(id uuid.UUID, secret string) string {
	return apiKeyPrefix + hexID(id) + "_" + secret
}

// parseAPIKey splits a customer's key into its id and the SHA-256 of its
// secret.
func parseAPIKey(key string) (uuid.UUID, []byte, bool) { return parseKey(key, apiKeyPrefix) }

// parseKey splits a key "<prefix><id>_<secret>" (a customer's pk_ or an
// admin's ak_, both three characters) into its id and the SHA-256 of its
// secret.
func parseKey(key, prefix string) (uuid.UUID, []byte, bool) {
	if len(key) != apiKeyLen || !strings.HasPrefix(key, prefix) || key[len(prefix)+apiKeyIDLen] != '_' {
		return uuid.Nil, nil, false
	}
	rawID := key[len(prefix) : len(prefix)+apiKeyIDLen]
	if strings.ToLower(rawID) != rawID {
		return uuid.Nil, nil, false
	}
	b, err := hex.DecodeString(rawID)
	if err != nil {
		return uuid.Nil, nil, false
	}
	id, err := uuid.FromBytes(b)
	if err != nil {
		return uuid.Nil, nil, false
	}
	sum, ok := hashSecret(key[len(prefix)+apiKeyIDLen+1:])
	if !ok {
		return uuid.Nil, nil, false
	}
	return id, sum, true
}

// APIKeyAuthenticator checks the x-api-key header on every request: a
// customer's key (pk_) against api_keys, an admin's (ak_) against
// admin_api_keys. Validity is never cached, so a revoked key is refused from
// the very next request.
type APIKeyAuthenticator struct{ svc *Service }

var _ auth.Authenticator = (*APIKeyAuthenticator)(nil)

// Kind is auth.KindAPIKey.
func (*APIKeyAuthenticator) Kind() auth.Kind { return auth.KindAPIKey }

// Authenticate returns the customer of a valid key; ErrNoCredential without
// the header; *auth.Invalid for a malformed, unknown, wrong, revoked key, and
// for a key of a customer who is disabled or no longer allowed API keys.
func (a *APIKeyAuthenticator) Authenticate(ctx context.Context, r *http.Request) (auth.Principal, error) {
	values := r.Header.Values(APIKeyHeader)
	if len(values) == 0 {
		return auth.Principal{}, auth.ErrNoCredential
	}
	if len(values) > 1 {
		return auth.Principal{}, &auth.Invalid{Reason: "more than one API key"}
	}
	key := strings.TrimSpace(values[0])
	if strings.HasPrefix(key, adminKeyPrefix) {
		return a.svc.authenticateAdminKey(ctx, key)
	}
	id, sum, ok := parseAPIKey(key)
	if !ok {
		return auth.Principal{}, &auth.Invalid{Reason: "malformed API key"}
	}
	k, err := store.GetAPIKey(ctx, a.svc.db, id)
	if errors.Is(err, store.ErrNotFound) {
		return auth.Principal{}, &auth.Invalid{Reason: "unknown API key " + id.String()}
	}
	if err != nil {
		return auth.Principal{}, err
	}
	if err := checkKey(storedKey{kind: "API key", owner: "customer", id: id, hash: k.SecretHash,
		revokedAt: k.RevokedAt, ownerDisabledAt: k.CustomerDisabledAt}, sum); err != nil {
		return auth.Principal{}, err
	}
	if !k.CustomerCanCreateAPIKeys {
		return auth.Principal{}, &auth.Invalid{Reason: "customer of API key " + id.String() + " may not use API keys"}
	}
	a.svc.touchKey(ctx, id, k.LastUsedAt, store.TouchAPIKey)
	return auth.Principal{Role: auth.RoleCustomer, ID: k.CustomerID, Kind: auth.KindAPIKey, CredentialID: id.String()}, nil
}

// requireKeyManager returns the calling customer when they may manage API
// keys: a customer logged in with a password (JWT), never an API key, so a
// leaked key cannot mint or revoke keys.
func requireKeyManager(ctx context.Context) (auth.Principal, error) {
	p, err := requireCustomer(ctx)
	if err != nil {
		return p, err
	}
	if p.Kind == auth.KindAPIKey {
		return p, errAPIKeysManagedByKey
	}
	return p, nil
}

// CreateAPIKey creates a key for the calling customer and returns it in full,
// the only time it exists outside the caller: only SHA-256 of its secret is
// stored. The customer must be allowed API keys (PermissionDenied otherwise).
func (s *Service) CreateAPIKey(ctx context.Context, name string) (APIKey, string, error) {
	p, err := requireKeyManager(ctx)
	if err != nil {
		return APIKey{}, "", err
	}
	name = strings.TrimSpace(name)
	if name == "" {
		return APIKey{}, "", apperr.New(apperr.InvalidArgument, "name is required")
	}
	secret, hash, err := newSecret()
	if err != nil {
		return APIKey{}, "", err
	}
	var k store.APIKey
	err = store.WithTx(ctx, s.db, func(tx pgx.Tx) error {
		// The lock serialises key creation per customer, so the count holds.
		c, err := store.GetCustomerForUpdate(ctx, tx, p.ID)
		if errors.Is(err, store.ErrNotFound) {
			return apperr.New(apperr.Unauthenticated, "account not found")
		}
		if err != nil {
			return err
		}
		if c.DisabledAt != nil || !c.CanCreateAPIKeys {
			return apperr.New(apperr.PermissionDenied, "this account may not create API keys")
		}
		n, err := store.Q(tx).CountActiveCustomerApiKeys(ctx, p.ID)
		if err != nil {
			return err
		}
		if n >= maxActiveAPIKeys {
			return apperr.New(apperr.FailedPrecondition, "at most %d active API keys; revoke one first", maxActiveAPIKeys)
		}
		if k, err = store.InsertAPIKey(ctx, tx, p.ID, name, hash, s.now()); err != nil {
			return err
		}
		return audit.Write(ctx, tx, audit.Of(p), s.now(), "api_key.created", "api_key", k.ID.String(), nil, apiKeyOf(k))
	})
	if err != nil {
		return APIKey{}, "", err
	}
	return apiKeyOf(k), formatAPIKey(k.ID, secret), nil
}

// ListAPIKeys pages through the calling customer's keys, newest first.
func (s *Service) ListAPIKeys(ctx context.Context, page, size uint32) ([]APIKey, paging.Page, error) {
	p, err := requireCustomer(ctx)
	if err != nil {
		return nil, paging.Page{}, err
	}
	pg, err := paging.Normalize(page, size)
	if err != nil {
		return nil, paging.Page{}, err
	}
	rows, total, err := store.ListCustomerAPIKeys(ctx, s.db, p.ID, store.PageOf(pg))
	if err != nil {
		return nil, paging.Page{}, err
	}
	out := make([]APIKey, len(rows))
	for i, r := range rows {
		out[i] = apiKeyOf(r)
	}
	return out, pg.WithTotal(total), nil
}

// RevokeAPIKey revokes one of the calling customer's keys. Another
// customer's key is NotFound; a revoked key is returned unchanged.
func (s *Service) RevokeAPIKey(ctx context.Context, id uuid.UUID) (APIKey, error) {
	p, err := requireKeyManager(ctx)
	if err != nil {
		return APIKey{}, err
	}
	var k store.APIKey
	err = store.WithTx(ctx, s.db, func(tx pgx.Tx) error {
		before, err := store.GetCustomerAPIKey(ctx, tx, p.ID, id)
		if err != nil {
			return store.NotFound(err, "API key not found")
		}
		k, err = store.RevokeAPIKey(ctx, tx, p.ID, id, s.now())
		if errors.Is(err, store.ErrNotFound) { // revoked already, maybe just now
			k, err = store.GetCustomerAPIKey(ctx, tx, p.ID, id)
			return err
		}
		if err != nil {
			return err
		}
		return audit.Write(ctx, tx, audit.Of(p), s.now(), "api_key.revoked", "api_key", k.ID.String(), apiKeyOf(before), apiKeyOf(k))
	})
	if err != nil {
		return APIKey{}, err
	}
	return apiKeyOf(k), nil
}

// storedKey is what the checks of a customer's or an admin's API key read
// from its row: kind and owner name it in the reasons ("API key" and
// "customer", "admin API key" and "admin").
type storedKey struct {
	kind, owner     string
	id              uuid.UUID
	hash            []byte
	revokedAt       *time.Time
	ownerDisabledAt *time.Time
}

// checkKey refuses a key whose secret's hash (sum) is not the stored one
// (compared in constant time), a revoked key and a key of a disabled owner,
// as *auth.Invalid.
func checkKey(k storedKey, sum []byte) error {
	switch {
	case subtle.ConstantTimeCompare(sum, k.hash) != 1:
		return &auth.Invalid{Reason: "wrong secret for " + k.kind + " " + k.id.String()}
	case k.revokedAt != nil:
		return &auth.Invalid{Reason: k.kind + " " + k.id.String() + " is revoked"}
	case k.ownerDisabledAt != nil:
		return &auth.Invalid{Reason: k.owner + " of API key " + k.id.String() + " is disabled"}
	}
	return nil
}

// touchKey refreshes a key's last_used_at at most every touchEvery; a
// failure is logged, never the caller's.
func (s *Service) touchKey(ctx context.Context, id uuid.UUID, lastUsed *time.Time, touch func(context.Context, store.DB, uuid.UUID, time.Time) error) {
	now := s.now()
	if lastUsed != nil && now.Sub(*lastUsed) < touchEvery {
		return
	}
	if err := touch(ctx, s.db, id, now); err != nil {
		s.log.WarnContext(ctx, "api key last_used_at not refreshed", "api_key", id.String(), "err", err)
	}
}
