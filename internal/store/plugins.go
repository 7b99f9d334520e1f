package store

import (
	"context"
	"time"

	"github.com/rustbill/paymentd/internal/store/dbsqlc"
)

// The parameters of the queries run through Q.
type (
	ListPluginsParams        = dbsqlc.ListPluginsParams
	SetPluginEnabledParams   = dbsqlc.SetPluginEnabledParams
	SetPluginStatusParams    = dbsqlc.SetPluginStatusParams
	UpdatePluginSourceParams = dbsqlc.UpdatePluginSourceParams
)

// Plugin is a plugins row.
type Plugin = dbsqlc.Plugin

// Plugin statuses (plugins_status_check): the scanner's view of the file.
const (
	PluginLoaded  = "loaded"
	PluginError   = "error"
	PluginMissing = "missing"
)

// PluginFilter selects plugins (ListPlugins); nil fields do not filter.
type PluginFilter = ListPluginsParams

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
