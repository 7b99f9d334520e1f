package gateway

import (
	"github.com/google/uuid"

	"github.com/rustbill/paymentd/internal/audit"
	"github.com/rustbill/paymentd/internal/store"
)

// Audit actions written by this package (audit_log.action).
const (
	ActionInterfaceCreate  = "gateway_interface.create"
	ActionInterfaceUpdate  = "gateway_interface.update"
	ActionInterfaceEnable  = "gateway_interface.enable"
	ActionInterfaceDisable = "gateway_interface.disable"
	ActionInterfaceTest    = "gateway_interface.test"
	ActionPluginReload     = "plugin.reload"
	ActionPluginEnable     = "plugin.enable"
	ActionPluginDisable    = "plugin.disable"
	ActionPluginAdd        = "plugin.add"
	ActionPluginUpgrade    = "plugin.upgrade"
	ActionPluginSource     = "plugin.source_update"
	ActionPluginRecover    = "plugin.recover"
	ActionPluginError      = "plugin.error"
	ActionPluginMissing    = "plugin.missing"
)

// Entity types (audit_log.entity_type).
const (
	entityPlugin    = "plugin"
	entityInterface = "gateway_interface"
	entityPluginDir = "plugin_directory"
)

func actionOf(change string) string {
	switch change {
	case ChangeAdded:
		return ActionPluginAdd
	case ChangeUpgraded:
		return ActionPluginUpgrade
	case ChangeSourceUpdated:
		return ActionPluginSource
	case ChangeRecovered:
		return ActionPluginRecover
	case ChangeMissing:
		return ActionPluginMissing
	}
	return ActionPluginError
}

// scannerActor is the periodic scan (and the one at start).
var scannerActor = audit.System("plugin-scanner")

type pluginState struct {
	Name      string `json:"name"`
	Type      string `json:"type"`
	Version   string `json:"version"`
	Path      string `json:"path"`
	SHA256    string `json:"sha256"`
	Status    string `json:"status"`
	Enabled   bool   `json:"enabled"`
	LastError string `json:"last_error,omitempty"`
}

func pluginSnapshot(p store.Plugin) pluginState {
	return pluginState{Name: p.Name, Type: p.Type, Version: p.Version, Path: p.Path, SHA256: p.Sha256, Status: p.Status, Enabled: p.Enabled, LastError: p.LastError}
}

type interfaceState struct {
	ID          uuid.UUID      `json:"id"`
	PluginName  string         `json:"plugin_name"`
	DisplayName string         `json:"display_name"`
	Enabled     bool           `json:"enabled"`
	Config      map[string]any `json:"config"` // masked
	// An update's row names, in its after state, the endpoints it changed
	// ("x-endpoint") and the secrets it replaced: both configs are masked,
	// so a new secret would not show otherwise. Names only, never values.
	EndpointsChanged []string `json:"endpoints_changed,omitempty"`
	SecretsReplaced  []string `json:"secrets_replaced,omitempty"`
}

// testState is a TestGatewayInterface's row: the outcome as answered (no
// quote of an upstream's answer), whether a quote was cut, and the hosts
// the plugin sent the interface's config to.
type testState struct {
	OK       bool     `json:"ok"`
	Message  string   `json:"message"`
	Withheld bool     `json:"withheld,omitempty"`
	Hosts    []string `json:"hosts"`
}

type reloadState struct {
	Files    int      `json:"files"`
	Changes  []string `json:"changes"`
	Warnings int      `json:"warnings"`
}
