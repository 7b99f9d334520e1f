package gateway

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/rustbill/paymentd/internal/apperr"
	"github.com/rustbill/paymentd/internal/audit"
	"github.com/rustbill/paymentd/internal/configschema"
	"github.com/rustbill/paymentd/internal/logging"
	"github.com/rustbill/paymentd/internal/payment"
	"github.com/rustbill/paymentd/internal/plugin"
	"github.com/rustbill/paymentd/internal/secretpass"
	"github.com/rustbill/paymentd/internal/secrets"
	"github.com/rustbill/paymentd/internal/startstop"
	"github.com/rustbill/paymentd/internal/store"
	"github.com/rustbill/paymentd/internal/text"
)

// Changes a scan reports, one per plugin whose row it changed.
const (
	ChangeAdded         = "added"          // a new plugin (loaded or not: see Error)
	ChangeUpgraded      = "upgraded"       // greater version: definition and interface schemas replaced
	ChangeSourceUpdated = "source_updated" // equal or lower version: source and hash only
	ChangeRecovered     = "recovered"      // loaded again with the stored code (after error or missing)
	ChangeError         = "error"          // does not compile or breaks the contract: disabled
	ChangeMissing       = "missing"        // the file is gone: disabled
)

// Change is what a scan changed about one plugin.
type Change struct {
	Name            string
	Kind            string
	PreviousVersion string
	FileVersion     string
	Error           string
	// InterfacesUpdated counts the interfaces whose config schema an
	// upgrade replaced.
	InterfacesUpdated int64
}

// Report is the outcome of one scan.
type Report struct {
	Files   int
	Changes []Change
	// Warnings are for admins: an interface whose config does not satisfy
	// its plugin's new schema, a plugin row whose update failed.
	Warnings []string
}

// RegistryOptions configure a Registry.
type RegistryOptions struct {
	DB store.DB
	// Dir is [plugins].dir; ScanInterval [plugins].scan_interval.
	Dir          string
	ScanInterval time.Duration
	// Runtime loads the scripts; its HTTP goes through the outbound client.
	Runtime *plugin.Runtime
	// Clock stamps rows and audit entries; nil means time.Now.
	Clock  func() time.Time
	Logger *slog.Logger
	// Observer, when set, watches every call of a loaded plugin (metrics,
	// tracing).
	Observer CallObserver
	// Tracer, when set (tracing on), gives each scan a span: the lines the
	// scan logs carry its trace id.
	Tracer trace.Tracer
	// Secrets seals interface config secrets and opens them for plugin
	// calls; nil when [secrets] has no key (then no secret can be stored).
	Secrets *secrets.Keyring
}

// CallObserver watches the calls of loaded plugins. StartCall is called
// before fn of plugin runs and returns the context the call runs with (a
// span's) and a function to call with the call's outcome.
type CallObserver interface {
	StartCall(ctx context.Context, plugin, fn string) (context.Context, func(err error))
}

// callErrorEvery bounds how often a plugin's failed calls are written to
// its row: during a gateway outage every payment fails, and one write per
// failure would add load exactly when the database is needed most.
const callErrorEvery = 10 * time.Second

// Registry is the plugin scanner and the set of plugins loaded in this
// process. It implements payment.Gateways. See doc.go.
type Registry struct {
	db       store.DB
	dir      string
	interval time.Duration
	rt       *plugin.Runtime
	clock    func() time.Time
	log      *slog.Logger
	observer CallObserver
	tracer   trace.Tracer
	secrets  *secrets.Keyring

	loaded atomic.Pointer[map[string]*loaded]
	scanMu sync.Mutex // one scan at a time

	// The gateway interfaces Get read lately (see interfaceCacheTTL).
	ifMu    sync.RWMutex
	ifCache map[uuid.UUID]cachedInterface
	ifGen   uint64 // bumped by Invalidate, under ifMu

	// unreadableLogged is when Get last logged that an interface's secrets
	// do not decrypt (uuid.UUID → time.Time): once a minute each.
	unreadableLogged sync.Map

	loop startstop.Loop
}

