package configschema

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/santhosh-tekuri/jsonschema/v6/kind"
	"golang.org/x/text/language"
	"golang.org/x/text/message"
)

// Mask is what a secret config value reads as. Sent back in an update, it
// means "keep the stored value".
const Mask = "********"

// Size bounds. A config schema or a config is a few hundred bytes; the
// bounds keep a runaway plugin or request from costing megabytes per row.
const (
	MaxSchemaBytes = 256 << 10
	MaxConfigBytes = 64 << 10
	// maxProblems bounds the problems named in one validation error.
	maxProblems = 10
)

// schemaURL is the location the compiler files a config schema under. It
// resolves nothing: the loader refuses every URL (see noLoader).
const schemaURL = "https://paymentd.invalid/config-schema.json"

// Schema is a plugin's config_schema, compiled, with the paths of its
// secret and endpoint properties. It is immutable.
type Schema struct {
	compiled *jsonschema.Schema
	// secrets are the paths of properties marked "x-secret": true, reached
	// from the root through "properties" only (e.g. ["key"], ["auth",
	// "token"]), sorted.
	secrets [][]string
	// endpoints are the properties marked "x-endpoint": true, sorted by
	// path: where the plugin sends the secrets (epay's api_url, Stripe's
	// api_base). A stored secret is kept through an update only while they
	// stay the same (Merge).
	endpoints []endpoint
}

// endpoint is an "x-endpoint" property and the default its schema gives it
// ("" without one): an absent or empty value means the default.
type endpoint struct {
	path []string
	def  string
}

// Parse compiles a JSON Schema (draft 2020-12 unless it says
// otherwise). It refuses what it cannot honour safely: a schema that is not
// an object, a reference to anything outside the document (no file or
// network is ever read), and "x-secret" or "x-endpoint" anywhere but on a
// string property reached through "properties" — a secret the masking
// cannot find would be shown to everyone who reads the config, and an
// endpoint Merge cannot find would let a kept secret follow it anywhere.
func Parse(raw []byte) (*Schema, error) {
	if len(raw) > MaxSchemaBytes {
		return nil, fmt.Errorf("config schema is %d bytes, the limit is %d", len(raw), MaxSchemaBytes)
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		return nil, fmt.Errorf("config schema is not JSON: %w", err)
	}
	obj, ok := doc.(map[string]any)
	if !ok {
		return nil, errors.New("config schema must be a JSON object")
	}
	secrets, endpoints, err := markedPaths(obj)
	if err != nil {
		return nil, err
	}
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	c.UseLoader(noLoader{})
	c.AssertFormat()
	if err := c.AddResource(schemaURL, obj); err != nil {
		return nil, fmt.Errorf("config schema: %w", err)
	}
	compiled, err := c.Compile(schemaURL)
	if err != nil {
		return nil, fmt.Errorf("config schema does not compile: %s", strings.ReplaceAll(err.Error(), schemaURL, "config_schema"))
	}
	return &Schema{compiled: compiled, secrets: secrets, endpoints: endpoints}, nil
}

// schemaCache keeps compiled schemas by their bytes: every read of an
// interface masks its config with its schema, and a handful of distinct
// schemas (one per plugin version) serve every interface.
var schemaCache struct {
	sync.Mutex
	m map[[sha256.Size]byte]*Schema
}

// maxCachedSchemas bounds the cache; it is emptied when full.
const maxCachedSchemas = 256

// cachedSchema is ParseConfigSchema through schemaCache.
func cachedSchema(raw []byte) (*Schema, error) {
	key := sha256.Sum256(raw)
	schemaCache.Lock()
	s, ok := schemaCache.m[key]
	schemaCache.Unlock()
	if ok {
		return s, nil
	}
	s, err := Parse(raw)
	if err != nil {
		return nil, err
	}
	schemaCache.Lock()
	if schemaCache.m == nil || len(schemaCache.m) >= maxCachedSchemas {
		schemaCache.m = make(map[[sha256.Size]byte]*Schema)
	}
	schemaCache.m[key] = s
	schemaCache.Unlock()
	return s, nil
}

// noLoader refuses every URL: the jsonschema library's default loader reads
// file:// URLs, and a plugin's "$ref": "file:///etc/shadow" must not.
type noLoader struct{}

