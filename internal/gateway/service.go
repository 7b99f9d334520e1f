package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/rustbill/paymentd/internal/apperr"
	"github.com/rustbill/paymentd/internal/audit"
	"github.com/rustbill/paymentd/internal/auth"
	"github.com/rustbill/paymentd/internal/configschema"
	"github.com/rustbill/paymentd/internal/outbound"
	"github.com/rustbill/paymentd/internal/paging"
	"github.com/rustbill/paymentd/internal/plugin"
	"github.com/rustbill/paymentd/internal/secrets"
	"github.com/rustbill/paymentd/internal/store"
	"github.com/rustbill/paymentd/internal/text"
)

// maxAdminPageBytes bounds what admin_page may answer.
const maxAdminPageBytes = 1 << 20

// Service is the admin side of plugins and gateway interfaces, and the
// customers' list of payment methods.
type Service struct {
	db    store.DB
	reg   *Registry
	clock func() time.Time
	log   *slog.Logger
}

// write runs a transaction that changes gateway interfaces or plugins, and
// then makes the registry forget the interfaces it has read, so this
// process sees the change at once (other instances within the registry's
// cache TTL).
func (s *Service) write(ctx context.Context, fn func(tx pgx.Tx) error) error {
	err := store.WithTx(ctx, s.db, fn)
	if s.reg != nil {
		s.reg.Invalidate()
	}
	return err
}

// NewService returns the gateway domain over db and the registry; clock is
// the time source (nil: time.Now).
func NewService(db store.DB, reg *Registry, clock func() time.Time, log *slog.Logger) *Service {
	if clock == nil {
		clock = time.Now
	}
	if log == nil {
		log = slog.Default()
	}
	return &Service{db: db, reg: reg, clock: clock, log: log}
}

func (s *Service) now() time.Time { return s.clock().UTC().Truncate(time.Microsecond) }

// keys is the keyring that seals and opens interface secrets (the
// registry's); nil when none is configured.
func (s *Service) keys() *secrets.Keyring {
	if s.reg == nil {
		return nil
	}
	return s.reg.secrets
}