// loaded is one compiled plugin in memory. It is immutable once published,
// apart from the time its last failure was written.
type loaded struct {
	name   string
	folder string
	typ    plugin.Type
	script *plugin.Script
	plugin *plugin.Plugin
	caller *recordingCaller
	// What info() and config_schema() answered, compact JSON.
	info       []byte
	schemaJSON []byte
	schema     *configschema.Schema
	// currencies is what info().currencies declares (gateways only).
	currencies declaredCurrencies
	// savesMethods: the gateway saves payment methods (charge_saved,
	// remove_saved).
	savesMethods bool
	// refusal is what info().callback_refusal declares (gateways only).
	refusal *payment.CallbackRefusal
	// lastRecorded is when a failed call was last written (unix nanos).
	lastRecorded atomic.Int64
}

var _ payment.Gateways = (*Registry)(nil)

// NewRegistry returns a stopped registry with nothing loaded.
func NewRegistry(o RegistryOptions) *Registry {
	if o.Clock == nil {
		o.Clock = time.Now
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.Runtime == nil {
		o.Runtime = plugin.NewRuntime(plugin.Options{Logger: o.Logger})
	}
	r := &Registry{
		db: o.DB, dir: o.Dir, interval: o.ScanInterval, rt: o.Runtime,
		clock: o.Clock, log: o.Logger.With("component", "plugin_scanner"), observer: o.Observer, tracer: o.Tracer,
		secrets: o.Secrets,
	}
	empty := map[string]*loaded{}
	r.loaded.Store(&empty)
	return r
}

// Dir is the plugin directory.
func (r *Registry) Dir() string { return r.dir }

// Start scans the directory once and then every ScanInterval until Stop.
// An unreadable directory is logged and leaves nothing loaded; a database
// failure is returned.
func (r *Registry) Start(ctx context.Context) error {
	if r.loop.Running() {
		return startstop.ErrStarted
	}
	if r.interval <= 0 {
		return errors.New("[plugins].scan_interval must be positive")
	}
	if _, err := r.Scan(ctx); err != nil && !errors.Is(err, ErrPluginDir) {
		return fmt.Errorf("plugin scan: %w", err)
	}
	// The loop outlives a request-scoped ctx: only Stop ends it.
	if err := r.loop.Start(context.WithoutCancel(ctx), func(ctx context.Context, _ <-chan struct{}) { r.run(ctx, r.interval) }); err != nil {
		return err
	}
	r.log.Info("plugin scanner started", "dir", r.dir, "interval", r.interval.String())
	return nil
}

// Stop ends the periodic scan and waits for a scan in progress. The loaded
// plugins stay usable.
func (r *Registry) Stop() {
	if r.loop.Stop() {
		r.log.Info("plugin scanner stopped")
	}
}

func (r *Registry) run(ctx context.Context, every time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			r.periodicScan(ctx)
		}
	}
}

// periodicScan is the scan of every ScanInterval, a span of its own.
func (r *Registry) periodicScan(ctx context.Context) {
	ctx, span := logging.BackgroundSpan(ctx, r.tracer, "plugin.scan")
	defer span.End()
	if _, err := r.scan(ctx, scannerActor); err != nil && ctx.Err() == nil {
		span.SetStatus(codes.Error, "plugin scan failed")
		r.log.ErrorContext(ctx, "plugin scan failed", "err", err)
	}
}

func (r *Registry) now() time.Time { return store.Timestamp(r.clock()) }

func (r *Registry) current() map[string]*loaded { return *r.loaded.Load() }

// lookup returns the plugin loaded under name, nil when none is.
func (r *Registry) lookup(name string) *loaded { return r.current()[name] }

// Get implements payment.Gateways: one read of the interface row (with its
// plugin's enabled flag), and the plugin from memory (nil unless a gateway
// plugin of that name is loaded). A plugin an admin disabled stays loaded
// and is handed out with PluginDisabled set: the payment domain refuses new
// payments through it but still settles and refunds the old ones.
func (r *Registry) Get(ctx context.Context, interfaceID uuid.UUID) (payment.Gateway, error) {
	c, err := r.interfaceView(ctx, interfaceID)
	if err != nil {
		return payment.Gateway{}, store.NotFound(err, "gateway interface %s not found", interfaceID)
	}
	v, gi := c.view, c.view.GatewayInterface
	if c.openErr != nil {
		r.logUnreadable(ctx, gi.ID, c.openErr)
		return payment.Gateway{}, apperr.Wrap(apperr.FailedPrecondition, c.openErr,
			"gateway interface %s cannot be used: its secrets do not decrypt with the keys of [secrets]", gi.ID)
	}
	config := c.config
	g := payment.Gateway{
		InterfaceID:    gi.ID,
		PluginName:     gi.PluginName,
		DisplayName:    gi.DisplayName,
		Enabled:        gi.Enabled,
		PluginDisabled: !v.PluginEnabled,
		ConfigJSON:     config,
	}
	if l := r.lookup(gi.PluginName); l != nil && l.typ == plugin.Gateway {
		g.Plugin = l.caller
		g.Currencies = c.currencies
		if c.plugin != l { // a scan replaced the plugin since the read
			g.Currencies = l.currencies.of(gi.Config)
		}
		g.SavesMethods = l.savesMethods
		g.CallbackRefusal = l.refusal
	}
	return g, nil
}