func (noLoader) Load(url string) (any, error) {
	return nil, fmt.Errorf("references outside the schema are not allowed (%s)", url)
}

// dataKeywords hold instance data, not subschemas: an "x-secret" key inside
// them means nothing.
var dataKeywords = map[string]bool{"enum": true, "const": true, "default": true, "examples": true}

// markers are the keywords that mark a property: write-only secrets, and
// the endpoints the plugin sends them to.
var markers = []string{"x-secret", "x-endpoint"}

// markedPaths finds the properties marked "x-secret" and "x-endpoint".
// Both must be string properties reached from the root through
// "properties" only: that is where Mask, Merge and the sealing look.
func markedPaths(root map[string]any) ([][]string, []endpoint, error) {
	var secrets [][]string
	var endpoints []endpoint
	var walk func(node any, path []string, viaProperties bool) error
	walk = func(node any, path []string, viaProperties bool) error {
		switch n := node.(type) {
		case map[string]any:
			for _, marker := range markers {
				v, ok := n[marker]
				if !ok {
					continue
				}
				marked, isBool := v.(bool)
				switch {
				case !isBool:
					return fmt.Errorf("config schema: %s at %s must be true or false", marker, pointer(path))
				case marked && (!viaProperties || len(path) == 0):
					return fmt.Errorf("config schema: %s is supported only on properties reached through \"properties\" from the root; found under %s", marker, pointer(path))
				case marked && n["type"] != "string":
					kind := "secret"
					if marker == "x-endpoint" {
						kind = "endpoint"
					}
					return fmt.Errorf("config schema: %s property %s must have \"type\": \"string\"", kind, configKey(path))
				case marked && marker == "x-secret":
					secrets = append(secrets, slices.Clone(path))
				case marked:
					def, _ := n["default"].(string)
					endpoints = append(endpoints, endpoint{path: slices.Clone(path), def: def})
				}
			}
			for k, v := range n {
				switch {
				case slices.Contains(markers, k) || dataKeywords[k]:
				case k == "properties":
					props, ok := v.(map[string]any)
					if !ok {
						continue // the compiler reports it
					}
					for name, sub := range props {
						if err := walk(sub, append(slices.Clone(path), name), viaProperties); err != nil {
							return err
						}
					}
				default:
					if err := walk(v, path, false); err != nil {
						return err
					}
				}
			}
		case []any:
			for _, e := range n {
				if err := walk(e, path, false); err != nil {
					return err
				}
			}
		}
		return nil
	}
	if err := walk(root, nil, true); err != nil {
		return nil, nil, err
	}
	slices.SortFunc(secrets, func(a, b []string) int { return slices.Compare(a, b) })
	slices.SortFunc(endpoints, func(a, b endpoint) int { return slices.Compare(a.path, b.path) })
	return secrets, endpoints, nil
}

// Secrets returns the dotted names of the secret properties ("key",
// "auth.token").
func (s *Schema) Secrets() []string { return dotted(s.secrets) }

// Endpoints returns the dotted names of the endpoint properties
// ("api_url").
func (s *Schema) Endpoints() []string {
	paths := make([][]string, len(s.endpoints))
	for i, e := range s.endpoints {
		paths[i] = e.path
	}
	return dotted(paths)
}

// SecretPaths returns the paths of the secret properties (["key"],
// ["auth", "token"]), sorted; the caller may keep them.
func (s *Schema) SecretPaths() [][]string {
	out := make([][]string, len(s.secrets))
	for i, p := range s.secrets {
		out[i] = slices.Clone(p)
	}
	return out
}

// Problems validates config and names each problem by its key
// ("config.pid: missing", …), at most maxProblems of them, sorted; nil when
// the config is valid. A problem of a secret key never quotes its value.
func (s *Schema) Problems(config map[string]any) []string {
	return s.problems(config, false)
}

// ProblemsBesideOwnKeys is Problems for a config that carries keys of its
// own beside the plugin's settings: a product's provider_config holds the
// provider's settings (api_url, token) and the product's attributes (plan),
// which the plugin's schema does not declare. A top-level key the schema
// does not allow is therefore not a problem; everything else is.
func (s *Schema) ProblemsBesideOwnKeys(config map[string]any) []string {
	return s.problems(config, true)
}

// SchemaOf compiles a stored config schema, through the cache of compiled
// schemas.
func Of(raw []byte) (*Schema, error) { return cachedSchema(raw) }

