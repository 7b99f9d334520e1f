package gateway

import (
	"context"
	"encoding/json"
	"time"

	"github.com/google/uuid"

	"github.com/rustbill/paymentd/internal/auth"
	"github.com/rustbill/paymentd/internal/store"
)

// Audit actions written by this package (audit_log.action).
const (
	ActionInterfaceCreate  = "gateway_interface.create"
	ActionInterfaceUpdate  = "gateway_interface.update"
	ActionInterfaceEnable  = "gateway_interface.enable"
	ActionInterfaceDisable = "gateway_interface.disable"
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

// actor is who a change is recorded under.
type actor struct{ kind, id string }

// scannerActor is the periodic scan (and the one at start).
var scannerActor = actor{kind: store.ActorSystem, id: "plugin-scanner"}

// actorOf names the principal in the audit log, as the order domain does.
func actorOf(p auth.Principal) actor {
	switch {
	case p.IsAdmin():
		return actor{store.ActorAdmin, p.ID.String()}
	case p.Kind == auth.KindAPIKey && p.CredentialID != "":
		return actor{store.ActorAPIKey, p.CredentialID}
	default:
		return actor{store.ActorCustomer, p.ID.String()}
	}
}

// writeAudit appends one audit_log row; before and after are snapshots
// below, which never hold a secret (interface configs are masked).
func writeAudit(ctx context.Context, db store.DB, a actor, at time.Time, action, entityType, entityID string, before, after any) error {
	b, err := jsonOrNil(before)
	if err != nil {
		return err
	}
	af, err := jsonOrNil(after)
	if err != nil {
		return err
	}
	return store.AppendAudit(ctx, db, store.AuditRecord{
		ActorKind: a.kind, ActorID: a.id, Action: action,
		EntityType: entityType, EntityID: entityID,
		Before: b, After: af, At: at,
	})
}

func jsonOrNil(v any) ([]byte, error) {
	if v == nil {
		return nil, nil
	}
	return json.Marshal(v)
}

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
}

type reloadState struct {
	Files    int      `json:"files"`
	Changes  []string `json:"changes"`
	Warnings int      `json:"warnings"`
}