// unreadableLogEvery bounds how often Get logs that one interface's secrets
// do not decrypt: every callback, payment and status query of it fails the
// same way until an operator acts.
const unreadableLogEvery = time.Minute

func (r *Registry) logUnreadable(ctx context.Context, id uuid.UUID, err error) {
	now := time.Now()
	if last, ok := r.unreadableLogged.Load(id); ok && now.Sub(last.(time.Time)) < unreadableLogEvery {
		return
	}
	r.unreadableLogged.Store(id, now)
	r.log.ErrorContext(ctx, "gateway interface unusable: its secrets do not decrypt; configure the key they name in [secrets].keys, or send the secrets again (UpdateGatewayInterface)",
		"gateway_interface_id", id, "err", err)
}

// interfaceCacheTTL is how long Get trusts a gateway interface it has read.
// Every callback, payment creation and status query looks its interface
// up; an interface changes when an admin edits it. Changes made through
// this process (Service, the scanner) invalidate at once; another
// instance's take effect here within the TTL — a key rotated elsewhere is
// used for at most a second more (a callback refused meanwhile is sent
// again by the gateway), a disabled interface refuses new payments here a
// second later.
const interfaceCacheTTL = time.Second

// cachedInterface is an interface row as read, with its config opened for
// the plugin (secrets decrypted) once per read rather than once per Get:
// the keyring does not change while the Registry lives, so the opened
// config is the row's until the row changes.
type cachedInterface struct {
	view store.GatewayInterfaceView
	// config is the opened config; openErr why it does not open.
	config  string
	openErr error
	at      time.Time
	// currencies is what the interface takes by the plugin loaded when it
	// was read (plugin; nil when none was): decoding the config for it on
	// every Get cost a callback 3–4 % of paymentd's CPU.
	plugin     *loaded
	currencies []string
}

// interfaceView reads a gateway interface (and whether its plugin is
// enabled) and opens its config, from the cache while it is fresh. Only
// existing interfaces are cached, so the cache holds no more entries than
// there are interfaces.
func (r *Registry) interfaceView(ctx context.Context, id uuid.UUID) (cachedInterface, error) {
	now := time.Now()
	r.ifMu.RLock()
	c, ok := r.ifCache[id]
	gen := r.ifGen
	r.ifMu.RUnlock()
	if ok && now.Sub(c.at) < interfaceCacheTTL {
		return c, nil
	}
	v, err := store.GetGatewayInterfaceView(ctx, r.db, id)
	if err != nil {
		return cachedInterface{}, err
	}
	c = cachedInterface{view: v, at: now}
	c.config, c.openErr = openRaw(r.secrets, v.ID, v.Config)
	if l := r.lookup(v.PluginName); l != nil && l.typ == plugin.Gateway {
		c.plugin, c.currencies = l, l.currencies.of(v.Config)
	}
	r.ifMu.Lock()
	// A change invalidated meanwhile: what was read may predate it.
	if r.ifGen == gen {
		if r.ifCache == nil {
			r.ifCache = make(map[uuid.UUID]cachedInterface)
		}
		r.ifCache[id] = c
	}
	r.ifMu.Unlock()
	return c, nil
}

// Invalidate forgets the gateway interfaces Get has read, after a change
// to an interface or a plugin.
func (r *Registry) Invalidate() {
	r.ifMu.Lock()
	r.ifGen++
	clear(r.ifCache)
	r.ifMu.Unlock()
}

// currenciesOf is what an interface of the gateway plugin name with config
// takes, as Get hands it to the payment domain: nil unless this process
// runs a gateway plugin of that name.
func (r *Registry) currenciesOf(name string, config []byte) []string {
	l := r.lookup(name)
	if l == nil || l.typ != plugin.Gateway {
		return nil
	}
	return l.currencies.of(config)
}