func (s *Schema) problems(config map[string]any, ownKeys bool) []string {
	raw, err := json.Marshal(config)
	if err != nil {
		return []string{"config: " + err.Error()}
	}
	if len(raw) > MaxConfigBytes {
		return []string{fmt.Sprintf("config: %d bytes of JSON, the limit is %d", len(raw), MaxConfigBytes)}
	}
	inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		return []string{"config: " + err.Error()}
	}
	err = s.compiled.Validate(inst)
	if err == nil {
		return nil
	}
	var ve *jsonschema.ValidationError
	if !errors.As(err, &ve) {
		return []string{"config: " + err.Error()}
	}
	seen := map[string]bool{}
	var out []string
	add := func(path []string, msg string) {
		p := configKey(path) + ": " + msg
		if !seen[p] {
			seen[p] = true
			out = append(out, p)
		}
	}
	var leaves func(e *jsonschema.ValidationError)
	leaves = func(e *jsonschema.ValidationError) {
		if len(e.Causes) > 0 {
			for _, c := range e.Causes {
				leaves(c)
			}
			return
		}
		loc := e.InstanceLocation
		switch k := e.ErrorKind.(type) {
		case *kind.Required:
			for _, m := range k.Missing {
				add(append(slices.Clone(loc), m), "is required")
			}
		case *kind.AdditionalProperties:
			if ownKeys && len(loc) == 0 {
				return
			}
			for _, p := range k.Properties {
				add(append(slices.Clone(loc), p), "is not allowed")
			}
		default:
			if s.isSecret(loc) {
				kw := k.KeywordPath()
				rule := "its schema"
				if len(kw) > 0 {
					rule = "the " + kw[len(kw)-1] + " rule"
				}
				add(loc, "does not satisfy "+rule+" (secret value not shown)")
				return
			}
			add(loc, k.LocalizedString(printer))
		}
	}
	leaves(ve)
	slices.Sort(out)
	if len(out) > maxProblems {
		out = append(out[:maxProblems], fmt.Sprintf("and %d more", len(out)-maxProblems))
	}
	return out
}

var printer = message.NewPrinter(language.English)

// isSecret reports whether loc is a secret property or lies inside one.
func (s *Schema) isSecret(loc []string) bool {
	for _, p := range s.secrets {
		if len(loc) >= len(p) && slices.Equal(loc[:len(p)], p) {
			return true
		}
	}
	return false
}

// Mask returns a copy of config with every non-empty secret replaced by
// Mask. An absent secret stays absent and an empty one empty: neither tells
// anything about a value.
func (s *Schema) Mask(config map[string]any) map[string]any {
	out := deepCopy(config)
	for _, p := range s.secrets {
		v, ok := lookup(out, p)
		if ok && v != nil && v != "" {
			set(out, p, Mask)
		}
	}
	return out
}

// Merge is the config an update stores: incoming, except that a secret
// incoming omits or sends as Mask keeps its stored value (and is dropped
// when there is none: the mask is not a value).
//
// The mask stands for "the value you stored, sent where you said": when
// the update changes an endpoint ("x-endpoint"), a secret it would keep is
// refused with a *KeptSecretsError, and the update must send the secrets
// again. Otherwise whoever may edit the config could point the endpoint at
// a listener of their own and have the plugin deliver the stored secrets
// there (a test_config call is enough).
func (s *Schema) Merge(stored, incoming map[string]any) (map[string]any, error) {
	out := deepCopy(incoming)
	var kept [][]string
	for _, p := range s.secrets {
		v, ok := lookup(out, p)
		if ok && v != Mask {
			continue
		}
		if old, had := lookup(stored, p); had {
			set(out, p, old)
			if _, present := lookup(out, p); present && old != nil && old != "" {
				kept = append(kept, p)
			}
		} else if ok {
			remove(out, p)
		}
	}
	if len(kept) > 0 {
		if changed := s.changedEndpoints(stored, out); len(changed) > 0 {
			return nil, &KeptSecretsError{Endpoints: changed, Secrets: kept}
		}
	}
	return out, nil
}

// ChangedEndpoints names the endpoints whose value differs between two
// configs (the stored one and the one an update stores), an absent or
// empty value standing for the property's default.
func (s *Schema) ChangedEndpoints(before, after map[string]any) []string {
	return dotted(s.changedEndpoints(before, after))
}

