package store

import (
	"context"

	"github.com/google/uuid"

	"github.com/rustbill/paymentd/internal/store/dbsqlc"
)

// SecretConfig is a stored config that may hold plugin secrets, for the
// passes over them: its owner's id and name, the config (JSON object) and
// the config schema that says which properties are secret (nil when the
// plugin is gone).
type SecretConfig struct {
	ID           uuid.UUID
	Name         string
	Config       []byte
	ConfigSchema []byte
}

// SecretConfigTable is one kind of stored config: a page of them by id
// after after, one locked until the transaction ends (ErrNotFound when
// gone), and one written back.
type SecretConfigTable struct {
	Page  func(ctx context.Context, db DB, after uuid.UUID, limit int64) ([]SecretConfig, error)
	Lock  func(ctx context.Context, db DB, id uuid.UUID) (SecretConfig, error)
	Write func(ctx context.Context, db DB, id uuid.UUID, config []byte) error
}

// GatewayInterfaceConfigs are gateway_interfaces.config.
var GatewayInterfaceConfigs = SecretConfigTable{
	Page: func(ctx context.Context, db DB, after uuid.UUID, limit int64) ([]SecretConfig, error) {
		rows, err := dbsqlc.New(db).PageGatewayInterfaceConfigs(ctx, dbsqlc.PageGatewayInterfaceConfigsParams{After: after, RowLimit: int32(limit)})
		return convertRows(rows, err, func(r dbsqlc.PageGatewayInterfaceConfigsRow) SecretConfig { return SecretConfig(r) })
	},
	Lock: func(ctx context.Context, db DB, id uuid.UUID) (SecretConfig, error) {
		r, err := dbsqlc.New(db).LockGatewayInterfaceConfig(ctx, id)
		return SecretConfig(r), MapError(err)
	},
	Write: SetGatewayInterfaceConfig,
}

// ProductProviderConfigs are products.provider_config.
var ProductProviderConfigs = SecretConfigTable{
	Page: func(ctx context.Context, db DB, after uuid.UUID, limit int64) ([]SecretConfig, error) {
		rows, err := dbsqlc.New(db).PageProductProviderConfigs(ctx, dbsqlc.PageProductProviderConfigsParams{After: after, RowLimit: int32(limit)})
		return convertRows(rows, err, func(r dbsqlc.PageProductProviderConfigsRow) SecretConfig { return SecretConfig(r) })
	},
	Lock: func(ctx context.Context, db DB, id uuid.UUID) (SecretConfig, error) {
		r, err := dbsqlc.New(db).LockProductProviderConfig(ctx, id)
		return SecretConfig(r), MapError(err)
	},
	Write: func(ctx context.Context, db DB, id uuid.UUID, config []byte) error {
		return MapError(dbsqlc.New(db).SetProductProviderConfig(ctx, dbsqlc.SetProductProviderConfigParams{ID: id, Config: config}))
	},
}

// OrderProviderConfigs are orders.item's provider_config, the copy of the
// product's an order froze.
var OrderProviderConfigs = SecretConfigTable{
	Page: func(ctx context.Context, db DB, after uuid.UUID, limit int64) ([]SecretConfig, error) {
		rows, err := dbsqlc.New(db).PageOrderProviderConfigs(ctx, dbsqlc.PageOrderProviderConfigsParams{After: after, RowLimit: int32(limit)})
		return convertRows(rows, err, func(r dbsqlc.PageOrderProviderConfigsRow) SecretConfig { return SecretConfig(r) })
	},
	Lock: func(ctx context.Context, db DB, id uuid.UUID) (SecretConfig, error) {
		r, err := dbsqlc.New(db).LockOrderProviderConfig(ctx, id)
		return SecretConfig(r), MapError(err)
	},
	Write: func(ctx context.Context, db DB, id uuid.UUID, config []byte) error {
		return MapError(dbsqlc.New(db).SetOrderProviderConfig(ctx, dbsqlc.SetOrderProviderConfigParams{ID: id, Config: config}))
	},
}

func convertRows[R any](rows []R, err error, conv func(R) SecretConfig) ([]SecretConfig, error) {
	if err != nil {
		return nil, MapError(err)
	}
	out := make([]SecretConfig, len(rows))
	for i, r := range rows {
		out[i] = conv(r)
	}
	return out, nil
}