// LoadedPlugin describes the code of a plugin loaded in this process.
type LoadedPlugin struct {
	Type         plugin.Type
	Version      string
	SHA256       string
	HasAdminPage bool
}

// Loaded reports what this process runs for the plugin name.
func (r *Registry) Loaded(name string) (LoadedPlugin, bool) {
	l := r.lookup(name)
	if l == nil {
		return LoadedPlugin{}, false
	}
	return LoadedPlugin{Type: l.typ, Version: l.script.Version(), SHA256: l.script.SHA256(), HasAdminPage: l.script.HasAdminPage()}, true
}

// GatewayPlugins lists the names of the gateway plugins loaded in this
// process, sorted: the gateway label values of the payment metrics.
func (r *Registry) GatewayPlugins() []string {
	var out []string
	for name, l := range r.current() {
		if l.typ == plugin.Gateway {
			out = append(out, name)
		}
	}
	slices.Sort(out)
	return out
}

// Scan reads the plugin directory and brings the plugins table and the
// loaded plugins in line with it, plugin by plugin (doc.go has the rules),
// recording the changes under the system actor "plugin-scanner". A plugin
// that fails is disabled alone; a database error for one plugin leaves it
// as it was, the scan goes on, and the errors are returned joined. Only an
// unreadable directory (ErrPluginDir) stops the scan before it changes
// anything. With tracing on the scan is a span (a child of ctx's, if any).
func (r *Registry) Scan(ctx context.Context) (Report, error) {
	ctx, span := logging.BackgroundSpan(ctx, r.tracer, "plugin.scan")
	defer span.End()
	rep, err := r.scan(ctx, scannerActor)
	if err != nil {
		span.SetStatus(codes.Error, "plugin scan failed")
	}
	return rep, err
}

// scan is Scan on behalf of by (an admin's reload), for the audit log.
func (r *Registry) scan(ctx context.Context, by audit.Actor) (Report, error) {
	r.scanMu.Lock()
	defer r.scanMu.Unlock()
	// A scan may change plugins and push schemas to their interfaces.
	defer r.Invalidate()

	files, err := readPluginDir(r.dir)
	if err != nil {
		r.log.ErrorContext(ctx, "plugin directory cannot be read; nothing changed", "err", err)
		return Report{}, err
	}
	rows, err := store.Q(r.db).ListPlugins(ctx, store.PluginFilter{})
	if err != nil {
		return Report{}, err
	}
	stored := make(map[string]store.Plugin, len(rows))
	for _, p := range rows {
		stored[p.Name] = p
	}

	cur := r.current()
	next := maps.Clone(cur)
	rep := Report{Files: len(files)}
	var errs []error
	for _, name := range sortedNames(files, stored) {
		if err := ctx.Err(); err != nil {
			errs = append(errs, err)
			break
		}
		f := files[name]
		if f == nil && stored[name].Status == store.PluginMissing && cur[name] == nil {
			continue // gone before, still gone
		}
		out, err := r.scanOne(ctx, by, name, f, cur[name])
		if err != nil {
			errs = append(errs, fmt.Errorf("plugin %s: %w", name, err))
			rep.Warnings = append(rep.Warnings, fmt.Sprintf("plugin %s: not updated: the database refused the change; see the logs", name))
			continue
		}
		if out.change != nil {
			rep.Changes = append(rep.Changes, *out.change)
		}
		rep.Warnings = append(rep.Warnings, out.warnings...)
		if out.load != nil {
			next[name] = out.load
		} else {
			delete(next, name)
		}
	}
	// One swap for the whole scan: a Get sees the old set or the new one.
	// Replaced plugins are not closed: a Gateway handed out just before may
	// still call it; its idle states are plain Go memory, collected with it.
	r.loaded.Store(&next)
	return rep, errors.Join(errs...)
}

// outcome is what scanning one plugin decided.
type outcome struct {
	change   *Change
	warnings []string
	// load is what memory holds for the plugin afterwards; nil: nothing.
	load *loaded
}