// ---- plugins ----

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
	rows, err := store.ListPlugins(ctx, s.db, f)
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
	p, err := store.GetPlugin(ctx, db, name)
	if errors.Is(err, store.ErrNotFound) {
		return p, apperr.New(apperr.NotFound, "plugin %q not found", name)
	}
	return p, err
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
// (nil: an empty config) and returns its text (admin).
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
		if config, err = openRaw(s.keys(), gi.ID, gi.Config); err != nil {
			return "", apperr.Wrap(apperr.FailedPrecondition, err, "gateway interface %s cannot be used: its secrets do not decrypt with the keys of [secrets]", gi.ID)
		}
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
		pl, err := store.LockPlugin(ctx, tx, name)
		if errors.Is(err, store.ErrNotFound) {
			return apperr.New(apperr.NotFound, "plugin %q not found", name)
		}
		if err != nil {
			return err
		}
		if pl.Enabled == enabled {
			out = pl
			return nil
		}
		if !enabled && pl.Type != string(plugin.Gateway) {
			return apperr.New(apperr.FailedPrecondition,
				"plugin %q is a %s plugin; only gateway plugins can be disabled (disable a provider's products with UpdateProduct, a notifier in [notify])", pl.Name, pl.Type)
		}
		if out, err = store.SetPluginEnabled(ctx, tx, name, enabled, s.now()); err != nil {
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

// callFailure maps a failed plugin call: an open circuit is Unavailable
// naming the host (docs/decisions.md), a caller that went away keeps its
// context error, anything else is Internal with the cause in the logs.
func callFailure(err error, pluginName, fn string) error {
	var open *outbound.CircuitOpenError
	switch {
	case errors.As(err, &open):
		return apperr.Wrap(apperr.Unavailable, err, "circuit open for host %s; retry after %s", open.Host, open.RetryAt.UTC().Format(time.RFC3339))
	case errors.Is(err, context.Canceled):
		return err
	}
	return apperr.Wrap(apperr.Internal, err, "plugin %q: %s failed", pluginName, fn)
}

// ---- gateway interfaces ----

// InterfaceView is a gateway interface as admins see it: secrets masked.
type InterfaceView struct {
	ID           uuid.UUID
	PluginName   string
	DisplayName  string
	Config       map[string]any
	ConfigSchema map[string]any
	Enabled      bool
	PluginStatus string
	// PluginEnabled is false when an admin disabled the plugin.
	PluginEnabled bool
	CreatedAt     time.Time
	UpdatedAt     time.Time
}

// view masks gi's config with gi's own schema. A schema that no longer
// parses masks every value: a secret must never show because a schema broke.
func (s *Service) view(gi store.GatewayInterface, pluginStatus string, pluginEnabled bool) (InterfaceView, error) {
	cfg, err := decodeConfig(gi.Config)
	if err != nil {
		return InterfaceView{}, apperr.Wrap(apperr.Internal, err, "gateway interface %s: stored config is not a JSON object", gi.ID)
	}
	schemaMap, _ := decodeConfig(gi.ConfigSchema)
	return InterfaceView{
		ID: gi.ID, PluginName: gi.PluginName, DisplayName: gi.DisplayName,
		Config: s.masked(gi, cfg), ConfigSchema: schemaMap, Enabled: gi.Enabled,
		PluginStatus: pluginStatus, PluginEnabled: pluginEnabled, CreatedAt: gi.CreatedAt, UpdatedAt: gi.UpdatedAt,
	}, nil
}

func (s *Service) masked(gi store.GatewayInterface, cfg map[string]any) map[string]any {
	schema, err := configschema.Of(gi.ConfigSchema)
	if err != nil {
		s.log.Error("gateway interface has a config schema that does not parse; every config value is masked", "gateway_interface_id", gi.ID, "err", err)
		out := make(map[string]any, len(cfg))
		for k := range cfg {
			out[k] = configschema.Mask
		}
		return out
	}
	return maskSealed(schema.Mask(cfg))
}

func (s *Service) iface(ctx context.Context, db store.DB, id uuid.UUID) (store.GatewayInterface, error) {
	gi, err := store.GetGatewayInterface(ctx, db, id)
	if errors.Is(err, store.ErrNotFound) {
		return gi, apperr.New(apperr.NotFound, "gateway interface %s not found", id)
	}
	return gi, err
}

// NewInterface is a gateway interface to create.
type NewInterface struct {
	PluginName  string
	DisplayName string
	// Config is the interface's configuration; nil means {}.
	Config map[string]any
}

// CreateInterface configures a new, disabled interface of a loaded gateway
// plugin; the config must satisfy the plugin's config schema, which the
// interface keeps (admin).
func (s *Service) CreateInterface(ctx context.Context, in NewInterface) (InterfaceView, error) {
	p, err := auth.RequireAdmin(ctx)
	if err != nil {
		return InterfaceView{}, err
	}
	display, err := displayName(in.DisplayName)
	if err != nil {
		return InterfaceView{}, err
	}
	cfg := in.Config
	if cfg == nil {
		cfg = map[string]any{}
	}
	var out InterfaceView
	err = s.write(ctx, func(tx pgx.Tx) error {
		// Locked so that an upgrade cannot slip between reading the schema
		// and the insert and leave this interface with the old schema.
		pl, err := store.LockPlugin(ctx, tx, in.PluginName)
		if errors.Is(err, store.ErrNotFound) {
			return apperr.New(apperr.NotFound, "plugin %q not found", in.PluginName)
		}
		if err != nil {
			return err
		}
		if pl.Type != string(plugin.Gateway) {
			return apperr.New(apperr.InvalidArgument, "plugin %q is a %s plugin; only gateway plugins back a gateway interface", pl.Name, pl.Type)
		}
		if pl.Status != store.PluginLoaded || !pl.Enabled {
			return notUsable(pl)
		}
		schema, err := configschema.Of(pl.ConfigSchema)
		if err != nil {
			return apperr.Wrap(apperr.Internal, err, "plugin %q: stored config schema does not parse", pl.Name)
		}
		problems := append(sealedLooking(cfg), schema.MaskSent(cfg)...)
		problems = append(problems, schema.Problems(cfg)...)
		if problems = append(problems, configCurrencyProblems(pl.Info, cfg)...); len(problems) > 0 {
			return apperr.New(apperr.InvalidArgument, "%s", joinProblems(problems))
		}
		id := uuid.New()
		sealed, err := sealConfig(s.keys(), id, schema, cfg)
		if err != nil {
			return err
		}
		raw, err := json.Marshal(sealed)
		if err != nil {
			return apperr.Wrap(apperr.InvalidArgument, err, "config: not representable as JSON")
		}
		gi, err := store.InsertGatewayInterface(ctx, tx, store.NewGatewayInterface{
			ID: id, PluginName: pl.Name, DisplayName: display, Config: raw, ConfigSchema: pl.ConfigSchema, At: s.now(),
		})
		if err != nil {
			return err
		}
		if out, err = s.view(gi, pl.Status, pl.Enabled); err != nil {
			return err
		}
		return audit.Write(ctx, tx, audit.Of(p), gi.CreatedAt, ActionInterfaceCreate, entityInterface, gi.ID.String(), nil, snapshotOf(out))
	})
	return out, err
}

// InterfaceUpdate is what UpdateInterface changes; nil fields stay.
type InterfaceUpdate struct {
	DisplayName *string
	// Config replaces the config. A secret it omits or sends as the mask keeps
	// the stored value.
	Config map[string]any
}

// UpdateInterface renames an interface or replaces its config, which must
// satisfy the interface's schema (admin).
func (s *Service) UpdateInterface(ctx context.Context, id uuid.UUID, u InterfaceUpdate) (InterfaceView, error) {
	p, err := auth.RequireAdmin(ctx)
	if err != nil {
		return InterfaceView{}, err
	}
	var out InterfaceView
	err = s.write(ctx, func(tx pgx.Tx) error {
		gi, err := s.lockIface(ctx, tx, id)
		if err != nil {
			return err
		}
		pl, err := store.GetPlugin(ctx, tx, gi.PluginName)
		if err != nil {
			return err
		}
		before, err := s.view(gi, pl.Status, pl.Enabled)
		if err != nil {
			return err
		}
		display := gi.DisplayName
		if u.DisplayName != nil {
			if display, err = displayName(*u.DisplayName); err != nil {
				return err
			}
		}
		raw := gi.Config
		if u.Config != nil {
			if raw, err = s.updatedConfig(gi, pl, u.Config); err != nil {
				return err
			}
		}
		updated, err := store.UpdateGatewayInterface(ctx, tx, id, display, raw, s.now())
		if err != nil {
			return err
		}
		if out, err = s.view(updated, pl.Status, pl.Enabled); err != nil {
			return err
		}
		return audit.Write(ctx, tx, audit.Of(p), updated.UpdatedAt, ActionInterfaceUpdate, entityInterface, id.String(), snapshotOf(before), snapshotOf(out))
	})
	return out, err
}

// updatedConfig is the stored form of an update's config for gi: the
// stored config opened, incoming merged over it (a secret incoming omits or
// masks keeps its stored value), validated in clear, and its secrets sealed
// again under the current key. A kept secret that does not decrypt is
// refused: the admin sends it again.
func (s *Service) updatedConfig(gi store.GatewayInterface, pl store.Plugin, incoming map[string]any) ([]byte, error) {
	if problems := sealedLooking(incoming); len(problems) > 0 {
		return nil, apperr.New(apperr.InvalidArgument, "%s", joinProblems(problems))
	}
	schema, err := configschema.Of(gi.ConfigSchema)
	if err != nil {
		return nil, apperr.Wrap(apperr.FailedPrecondition, err, "gateway interface %s: its config schema does not parse; reload the plugin", gi.ID)
	}
	stored, err := decodeConfig(gi.Config)
	if err != nil {
		return nil, apperr.Wrap(apperr.Internal, err, "gateway interface %s: stored config is not a JSON object", gi.ID)
	}
	merged, err := s.keys().MergeUpdate(owner(gi.ID), stored, incoming, schema.Merge)
	if err != nil {
		return nil, err
	}
	if problems := append(schema.Problems(merged), configCurrencyProblems(pl.Info, merged)...); len(problems) > 0 {
		return nil, apperr.New(apperr.InvalidArgument, "%s", joinProblems(problems))
	}
	sealed, err := sealConfig(s.keys(), gi.ID, schema, merged)
	if err != nil {
		return nil, err
	}
	raw, err := json.Marshal(sealed)
	if err != nil {
		return nil, apperr.Wrap(apperr.InvalidArgument, err, "config: not representable as JSON")
	}
	return raw, nil
}

// SetInterfaceEnabled enables or disables an interface (admin). Enabling
// needs a loaded plugin, a config that satisfies the interface's schema
// (an upgrade may have made it stale) and some currency it takes. Repeating the current state changes
// nothing.
func (s *Service) SetInterfaceEnabled(ctx context.Context, id uuid.UUID, enabled bool) (InterfaceView, error) {
	p, err := auth.RequireAdmin(ctx)
	if err != nil {
		return InterfaceView{}, err
	}
	var out InterfaceView
	err = s.write(ctx, func(tx pgx.Tx) error {
		gi, err := s.lockIface(ctx, tx, id)
		if err != nil {
			return err
		}
		pl, err := store.GetPlugin(ctx, tx, gi.PluginName)
		if err != nil {
			return err
		}
		before, err := s.view(gi, pl.Status, pl.Enabled)
		if err != nil {
			return err
		}
		if gi.Enabled == enabled {
			out = before
			return nil
		}
		if enabled {
			if pl.Status != store.PluginLoaded || !pl.Enabled {
				return notUsable(pl)
			}
			if pl.Type != string(plugin.Gateway) {
				return apperr.New(apperr.FailedPrecondition, "plugin %q is a %s plugin, not a gateway", pl.Name, pl.Type)
			}
			if err := configSatisfiesSchema(s.keys(), gi); err != nil {
				return err
			}
			if len(s.reg.currenciesOf(pl.Name, gi.Config)) == 0 {
				// Enabled, it would take no payment and stay out of every
				// customer's list: say so rather than enable it silently.
				return apperr.New(apperr.FailedPrecondition, "gateway interface %s takes no currency: plugin %q declares none in info().currencies, or the interface config's currencies names none it takes (docs/plugins.md)", id, pl.Name)
			}
		}
		updated, err := store.SetGatewayInterfaceEnabled(ctx, tx, id, enabled, s.now())
		if err != nil {
			return err
		}
		if out, err = s.view(updated, pl.Status, pl.Enabled); err != nil {
			return err
		}
		action := ActionInterfaceDisable
		if enabled {
			action = ActionInterfaceEnable
		}
		return audit.Write(ctx, tx, audit.Of(p), updated.UpdatedAt, action, entityInterface, id.String(), snapshotOf(before), snapshotOf(out))
	})
	return out, err
}

func configSatisfiesSchema(k *secrets.Keyring, gi store.GatewayInterface) error {
	schema, err := configschema.Of(gi.ConfigSchema)
	if err != nil {
		return apperr.Wrap(apperr.FailedPrecondition, err, "gateway interface %s: its config schema does not parse", gi.ID)
	}
	cfg, err := decodeConfig(gi.Config)
	if err != nil {
		return apperr.Wrap(apperr.Internal, err, "gateway interface %s: stored config is not a JSON object", gi.ID)
	}
	if cfg, err = openConfig(k, gi.ID, cfg); err != nil {
		return apperr.Wrap(apperr.FailedPrecondition, err, "gateway interface %s cannot be enabled: its secrets do not decrypt with the keys of [secrets]; send them again (UpdateGatewayInterface)", gi.ID)
	}
	if problems := schema.Problems(cfg); len(problems) > 0 {
		return apperr.New(apperr.FailedPrecondition, "the config does not satisfy the interface's schema; update it first: %s", joinProblems(problems))
	}
	return nil
}

func (s *Service) lockIface(ctx context.Context, tx pgx.Tx, id uuid.UUID) (store.GatewayInterface, error) {
	gi, err := store.LockGatewayInterface(ctx, tx, id)
	if errors.Is(err, store.ErrNotFound) {
		return gi, apperr.New(apperr.NotFound, "gateway interface %s not found", id)
	}
	return gi, err
}

// GetInterface reads one interface, secrets masked (admin).
func (s *Service) GetInterface(ctx context.Context, id uuid.UUID) (InterfaceView, error) {
	if _, err := auth.RequireAdmin(ctx); err != nil {
		return InterfaceView{}, err
	}
	v, err := store.GetGatewayInterfaceView(ctx, s.db, id)
	if errors.Is(err, store.ErrNotFound) {
		return InterfaceView{}, apperr.New(apperr.NotFound, "gateway interface %s not found", id)
	}
	if err != nil {
		return InterfaceView{}, err
	}
	return s.view(v.GatewayInterface, v.PluginStatus, v.PluginEnabled)
}

// ListInterfaces pages through interfaces, newest first (admin).
func (s *Service) ListInterfaces(ctx context.Context, f store.GatewayInterfaceFilter, page, size uint32) ([]InterfaceView, paging.Page, error) {
	if _, err := auth.RequireAdmin(ctx); err != nil {
		return nil, paging.Page{}, err
	}
	pg, err := paging.Normalize(page, size)
	if err != nil {
		return nil, paging.Page{}, err
	}
	rows, total, err := store.ListGatewayInterfaces(ctx, s.db, f, pg.Limit(), pg.Offset())
	if err != nil {
		return nil, paging.Page{}, err
	}
	out := make([]InterfaceView, 0, len(rows))
	for _, r := range rows {
		v, err := s.view(r.GatewayInterface, r.PluginStatus, r.PluginEnabled)
		if err != nil {
			return nil, paging.Page{}, err
		}
		out = append(out, v)
	}
	return out, pg.WithTotal(total), nil
}

// TestResult is what test_config answered.
type TestResult struct {
	OK      bool
	Message string
}

// TestInterface runs the plugin's test_config with the interface's config
// (admin). A failing script is a failed test, with the plugin's message for
// the admin; an open circuit is Unavailable.
func (s *Service) TestInterface(ctx context.Context, id uuid.UUID) (TestResult, error) {
	if _, err := auth.RequireAdmin(ctx); err != nil {
		return TestResult{}, err
	}
	gw, err := s.reg.Get(ctx, id)
	if err != nil {
		return TestResult{}, err
	}
	if gw.Plugin == nil {
		pl, err := s.plugin(ctx, s.db, gw.PluginName)
		if err != nil {
			return TestResult{}, err
		}
		return TestResult{}, notLoaded(pl)
	}
	out, err := gw.Plugin.Call(ctx, "test_config", gw.ConfigJSON, "{}")
	if err != nil {
		var ce *plugin.CallError
		if errors.As(err, &ce) && !errors.Is(err, outbound.ErrCircuitOpen) && !errors.Is(err, context.Canceled) {
			return TestResult{OK: false, Message: fmt.Sprintf("test_config failed (%s): %s", ce.Kind, text.Clip(ce.Message, 500))}, nil
		}
		return TestResult{}, callFailure(err, gw.PluginName, "test_config")
	}
	var res struct {
		OK      *bool  `json:"ok"`
		Message string `json:"message"`
	}
	if err := json.Unmarshal([]byte(out), &res); err != nil || res.OK == nil {
		return TestResult{OK: false, Message: "test_config did not answer {\"ok\": bool, \"message\"}"}, nil
	}
	return TestResult{OK: *res.OK, Message: res.Message}, nil
}

// ---- payment methods ----

// PaymentMethod is a gateway interface a customer may pay with.
type PaymentMethod struct {
	ID          uuid.UUID
	DisplayName string
	PluginName  string
	// Currencies it takes, sorted: what CreatePayment checks (Registry.Get).
	Currencies []string
}

// PaymentMethods lists the enabled interfaces of enabled gateway plugins
// loaded here that take some currency — only currency when it is not ""
// (any authenticated caller). An interface whose plugin declares no
// currency is left out: CreatePayment would refuse it for every order.
func (s *Service) PaymentMethods(ctx context.Context, currency string) ([]PaymentMethod, error) {
	if _, err := auth.Require(ctx); err != nil {
		return nil, err
	}
	rows, err := store.ListPaymentMethods(ctx, s.db)
	if err != nil {
		return nil, err
	}
	out := make([]PaymentMethod, 0, len(rows))
	for _, r := range rows {
		takes := s.reg.currenciesOf(r.PluginName, r.Config)
		if len(takes) == 0 || (currency != "" && !slices.Contains(takes, currency)) {
			continue
		}
		out = append(out, PaymentMethod{ID: r.ID, DisplayName: r.DisplayName, PluginName: r.PluginName, Currencies: takes})
	}
	return out, nil
}

// ---- helpers ----

func displayName(s string) (string, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return "", apperr.New(apperr.InvalidArgument, "display_name must not be empty")
	}
	if utf8.RuneCountInString(s) > 200 {
		return "", apperr.New(apperr.InvalidArgument, "display_name must be at most 200 characters")
	}
	return s, nil
}

// decodeConfig decodes a JSON object (a config, a schema, info). Numbers
// stay json.Number, so a stored config is written back digit for digit.
func joinProblems(p []string) string { return strings.Join(p, "; ") }

func snapshotOf(v InterfaceView) interfaceState {
	return interfaceState{ID: v.ID, PluginName: v.PluginName, DisplayName: v.DisplayName, Enabled: v.Enabled, Config: v.Config}
}
