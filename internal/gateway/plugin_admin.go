package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"unicode/utf8"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/rustbill/paymentd/internal/apperr"
	"github.com/rustbill/paymentd/internal/audit"
	"github.com/rustbill/paymentd/internal/auth"
	"github.com/rustbill/paymentd/internal/plugin"
	"github.com/rustbill/paymentd/internal/store"
)

// maxAdminPageBytes bounds what admin_page may answer.
const maxAdminPageBytes = 1 << 20

// PluginView is a plugin row and what this process runs of it.
type PluginView struct {
	store.Plugin
	Info         map[string]any
	ConfigSchema map[string]any
	// Loaded is nil when this process runs no code of the plugin.
	Loaded *LoadedPlugin
}

func (s *Service) pluginView(p store.Plugin) PluginView {
	v := PluginView{Plugin: p}
	v.Info, _ = decodeConfig(p.Info)
	v.ConfigSchema, _ = decodeConfig(p.ConfigSchema)
	if l, ok := s.reg.Loaded(p.Name); ok {
		v.Loaded = &l
	}
	return v
}

// ListPlugins lists plugins by name (admin).
func (s *Service) ListPlugins(ctx context.Context, f store.PluginFilter) ([]PluginView, error) {
	if _, err := auth.RequireAdmin(ctx); err != nil {
		return nil, err
	}
	rows, err := store.Q(s.db).ListPlugins(ctx, f)
	if err != nil {
		return nil, err
	}
	out := make([]PluginView, len(rows))
	for i, p := range rows {
		out[i] = s.pluginView(p)
	}
	return out, nil
}

// GetPlugin reads one plugin (admin).
func (s *Service) GetPlugin(ctx context.Context, name string) (PluginView, error) {
	if _, err := auth.RequireAdmin(ctx); err != nil {
		return PluginView{}, err
	}
	p, err := s.plugin(ctx, s.db, name)
	if err != nil {
		return PluginView{}, err
	}
	return s.pluginView(p), nil
}

func (s *Service) plugin(ctx context.Context, db store.DB, name string) (store.Plugin, error) {
	p, err := store.Q(db).GetPlugin(ctx, name)
	return p, store.NotFound(err, "plugin %q not found", name)
}

// Reload scans the plugin directory now (admin) and records that it was
// asked for; the scan records each plugin it changes.
func (s *Service) Reload(ctx context.Context) (Report, error) {
	p, err := auth.RequireAdmin(ctx)
	if err != nil {
		return Report{}, err
	}
	by := audit.Of(p)
	rep, scanErr := s.reg.scan(ctx, by)
	if errors.Is(scanErr, ErrPluginDir) {
		return Report{}, apperr.Wrap(apperr.FailedPrecondition, scanErr, "the plugin directory [plugins].dir cannot be read; nothing changed")
	}
	state := reloadState{Files: rep.Files, Changes: []string{}, Warnings: len(rep.Warnings)}
	for _, c := range rep.Changes {
		state.Changes = append(state.Changes, c.Name+": "+c.Kind)
	}
	if err := audit.Write(ctx, s.db, by, s.now(), ActionPluginReload, entityPluginDir, s.reg.Dir(), nil, state); err != nil {
		return Report{}, err
	}
	if scanErr != nil {
		// Some plugins could not be recorded; the report says which.
		s.log.ErrorContext(ctx, "plugin reload finished with errors", "err", scanErr)
	}
	return rep, nil
}