func (r *Registry) scanOne(ctx context.Context, by audit.Actor, name string, f *pluginFile, cur *loaded) (outcome, error) {
	cand, candErr := r.prepare(ctx, f, cur)
	fresh := cand != nil && cand != cur // compiled now, not yet published

	var out outcome
	var upgradedSchema *configschema.Schema
	err := store.WithTx(ctx, r.db, func(tx pgx.Tx) error {
		d := decision{r: r, ctx: ctx, tx: tx, by: by, at: r.now(), name: name, file: f, cand: cand, candErr: candErr}
		var err error
		out, upgradedSchema, err = d.apply()
		return err
	})
	if err != nil {
		if fresh {
			cand.plugin.Close()
		}
		r.log.ErrorContext(ctx, "plugin scan: cannot record the plugin; memory left as it was", "plugin", name, "err", err)
		return outcome{}, err
	}
	if fresh && out.load != cand {
		cand.plugin.Close()
	}
	r.logOutcome(ctx, name, f, cur, out)
	if upgradedSchema != nil {
		out.warnings = append(out.warnings, r.checkInterfaces(ctx, name, upgradedSchema)...)
		r.sealAfterUpgrade(ctx, by, name)
	}
	return out, nil
}

// prepare compiles f unless memory already runs the same bytes of the same
// folder. It returns (nil, nil) when there is no file.
func (r *Registry) prepare(ctx context.Context, f *pluginFile, cur *loaded) (*loaded, error) {
	if f == nil {
		return nil, nil
	}
	if f.problem != "" {
		return nil, &InspectError{Plugin: f.name, Msg: f.problem}
	}
	if cur != nil && cur.folder == f.folder && cur.script.SHA256() == f.sha256 {
		return cur, nil
	}
	in, err := Inspect(ctx, r.rt, f.name, f.folder, f.source)
	if err != nil {
		return nil, err
	}
	l := &loaded{name: f.name, folder: f.folder, typ: in.Type, script: in.Script, plugin: in.Plugin}
	l.caller = &recordingCaller{r: r, l: l}
	l.info, l.schemaJSON, l.schema, l.currencies, l.savesMethods = in.Info, in.ConfigSchema, in.Schema, in.currencies, in.SavesMethods
	l.refusal = in.CallbackRefusal
	if in.Type == plugin.Gateway && in.Currencies == nil {
		r.log.WarnContext(ctx, "gateway plugin declares no currencies (info().currencies): its interfaces take no new payments",
			"plugin", f.name)
	}
	return l, nil
}

func (r *Registry) logOutcome(ctx context.Context, name string, f *pluginFile, cur *loaded, out outcome) {
	if c := out.change; c != nil {
		attrs := []any{"plugin", name, "change", c.Kind, "stored_version", c.PreviousVersion, "file_version", c.FileVersion}
		switch c.Kind {
		case ChangeError:
			r.log.ErrorContext(ctx, "plugin disabled: "+c.Error, attrs...)
		case ChangeMissing:
			r.log.WarnContext(ctx, "plugin disabled: its file is gone", attrs...)
		case ChangeUpgraded:
			r.log.InfoContext(ctx, "plugin upgraded", append(attrs, "interfaces_updated", c.InterfacesUpdated)...)
		default:
			r.log.InfoContext(ctx, "plugin "+c.Kind, attrs...)
		}
	}
	switch {
	case out.load != nil && out.load != cur:
		r.log.InfoContext(ctx, "plugin loaded", "plugin", name, "type", string(out.load.typ), "version", out.load.script.Version(),
			"sha256", out.load.script.SHA256(), "path", f.rel)
	case out.load == nil && cur != nil:
		r.log.WarnContext(ctx, "plugin unloaded", "plugin", name)
	}
}

// checkInterfaces validates the config of every interface of an upgraded plugin
// against its new schema. The upgrade stands either way (the API contract says
// the schema is pushed); an admin has to fix what no longer fits, and
// EnableGatewayInterface refuses it until then.
func (r *Registry) checkInterfaces(ctx context.Context, name string, schema *configschema.Schema) []string {
	gis, err := store.Q(r.db).ListGatewayInterfacesOfPlugin(ctx, name)
	if err != nil {
		r.log.WarnContext(ctx, "cannot check the interfaces of an upgraded plugin", "plugin", name, "err", err)
		return nil
	}
	var warnings []string
	for _, gi := range gis {
		cfg, err := decodeConfig(gi.Config)
		if err != nil {
			continue
		}
		if cfg, err = openConfig(r.secrets, gi.ID, cfg); err != nil {
			r.log.WarnContext(ctx, "cannot check a gateway interface against its plugin's new schema: its secrets do not decrypt",
				"plugin", name, "gateway_interface_id", gi.ID, "err", err)
			warnings = append(warnings, fmt.Sprintf("gateway interface %s (%s): its secrets do not decrypt with the keys of [secrets]", gi.ID, gi.DisplayName))
			continue
		}
		if problems := schema.Problems(cfg); len(problems) > 0 {
			msg := fmt.Sprintf("gateway interface %s (%s): config does not satisfy the new schema of plugin %s: %s",
				gi.ID, gi.DisplayName, name, joinProblems(problems))
			r.log.WarnContext(ctx, "gateway interface config does not satisfy its plugin's new schema",
				"plugin", name, "gateway_interface_id", gi.ID, "problems", joinProblems(problems))
			warnings = append(warnings, msg)
		}
	}
	return warnings
}

