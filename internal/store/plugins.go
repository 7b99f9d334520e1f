package store

import (
	"context"
	"time"

	"github.com/rustbill/paymentd/internal/store/dbsqlc"
)

// Plugin is a plugins row.
type Plugin = dbsqlc.Plugin

// Plugin statuses (plugins_status_check): the scanner's view of the file.
const (
	PluginLoaded  = "loaded"
	PluginError   = "error"
	PluginMissing = "missing"
)

// PluginFilter selects plugins; nil fields do not filter.
type PluginFilter struct {
	Type   *string
	Status *string
}

// ListPlugins returns the plugins matching f by name.
func ListPlugins(ctx context.Context, db DB, f PluginFilter) ([]Plugin, error) {
	rows, err := dbsqlc.New(db).ListPlugins(ctx, dbsqlc.ListPluginsParams{Type: f.Type, Status: f.Status})
	return rows, MapError(err)
}

// GetPlugin reads one plugin; ErrNotFound when there is none.
func GetPlugin(ctx context.Context, db DB, name string) (Plugin, error) {
	p, err := dbsqlc.New(db).GetPlugin(ctx, name)
	return p, MapError(err)
}

// LockPlugin reads one plugin FOR UPDATE; ErrNotFound when there is none.
func LockPlugin(ctx context.Context, db DB, name string) (Plugin, error) {
	p, err := dbsqlc.New(db).LockPlugin(ctx, name)
	return p, MapError(err)
}

// NewPlugin is a plugin seen for the first time.
type NewPlugin struct {
	Name         string
	Type         string
	Version      string
	Path         string
	Source       string
	SHA256       string
	Status       string
	LastError    string
	Info         []byte
	ConfigSchema []byte
	At           time.Time
}

// InsertPlugin adds p; ErrNotFound when a row of that name exists already
// (another instance was first), which the caller then locks.
func InsertPlugin(ctx context.Context, db DB, p NewPlugin) (Plugin, error) {
	row, err := dbsqlc.New(db).InsertPlugin(ctx, dbsqlc.InsertPluginParams{
		Name: p.Name, Type: p.Type, Version: p.Version, Path: p.Path, Source: p.Source,
		Sha256: p.SHA256, Status: p.Status, LastError: p.LastError,
		Info: jsonOrEmpty(p.Info), ConfigSchema: jsonOrEmpty(p.ConfigSchema), Now: p.At,
	})
	return row, MapError(err)
}

// PluginDefinition is what a file of a greater version replaces.
type PluginDefinition struct {
	Name         string
	Type         string
	Version      string
	Path         string
	Source       string
	SHA256       string
	Info         []byte
	ConfigSchema []byte
	At           time.Time
}

// UpdatePluginDefinition replaces the plugin's whole definition and marks it
// loaded.
func UpdatePluginDefinition(ctx context.Context, db DB, d PluginDefinition) (Plugin, error) {
	row, err := dbsqlc.New(db).UpdatePluginDefinition(ctx, dbsqlc.UpdatePluginDefinitionParams{
		Type: d.Type, Version: d.Version, Path: d.Path, Source: d.Source, Sha256: d.SHA256,
		Info: jsonOrEmpty(d.Info), ConfigSchema: jsonOrEmpty(d.ConfigSchema), Now: d.At, Name: d.Name,
	})
	return row, MapError(err)
}

// UpdatePluginSource replaces only the stored source, its hash and path, and
// marks the plugin loaded; version, info and config schema stay.
func UpdatePluginSource(ctx context.Context, db DB, name, path, source, sha256 string, at time.Time) (Plugin, error) {
	row, err := dbsqlc.New(db).UpdatePluginSource(ctx, dbsqlc.UpdatePluginSourceParams{
		Path: path, Source: source, Sha256: sha256, Now: at, Name: name,
	})
	return row, MapError(err)
}

// SetPluginStatus records status (error or missing) and its message.
func SetPluginStatus(ctx context.Context, db DB, name, status, lastError string, at time.Time) (Plugin, error) {
	row, err := dbsqlc.New(db).SetPluginStatus(ctx, dbsqlc.SetPluginStatusParams{
		Status: status, LastError: lastError, Now: at, Name: name,
	})
	return row, MapError(err)
}

// SetPluginEnabled records an admin's choice to enable or disable a plugin;
// ErrNotFound when there is no such plugin.
func SetPluginEnabled(ctx context.Context, db DB, name string, enabled bool, at time.Time) (Plugin, error) {
	row, err := dbsqlc.New(db).SetPluginEnabled(ctx, dbsqlc.SetPluginEnabledParams{
		Enabled: enabled, Now: at, Name: name,
	})
	return row, MapError(err)
}

// SetPluginCallError records the last failed call of a loaded plugin whose
// stored hash is sha256; false when the row describes other code by now.
func SetPluginCallError(ctx context.Context, db DB, name, sha256, lastError string, at time.Time) (bool, error) {
	n, err := dbsqlc.New(db).SetPluginCallError(ctx, dbsqlc.SetPluginCallErrorParams{
		LastError: lastError, Now: at, Name: name, Sha256: sha256,
	})
	return n > 0, MapError(err)
}

// jsonOrEmpty is b, or the empty object for a column that is NOT NULL jsonb.
func jsonOrEmpty(b []byte) []byte {
	if len(b) == 0 {
		return []byte("{}")
	}
	return b
}
