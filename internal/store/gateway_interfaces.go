package store

import (
	"context"
	"time"

	"github.com/google/uuid"

	"github.com/rustbill/paymentd/internal/store/dbsqlc"
)

// The parameters of the queries run through Q.
type (
	SetGatewayInterfaceEnabledParams = dbsqlc.SetGatewayInterfaceEnabledParams
)

// GatewayInterface is a gateway_interfaces row. Config holds merchant
// secrets: it goes to the plugin, and anywhere else only masked.
type GatewayInterface = dbsqlc.GatewayInterface

// GatewayInterfaceView is an interface with its plugin's scanner status and
// whether an admin left the plugin enabled.
type GatewayInterfaceView struct {
	GatewayInterface
	PluginStatus  string
	PluginEnabled bool
}

// PaymentMethod is an interface a customer may pay with.
type PaymentMethod = dbsqlc.ListPaymentMethodsRow

// GatewayInterfaceFilter selects interfaces; nil fields do not filter.
type GatewayInterfaceFilter struct {
	PluginName *string
	Enabled    *bool
}

// NewGatewayInterface is an interface to create (disabled).
type NewGatewayInterface struct {
	// ID is chosen by the caller: encrypted secrets in Config are bound
	// to it.
	ID           uuid.UUID
	PluginName   string
	DisplayName  string
	Config       []byte
	ConfigSchema []byte
	At           time.Time
}

// InsertGatewayInterface creates a disabled interface.
func InsertGatewayInterface(ctx context.Context, db DB, n NewGatewayInterface) (GatewayInterface, error) {
	row, err := dbsqlc.New(db).InsertGatewayInterface(ctx, dbsqlc.InsertGatewayInterfaceParams{
		ID: n.ID, PluginName: n.PluginName, DisplayName: n.DisplayName,
		Config: jsonOrEmpty(n.Config), ConfigSchema: jsonOrEmpty(n.ConfigSchema), Now: n.At,
	})
	return row, MapError(err)
}

// GetGatewayInterfaceView reads one interface with its plugin's status and
// enabled flag.
func GetGatewayInterfaceView(ctx context.Context, db DB, id uuid.UUID) (GatewayInterfaceView, error) {
	row, err := dbsqlc.New(db).GetGatewayInterfaceView(ctx, id)
	return GatewayInterfaceView{GatewayInterface: row.GatewayInterface, PluginStatus: row.PluginStatus, PluginEnabled: row.PluginEnabled}, MapError(err)
}

// UpdateGatewayInterface sets the display name and the config.
func UpdateGatewayInterface(ctx context.Context, db DB, id uuid.UUID, displayName string, config []byte, at time.Time) (GatewayInterface, error) {
	row, err := dbsqlc.New(db).UpdateGatewayInterface(ctx, dbsqlc.UpdateGatewayInterfaceParams{
		DisplayName: displayName, Config: jsonOrEmpty(config), Now: at, ID: id,
	})
	return row, MapError(err)
}

// SetGatewayInterfaceConfig replaces an interface's config without
// touching updated_at (its secrets re-encrypted, not an admin's change).
func SetGatewayInterfaceConfig(ctx context.Context, db DB, id uuid.UUID, config []byte) error {
	return MapError(dbsqlc.New(db).SetGatewayInterfaceConfig(ctx, dbsqlc.SetGatewayInterfaceConfigParams{Config: jsonOrEmpty(config), ID: id}))
}

// ListGatewayInterfaces returns one page of interfaces, newest first, and the
// number matching f.
func ListGatewayInterfaces(ctx context.Context, db DB, f GatewayInterfaceFilter, limit, offset int64) ([]GatewayInterfaceView, int64, error) {
	q := dbsqlc.New(db)
	rows, total, err := countThenList(func() (int64, error) {
		return q.CountGatewayInterfaces(ctx, dbsqlc.CountGatewayInterfacesParams{PluginName: f.PluginName, Enabled: f.Enabled})
	}, offset, func() ([]dbsqlc.ListGatewayInterfaceViewsRow, error) {
		return q.ListGatewayInterfaceViews(ctx, dbsqlc.ListGatewayInterfaceViewsParams{
			PluginName: f.PluginName, Enabled: f.Enabled, RowLimit: limit, RowOffset: offset,
		})
	})
	if err != nil {
		return nil, 0, err
	}
	out := make([]GatewayInterfaceView, len(rows))
	for i, r := range rows {
		out[i] = GatewayInterfaceView{GatewayInterface: r.GatewayInterface, PluginStatus: r.PluginStatus, PluginEnabled: r.PluginEnabled}
	}
	return out, total, nil
}

// SetPluginInterfaceSchemas gives every interface of plugin the config schema
// and returns how many it changed.
func SetPluginInterfaceSchemas(ctx context.Context, db DB, plugin string, schema []byte, at time.Time) (int64, error) {
	n, err := dbsqlc.New(db).SetPluginInterfaceSchemas(ctx, dbsqlc.SetPluginInterfaceSchemasParams{
		ConfigSchema: jsonOrEmpty(schema), Now: at, PluginName: plugin,
	})
	return n, MapError(err)
}