// AdminPage runs the plugin's admin_page with the config of interfaceID
// (nil: an empty config), its secrets masked, and returns its text (admin;
// an API key of scope read may ask).
func (s *Service) AdminPage(ctx context.Context, name string, interfaceID *uuid.UUID) (string, error) {
	if _, err := auth.RequireAdmin(ctx); err != nil {
		return "", err
	}
	row, err := s.plugin(ctx, s.db, name)
	if err != nil {
		return "", err
	}
	l := s.reg.lookup(name)
	if l == nil {
		return "", notLoaded(row)
	}
	if !l.script.HasAdminPage() {
		return "", apperr.New(apperr.NotFound, "plugin %q has no admin page", name)
	}
	config, input := "{}", "{}"
	if interfaceID != nil {
		gi, err := s.iface(ctx, s.db, *interfaceID)
		if err != nil {
			return "", err
		}
		if gi.PluginName != name {
			return "", apperr.New(apperr.InvalidArgument, "gateway interface %s belongs to plugin %q, not %q", gi.ID, gi.PluginName, name)
		}
		// The page gets the config as a read shows it, secrets masked: it is
		// a read (an API key of scope read may ask for it), and what the
		// page prints is shown to whoever asked.
		cfg, err := decodeConfig(gi.Config)
		if err != nil {
			return "", apperr.Wrap(apperr.Internal, err, "gateway interface %s: stored config is not a JSON object", gi.ID)
		}
		masked, err := json.Marshal(s.masked(gi, cfg))
		if err != nil {
			return "", apperr.Wrap(apperr.Internal, err, "gateway interface %s: config not representable as JSON", gi.ID)
		}
		config = string(masked)
		in, _ := json.Marshal(map[string]string{"gateway_interface_id": gi.ID.String()})
		input = string(in)
	}
	out, err := l.caller.Call(ctx, plugin.AdminPage, config, input)
	if err != nil {
		return "", callFailure(err, name, plugin.AdminPage)
	}
	if len(out) > maxAdminPageBytes {
		return "", apperr.New(apperr.Internal, "admin_page of plugin %q answered more than %d bytes", name, maxAdminPageBytes)
	}
	if !utf8.ValidString(out) {
		return "", apperr.New(apperr.Internal, "admin_page of plugin %q answered text that is not UTF-8", name)
	}
	return out, nil
}

// SetPluginEnabled records an admin's choice to enable or disable a plugin
// (admin), with an audit row. Only gateway plugins can be disabled: a
// notifier is switched off in [notify] and a provider's products are
// disabled one by one (UpdateProduct), since a disabled provider would
// refund every order paid for it. Disabling keeps the plugin loaded and
// its interfaces' own enabled flags untouched (see doc.go). Repeating the
// current state changes nothing and writes no audit row.
func (s *Service) SetPluginEnabled(ctx context.Context, name string, enabled bool) (PluginView, error) {
	p, err := auth.RequireAdmin(ctx)
	if err != nil {
		return PluginView{}, err
	}
	var out store.Plugin
	var changed bool
	err = s.write(ctx, func(tx pgx.Tx) error {
		changed = false
		// The row lock orders this after a scan deciding about the plugin
		// (and a scan after it); scans never write enabled.
		pl, err := store.Q(tx).LockPlugin(ctx, name)
		if err != nil {
			return store.NotFound(err, "plugin %q not found", name)
		}
		if pl.Enabled == enabled {
			out = pl
			return nil
		}
		if !enabled && pl.Type != string(plugin.Gateway) {
			return apperr.New(apperr.FailedPrecondition,
				"plugin %q is a %s plugin; only gateway plugins can be disabled (disable a provider's products with UpdateProduct, a notifier in [notify])", pl.Name, pl.Type)
		}
		if out, err = store.Q(tx).SetPluginEnabled(ctx, store.SetPluginEnabledParams{
			Enabled: enabled, Now: s.now(), Name: name,
		}); err != nil {
			return err
		}
		changed = true
		action := ActionPluginDisable
		if enabled {
			action = ActionPluginEnable
		}
		return audit.Write(ctx, tx, audit.Of(p), out.UpdatedAt, action, entityPlugin, name, pluginSnapshot(pl), pluginSnapshot(out))
	})
	if err != nil {
		return PluginView{}, err
	}
	if changed {
		msg := "plugin disabled by an admin: its interfaces take no new payments"
		if enabled {
			msg = "plugin enabled by an admin"
		}
		s.log.InfoContext(ctx, msg, "plugin", name, "principal", p.String())
	}
	return s.pluginView(out), nil
}

// notUsable explains why plugin p cannot back a new or re-enabled gateway
// interface: an admin disabled it, or the scanner did not load it.
func notUsable(p store.Plugin) error {
	if !p.Enabled {
		return apperr.New(apperr.FailedPrecondition, "plugin %q is disabled; enable the plugin first", p.Name)
	}
	return notLoaded(p)
}

func notLoaded(p store.Plugin) error {
	if p.LastError != "" && p.Status != store.PluginLoaded {
		return apperr.New(apperr.FailedPrecondition, "plugin %q is not loaded (status %s: %s)", p.Name, p.Status, p.LastError)
	}
	return apperr.New(apperr.FailedPrecondition, "plugin %q is not loaded (status %s)", p.Name, p.Status)
}