func (s *Schema) changedEndpoints(before, after map[string]any) [][]string {
	var out [][]string
	for _, e := range s.endpoints {
		if e.value(before) != e.value(after) {
			out = append(out, e.path)
		}
	}
	return out
}

// value is the endpoint's value in config as text; absent, null or empty
// is the default.
func (e endpoint) value(config map[string]any) string {
	v, ok := lookup(config, e.path)
	if !ok || v == nil || v == "" {
		return e.def
	}
	if str, isStr := v.(string); isStr {
		return str
	}
	return fmt.Sprintf("%T %v", v, v) // not a string: the schema refuses it, and it is no default
}

// SecretsSent names the secrets an update replaces: those incoming sends
// with a value of their own, not the mask (an empty one clears it).
func (s *Schema) SecretsSent(incoming map[string]any) []string {
	var out []string
	for _, p := range s.secrets {
		if v, ok := lookup(incoming, p); ok && v != Mask {
			out = append(out, strings.Join(p, "."))
		}
	}
	return out
}

// KeptSecretsError refuses an update that changes an endpoint and keeps a
// stored secret (omitted or sent as the mask). It names paths, never a
// value.
type KeptSecretsError struct {
	// Endpoints changed; Secrets would have been kept.
	Endpoints, Secrets [][]string
}

func (e *KeptSecretsError) Error() string { return e.Message(configKey) }

// Message is the refusal with each property named by name (configKey:
// "config.api_url"; a product's settings name them "provider_config.…").
func (e *KeptSecretsError) Message(name func(path []string) string) string {
	names := func(paths [][]string) string {
		out := make([]string, len(paths))
		for i, p := range paths {
			out[i] = name(p)
		}
		return strings.Join(out, ", ")
	}
	return fmt.Sprintf("%s changed, and the stored secrets are sent there: send %s again in the same update (the mask %s keeps a stored secret only while the endpoints stay the same)",
		names(e.Endpoints), names(e.Secrets), Mask)
}

func dotted(paths [][]string) []string {
	out := make([]string, len(paths))
	for i, p := range paths {
		out[i] = strings.Join(p, ".")
	}
	return out
}

// MaskSent names the secrets of a new config that carry the mask itself:
// there is no stored value for it to stand for.
func (s *Schema) MaskSent(config map[string]any) []string {
	var out []string
	for _, p := range s.secrets {
		if v, ok := lookup(config, p); ok && v == Mask {
			out = append(out, configKey(p)+": "+Mask+" is the mask, not a value")
		}
	}
	return out
}

func lookup(m map[string]any, path []string) (any, bool) {
	cur := m
	for i, k := range path {
		v, ok := cur[k]
		if !ok {
			return nil, false
		}
		if i == len(path)-1 {
			return v, true
		}
		if cur, ok = v.(map[string]any); !ok {
			return nil, false
		}
	}
	return nil, false
}

// set assigns path's value when its parent object exists (a secret whose
// parent the update omitted stays omitted).
func set(m map[string]any, path []string, v any) {
	parent := m
	for _, k := range path[:len(path)-1] {
		next, ok := parent[k].(map[string]any)
		if !ok {
			return
		}
		parent = next
	}
	parent[path[len(path)-1]] = v
}

func remove(m map[string]any, path []string) {
	parent := m
	for _, k := range path[:len(path)-1] {
		next, ok := parent[k].(map[string]any)
		if !ok {
			return
		}
		parent = next
	}
	delete(parent, path[len(path)-1])
}

func deepCopy(m map[string]any) map[string]any {
	out := make(map[string]any, len(m))
	for k, v := range m {
		out[k] = deepCopyValue(v)
	}
	return out
}

func deepCopyValue(v any) any {
	switch x := v.(type) {
	case map[string]any:
		return deepCopy(x)
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = deepCopyValue(e)
		}
		return out
	}
	return v
}

// configKey names a config location as the errors do: "config",
// "config.key", "config.auth.token".
func configKey(path []string) string {
	if len(path) == 0 {
		return "config"
	}
	return "config." + strings.Join(path, ".")
}

func pointer(path []string) string {
	if len(path) == 0 {
		return "the root"
	}
	return "/" + strings.Join(path, "/")
}