// sealAfterUpgrade encrypts what an upgrade made secret: a property the new
// schema marks "x-secret" holds the value it held in clear. Without a key
// it stays in clear, and the next start refuses to serve until one is
// configured.
func (r *Registry) sealAfterUpgrade(ctx context.Context, by audit.Actor, name string) {
	rep, err := secretpass.Seal(ctx, r.db, r.secrets, by, r.now())
	switch {
	case errors.Is(err, secretpass.ErrSecretsWithoutKey):
		r.log.ErrorContext(ctx, "an upgraded plugin's schema made stored values secret, and no [secrets] key is configured to encrypt them", "plugin", name, "err", err)
	case err != nil:
		r.log.ErrorContext(ctx, "cannot encrypt the secrets an upgraded plugin's schema declares", "plugin", name, "err", err)
	case rep.Sealed > 0:
		r.log.InfoContext(ctx, "secrets that an upgraded plugin's schema declares are encrypted", "plugin", name, "sealed", rep.Sealed, "key_id", r.secrets.Current())
	}
}

// recordingCaller is the payment.Caller of a loaded plugin: a failed call is
// logged and, at most every callErrorEvery, stored as the plugin's last
// error for admins.
type recordingCaller struct {
	r *Registry
	l *loaded
}

func (c *recordingCaller) Call(ctx context.Context, fn, configJSON, inputJSON string) (string, error) {
	if o := c.r.observer; o != nil {
		var done func(error)
		ctx, done = o.StartCall(ctx, c.l.name, fn)
		out, err := c.call(ctx, fn, configJSON, inputJSON)
		done(err)
		return out, err
	}
	return c.call(ctx, fn, configJSON, inputJSON)
}

func (c *recordingCaller) call(ctx context.Context, fn, configJSON, inputJSON string) (string, error) {
	out, err := c.l.plugin.Call(ctx, fn, configJSON, inputJSON)
	if err != nil {
		c.r.callFailed(ctx, c.l, fn, err)
	}
	return out, err
}

func (r *Registry) callFailed(ctx context.Context, l *loaded, fn string, err error) {
	if errors.Is(err, context.Canceled) {
		return // the caller gave up: nothing wrong with the plugin
	}
	msg := err.Error()
	r.log.WarnContext(ctx, "plugin call failed", "plugin", l.name, "function", fn, "err", msg)
	// last_error is read through the API: it quotes no upstream answer of a
	// call whose caller keeps them out (TestInterface).
	msg, _ = plugin.UpstreamOf(ctx).Withhold(msg)
	now := r.clock()
	last := l.lastRecorded.Load()
	if last != 0 && now.Sub(time.Unix(0, last)) < callErrorEvery {
		return
	}
	if !l.lastRecorded.CompareAndSwap(last, now.UnixNano()) {
		return
	}
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
	defer cancel()
	if _, err := store.SetPluginCallError(wctx, r.db, l.name, l.script.SHA256(), text.Clip(msg, 2000), r.now()); err != nil {
		r.log.WarnContext(ctx, "cannot record a plugin's failed call", "plugin", l.name, "err", err)
	}
}

// Plugin hands out the loaded plugin of any type by name, for the notifier
// and provider lookups (plugin.Plugins via plugin.PluginsFunc). The registry
// keeps no per-plugin configuration for those types, so configJSON is "":
// notifiers are configured in [notify], providers per product.
func (r *Registry) Plugin(name string) (plugin.Caller, string, bool) {
	l := r.lookup(name)
	if l == nil || l.caller == nil {
		return nil, "", false
	}
	return l.caller, "", true
}
