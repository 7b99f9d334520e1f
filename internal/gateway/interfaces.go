package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
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
	"github.com/rustbill/paymentd/internal/payment"
	"github.com/rustbill/paymentd/internal/plugin"
	"github.com/rustbill/paymentd/internal/secrets"
	"github.com/rustbill/paymentd/internal/store"
	"github.com/rustbill/paymentd/internal/text"
)

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
	gi, err := store.Q(db).GetGatewayInterface(ctx, id)
	return gi, store.NotFound(err, "gateway interface %s not found", id)
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
		pl, err := store.Q(tx).LockPlugin(ctx, in.PluginName)
		if err != nil {
			return store.NotFound(err, "plugin %q not found", in.PluginName)
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
		gi, pl, before, err := s.lockIface(ctx, tx, id)
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
		var change configChange
		if u.Config != nil {
			if raw, change, err = s.updatedConfig(gi, pl, u.Config); err != nil {
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
		// The config is masked in both snapshots, so a replaced secret would
		// not show; the row names it (and a changed endpoint) itself.
		after := snapshotOf(out)
		after.EndpointsChanged, after.SecretsReplaced = change.endpoints, change.secrets
		return audit.Write(ctx, tx, audit.Of(p), updated.UpdatedAt, ActionInterfaceUpdate, entityInterface, id.String(), snapshotOf(before), after)
	})
	return out, err
}

// configChange is what an update's audit row names beside the masked
// configs: the endpoints it changed and the secrets it replaced.
type configChange struct {
	endpoints, secrets []string
}

// updatedConfig is the stored form of an update's config for gi: the
// stored config opened, incoming merged over it (a secret incoming omits or
// masks keeps its stored value), validated in clear, and its secrets sealed
// again under the current key. A kept secret that does not decrypt is
// refused: the admin sends it again. So is a kept secret when the update
// changes an endpoint ("x-endpoint"): the stored secrets would go to it.
func (s *Service) updatedConfig(gi store.GatewayInterface, pl store.Plugin, incoming map[string]any) ([]byte, configChange, error) {
	if problems := sealedLooking(incoming); len(problems) > 0 {
		return nil, configChange{}, apperr.New(apperr.InvalidArgument, "%s", joinProblems(problems))
	}
	schema, err := configschema.Of(gi.ConfigSchema)
	if err != nil {
		return nil, configChange{}, apperr.Wrap(apperr.FailedPrecondition, err, "gateway interface %s: its config schema does not parse; reload the plugin", gi.ID)
	}
	stored, err := decodeConfig(gi.Config)
	if err != nil {
		return nil, configChange{}, apperr.Wrap(apperr.Internal, err, "gateway interface %s: stored config is not a JSON object", gi.ID)
	}
	merged, err := s.keys().MergeUpdate(owner(gi.ID), stored, incoming, schema.Merge)
	if err != nil {
		return nil, configChange{}, err
	}
	if problems := append(schema.Problems(merged), configCurrencyProblems(pl.Info, merged)...); len(problems) > 0 {
		return nil, configChange{}, apperr.New(apperr.InvalidArgument, "%s", joinProblems(problems))
	}
	sealed, err := sealConfig(s.keys(), gi.ID, schema, merged)
	if err != nil {
		return nil, configChange{}, err
	}
	raw, err := json.Marshal(sealed)
	if err != nil {
		return nil, configChange{}, apperr.Wrap(apperr.InvalidArgument, err, "config: not representable as JSON")
	}
	opened, _ := s.keys().OpenConfigLenient(owner(gi.ID), stored) // an endpoint may be secret too
	change := configChange{endpoints: schema.ChangedEndpoints(opened, merged), secrets: schema.SecretsSent(incoming)}
	return raw, change, nil
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
		gi, pl, before, err := s.lockIface(ctx, tx, id)
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
		updated, err := store.Q(tx).SetGatewayInterfaceEnabled(ctx, store.SetGatewayInterfaceEnabledParams{
			Enabled: enabled, Now: s.now(), ID: id,
		})
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

// lockIface locks interface id for a change and reads its plugin; before
// is the interface as it is, for the change's audit row.
func (s *Service) lockIface(ctx context.Context, tx pgx.Tx, id uuid.UUID) (gi store.GatewayInterface, pl store.Plugin, before InterfaceView, err error) {
	if gi, err = store.Q(tx).LockGatewayInterface(ctx, id); err != nil {
		return gi, pl, before, store.NotFound(err, "gateway interface %s not found", id)
	}
	if pl, err = store.Q(tx).GetPlugin(ctx, gi.PluginName); err != nil {
		return gi, pl, before, err
	}
	before, err = s.view(gi, pl.Status, pl.Enabled)
	return gi, pl, before, err
}

// GetInterface reads one interface, secrets masked (admin).
func (s *Service) GetInterface(ctx context.Context, id uuid.UUID) (InterfaceView, error) {
	if _, err := auth.RequireAdmin(ctx); err != nil {
		return InterfaceView{}, err
	}
	v, err := store.GetGatewayInterfaceView(ctx, s.db, id)
	if err != nil {
		return InterfaceView{}, store.NotFound(err, "gateway interface %s not found", id)
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

// maxTestMessage bounds the message of a test (runes).
const maxTestMessage = 500

// TestInterface runs the plugin's test_config with the interface's config
// (admin). A failing script is a failed test, with the plugin's message for
// the admin; an open circuit is Unavailable.
//
// The message never quotes what the upstream answered (plugin.Upstream):
// an admin may point the interface at any URL, and the test must not read
// other services' pages (the service's own metrics, a cloud's metadata)
// for them. Every test is audit-logged with its outcome and the hosts the
// config was sent to.
func (s *Service) TestInterface(ctx context.Context, id uuid.UUID) (TestResult, error) {
	p, err := auth.RequireAdmin(ctx)
	if err != nil {
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
	callCtx, upstream := plugin.WithUpstream(ctx)
	res, callErr := s.runTest(callCtx, gw)
	state := testState{OK: res.OK, Message: res.Message, Hosts: upstream.Hosts()}
	if callErr != nil {
		state.Message = "error: " + callErr.Error() // callFailure's words: no answer in them
	} else {
		res.Message, state.Withheld = upstream.Withhold(text.Clip(res.Message, maxTestMessage))
		state.Message = res.Message
	}
	// Recorded even when the caller went away: the config went out.
	if err := audit.Write(context.WithoutCancel(ctx), s.db, audit.Of(p), s.now(), ActionInterfaceTest, entityInterface, id.String(), nil, state); err != nil {
		return TestResult{}, err
	}
	return res, callErr
}

func (s *Service) runTest(ctx context.Context, gw payment.Gateway) (TestResult, error) {
	out, err := gw.Plugin.Call(ctx, "test_config", gw.ConfigJSON, "{}")
	if err != nil {
		var ce *plugin.CallError
		if errors.As(err, &ce) && !errors.Is(err, outbound.ErrCircuitOpen) && !errors.Is(err, context.Canceled) {
			return TestResult{OK: false, Message: fmt.Sprintf("test_config failed (%s): %s", ce.Kind, ce.Message)}, nil
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
	rows, err := store.Q(s.db).ListPaymentMethods(ctx)
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

func joinProblems(p []string) string { return strings.Join(p, "; ") }

func snapshotOf(v InterfaceView) interfaceState {
	return interfaceState{ID: v.ID, PluginName: v.PluginName, DisplayName: v.DisplayName, Enabled: v.Enabled, Config: v.Config}
}
