package store

import (
	"context"
	"time"

	"github.com/google/uuid"

	"github.com/rustbill/paymentd/internal/store/dbsqlc"
)

// The parameters of the queries run through Q.
type (
	RevokeCustomerApiKeysParams = dbsqlc.RevokeCustomerApiKeysParams
)

// APIKey is a row of api_keys. SecretHash is SHA-256 of the key's secret.
type APIKey struct {
	ID         uuid.UUID
	CustomerID uuid.UUID
	Name       string
	SecretHash []byte
	CreatedAt  time.Time
	LastUsedAt *time.Time
	RevokedAt  *time.Time
}

// APIKeyWithCustomer is an API key and the state of its customer.
type APIKeyWithCustomer struct {
	APIKey
	CustomerCanCreateAPIKeys bool
	CustomerDisabledAt       *time.Time
}

func apiKeyResult(k dbsqlc.ApiKey, err error) (APIKey, error) {
	if err != nil {
		return APIKey{}, MapError(err)
	}
	return APIKey(k), nil
}

// InsertAPIKey stores a new key for customerID.
func InsertAPIKey(ctx context.Context, db DB, customerID uuid.UUID, name string, secretHash []byte, now time.Time) (APIKey, error) {
	return apiKeyResult(dbsqlc.New(db).InsertApiKey(ctx, dbsqlc.InsertApiKeyParams{
		CustomerID: customerID, Name: name, SecretHash: secretHash, CreatedAt: now,
	}))
}

// GetAPIKey reads a key with its customer's state; ErrNotFound when there is
// none.
func GetAPIKey(ctx context.Context, db DB, id uuid.UUID) (APIKeyWithCustomer, error) {
	r, err := dbsqlc.New(db).GetApiKeyWithCustomer(ctx, id)
	if err != nil {
		return APIKeyWithCustomer{}, MapError(err)
	}
	return APIKeyWithCustomer{
		APIKey: APIKey{
			ID:         r.ID,
			CustomerID: r.CustomerID,
			Name:       r.Name,
			SecretHash: r.SecretHash,
			CreatedAt:  r.CreatedAt,
			LastUsedAt: r.LastUsedAt,
			RevokedAt:  r.RevokedAt,
		},
		CustomerCanCreateAPIKeys: r.CustomerCanCreateApiKeys,
		CustomerDisabledAt:       r.CustomerDisabledAt,
	}, nil
}

// GetCustomerAPIKey reads a key of customerID; ErrNotFound when the key does
// not exist or belongs to another customer.
func GetCustomerAPIKey(ctx context.Context, db DB, customerID, id uuid.UUID) (APIKey, error) {
	return apiKeyResult(dbsqlc.New(db).GetCustomerApiKey(ctx, dbsqlc.GetCustomerApiKeyParams{ID: id, CustomerID: customerID}))
}

// ListCustomerAPIKeys returns one page of the customer's keys, newest first,
// and the number of the customer's keys.
func ListCustomerAPIKeys(ctx context.Context, db DB, customerID uuid.UUID, page Page) ([]APIKey, int64, error) {
	q := dbsqlc.New(db)
	rows, total, err := countThenList(func() (int64, error) {
		return q.CountCustomerApiKeys(ctx, customerID)
	}, page.Offset, func() ([]dbsqlc.ApiKey, error) {
		return q.ListCustomerApiKeys(ctx, dbsqlc.ListCustomerApiKeysParams{CustomerID: customerID, RowLimit: page.Limit, RowOffset: page.Offset})
	})
	if err != nil {
		return nil, 0, err
	}
	out := make([]APIKey, len(rows))
	for i, r := range rows {
		out[i] = APIKey(r)
	}
	return out, total, nil
}

// RevokeAPIKey marks the customer's active key revoked at now; ErrNotFound
// when the key is not the customer's or is revoked already.
func RevokeAPIKey(ctx context.Context, db DB, customerID, id uuid.UUID, now time.Time) (APIKey, error) {
	return apiKeyResult(dbsqlc.New(db).RevokeApiKey(ctx, dbsqlc.RevokeApiKeyParams{ID: id, CustomerID: customerID, RevokedAt: &now}))
}

// TouchAPIKey moves last_used_at forward to at (never back).
func TouchAPIKey(ctx context.Context, db DB, id uuid.UUID, at time.Time) error {
	_, err := dbsqlc.New(db).TouchApiKey(ctx, dbsqlc.TouchApiKeyParams{ID: id, LastUsedAt: &at})
	return MapError(err)
}
