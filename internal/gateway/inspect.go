package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"mime"
	"regexp"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/rustbill/paymentd/internal/configschema"
	"github.com/rustbill/paymentd/internal/payment"
	"github.com/rustbill/paymentd/internal/plugin"
)

// Folders of the plugin directory and the type their scripts are compiled
// as. A provider declares upstream_provider through info().type.
var folderTypes = map[string]plugin.Type{
	"gateway":  plugin.Gateway,
	"notifier": plugin.Notifier,
	"provider": plugin.FirstPartyProvider,
}

// FolderType is the plugin type of a folder of the plugin directory
// (gateway/, notifier/, provider/), false for any other folder.
func FolderType(folder string) (plugin.Type, bool) {
	t, ok := folderTypes[folder]
	return t, ok
}

// family groups the types a plugin may move between: a provider may become
// an upstream provider with a new version, a gateway never becomes a
// notifier (its interfaces would lose their plugin).
func family(t plugin.Type) string {
	switch t {
	case plugin.FirstPartyProvider, plugin.UpstreamProvider:
		return "provider"
	}
	return string(t)
}

// validName is what a plugin's file name (without .lua) may be: it is a
// primary key, shown in URLs and logs.
var validName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]{0,99}$`)

// inspectTimeout bounds the dry run of info and config_schema, which should
// answer at once: they take no input and must not call out.
const inspectTimeout = 5 * time.Second

// Inspected is a script that compiled, keeps the contract of its type and
// answered info and config_schema with what the contract says.
type Inspected struct {
	Name   string
	Type   plugin.Type
	Script *plugin.Script
	// Plugin is the script loaded into the runtime Inspect was given (the
	// dry run used another one, without HTTP); the caller keeps it or
	// closes it.
	Plugin *plugin.Plugin
	// Info and ConfigSchema are the compact JSON objects the functions
	// returned.
	Info         []byte
	ConfigSchema []byte
	Schema       *configschema.Schema
	// Currencies is what a gateway's info().currencies declares: ISO 4217
	// codes, or ["*"] when each interface's config names them; nil when it
	// declares nothing (its interfaces then take no new payment).
	Currencies []string
	currencies declaredCurrencies
	// SavesMethods: a gateway's info().saves_payment_methods is true, and
	// the script defines charge_saved and remove_saved.
	SavesMethods bool
	// CallbackRefusal is a gateway's info().callback_refusal, nil when it
	// declares none.
	CallbackRefusal *payment.CallbackRefusal
}

// InspectError is why a script cannot be loaded: a compile error (with its
// line), a contract violation, or a bad answer of info or config_schema.
type InspectError struct {
	Plugin string
	// Line is the script line the error names, 0 when none.
	Line int
	Msg  string
}

func (e *InspectError) Error() string {
	if e.Line > 0 {
		return fmt.Sprintf("plugin %s: line %d: %s", e.Plugin, e.Line, e.Msg)
	}
	return fmt.Sprintf("plugin %s: %s", e.Plugin, e.Msg)
}

// Inspect compiles source as the plugin name of folder's type, dry-runs
// info and config_schema with empty arguments (without HTTP) and loads the
// script into rt. Both the scanner and `paymentd plugin check` use it, so a
// file that passes the check loads.
func Inspect(ctx context.Context, rt *plugin.Runtime, name, folder string, source []byte) (*Inspected, error) {
	fail := func(line int, format string, args ...any) error {
		return &InspectError{Plugin: name, Line: line, Msg: fmt.Sprintf(format, args...)}
	}
	if !validName.MatchString(name) {
		return nil, fail(0, "the file name must be 1-100 letters, digits, '_', '.' or '-', starting with a letter or digit")
	}
	typ, ok := FolderType(folder)
	if !ok {
		return nil, fail(0, "folder %q is not a plugin type (gateway, notifier, provider)", folder)
	}
	ctx, cancel := context.WithTimeout(ctx, inspectTimeout)
	defer cancel()

	in, err := inspectAs(ctx, rt, name, typ, source)
	if err != nil {
		return nil, err
	}
	if typ == plugin.FirstPartyProvider {
		var info struct {
			Type *string `json:"type"`
		}
		_ = json.Unmarshal(in.Info, &info)
		switch {
		case info.Type == nil || *info.Type == "" || *info.Type == string(plugin.FirstPartyProvider):
		case *info.Type == string(plugin.UpstreamProvider):
			in.Plugin.Close()
			if in, err = inspectAs(ctx, rt, name, plugin.UpstreamProvider, source); err != nil {
				return nil, err
			}
		default:
			in.Plugin.Close()
			return nil, fail(0, "info().type is %q; a provider is first_party_provider or upstream_provider", *info.Type)
		}
	}
	return in, nil
}

func inspectAs(ctx context.Context, rt *plugin.Runtime, name string, typ plugin.Type, source []byte) (*Inspected, error) {
	sc, err := plugin.Compile(name, typ, source)
	if err != nil {
		var ce *plugin.CompileError
		if errors.As(err, &ce) {
			return nil, &InspectError{Plugin: name, Line: ce.Line, Msg: ce.Message}
		}
		return nil, &InspectError{Plugin: name, Msg: err.Error()}
	}
	// The dry run has no HTTP: info and config_schema describe the plugin
	// and must not call out, least of all on every scan.
	dry := dryRuntime.Load(sc)
	defer dry.Close()
	in := &Inspected{Name: name, Type: typ, Script: sc}
	if in.Info, err = callObject(ctx, dry, "info"); err != nil {
		return nil, err
	}
	if in.ConfigSchema, err = callObject(ctx, dry, "config_schema"); err != nil {
		return nil, err
	}
	if in.Schema, err = configschema.Parse(in.ConfigSchema); err != nil {
		return nil, &InspectError{Plugin: name, Msg: "config_schema(): " + err.Error()}
	}
	if typ == plugin.Gateway {
		// A wrong currency list would send money in a currency the gateway
		// does not book: refuse the plugin rather than guess.
		if in.currencies, err = parseDeclaredCurrencies(in.Info); err != nil {
			return nil, &InspectError{Plugin: name, Msg: err.Error()}
		}
		if in.currencies.byAccount {
			if err := checkSchemaDeclaresCurrencies(in.ConfigSchema); err != nil {
				return nil, &InspectError{Plugin: name, Msg: err.Error()}
			}
			in.Currencies = []string{accountCurrencies}
		} else {
			in.Currencies = in.currencies.codes
		}
		if in.SavesMethods, err = savesMethods(in.Info, sc); err != nil {
			return nil, &InspectError{Plugin: name, Msg: err.Error()}
		}
		if in.CallbackRefusal, err = callbackRefusal(in.Info); err != nil {
			return nil, &InspectError{Plugin: name, Msg: err.Error()}
		}
	}
	in.Plugin = rt.Load(sc)
	return in, nil
}

// savesMethods reads info().saves_payment_methods: absent or false, the
// gateway saves nothing; true, it must define charge_saved and
// remove_saved (docs/plugins.md), or the plugin is refused rather than
// offered for renewals it cannot charge.
func savesMethods(info []byte, sc *plugin.Script) (bool, error) {
	var in struct {
		Saves *json.RawMessage `json:"saves_payment_methods"`
	}
	_ = json.Unmarshal(info, &in)
	if in.Saves == nil || string(*in.Saves) == "false" || string(*in.Saves) == "null" {
		return false, nil
	}
	if string(*in.Saves) != "true" {
		return false, fmt.Errorf("info().saves_payment_methods must be true or false")
	}
	var missing []string
	for _, fn := range plugin.OptionalFunctions(plugin.Gateway) {
		if !sc.Has(fn) {
			missing = append(missing, fn)
		}
	}
	if len(missing) > 0 {
		return false, fmt.Errorf("info().saves_payment_methods is true but the script does not define %s", strings.Join(missing, " and "))
	}
	return true, nil
}

// Bounds of info().callback_refusal.
const (
	maxRefusalContentType = 100
	maxRefusalBody        = 1024
)

// callbackRefusal reads info().callback_refusal, the body a refused
// callback is answered with (docs/plugins.md): absent or null, none; else
// an object whose content_type is a media type and whose body is UTF-8 of
// at most 1 KiB, or the plugin is refused.
func callbackRefusal(info []byte) (*payment.CallbackRefusal, error) {
	var in struct {
		Refusal json.RawMessage `json:"callback_refusal"`
	}
	_ = json.Unmarshal(info, &in)
	if len(in.Refusal) == 0 || string(in.Refusal) == "null" {
		return nil, nil
	}
	var r payment.CallbackRefusal
	dec := json.NewDecoder(bytes.NewReader(in.Refusal))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&r); err != nil {
		return nil, fmt.Errorf("info().callback_refusal must be {\"content_type\", \"body\"}: %v", err)
	}
	mt, _, err := mime.ParseMediaType(r.ContentType)
	if err != nil || !strings.Contains(mt, "/") || len(r.ContentType) > maxRefusalContentType || strings.ContainsAny(r.ContentType, "\r\n") {
		return nil, fmt.Errorf("info().callback_refusal.content_type must be a media type of at most %d bytes, got %q", maxRefusalContentType, r.ContentType)
	}
	if r.Body == "" || len(r.Body) > maxRefusalBody || !utf8.ValidString(r.Body) {
		return nil, fmt.Errorf("info().callback_refusal.body must be 1 to %d bytes of UTF-8", maxRefusalBody)
	}
	return &r, nil
}

// dryRuntime runs the dry runs: no HTTP, logs discarded.
var dryRuntime = plugin.NewRuntime(plugin.Options{Logger: slog.New(slog.DiscardHandler)})

// callObject calls fn("{}", "{}") and returns its answer, which must be a
// JSON object, compacted.
func callObject(ctx context.Context, p *plugin.Plugin, fn string) ([]byte, error) {
	name := p.Script().Name()
	out, err := p.Call(ctx, fn, "{}", "{}")
	if err != nil {
		var ce *plugin.CallError
		if errors.As(err, &ce) {
			return nil, &InspectError{Plugin: name, Line: scriptLine(name, ce.Message), Msg: fmt.Sprintf("%s() failed (%s): %s", fn, ce.Kind, ce.Message)}
		}
		return nil, &InspectError{Plugin: name, Msg: fmt.Sprintf("%s() failed: %v", fn, err)}
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal([]byte(out), &obj); err != nil || obj == nil {
		return nil, &InspectError{Plugin: name, Msg: fmt.Sprintf("%s() must return a JSON object", fn)}
	}
	var buf bytes.Buffer
	if err := json.Compact(&buf, []byte(out)); err != nil {
		return nil, &InspectError{Plugin: name, Msg: fmt.Sprintf("%s(): %v", fn, err)}
	}
	return buf.Bytes(), nil
}

// scriptLine finds N in a Lua runtime error "name:N: message".
func scriptLine(name, msg string) int {
	m := regexp.MustCompile(`(?:^|\s)` + regexp.QuoteMeta(name) + `:(\d+):`).FindStringSubmatch(msg)
	if m == nil {
		return 0
	}
	var n int
	_, _ = fmt.Sscanf(m[1], "%d", &n)
	return n
}
