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
// secret properties. It is immutable.
type Schema struct {
	compiled *jsonschema.Schema
	// secrets are the paths of properties marked "x-secret": true, reached
	// from the root through "properties" only (e.g. ["key"], ["auth",
	// "token"]), sorted.
	secrets [][]string
}

// Parse compiles a JSON Schema (draft 2020-12 unless it says
// otherwise). It refuses what it cannot honour safely: a schema that is not
// an object, a reference to anything outside the document (no file or
// network is ever read), and "x-secret" anywhere but on a string property
// reached through "properties" — a secret the masking cannot find would be
// shown to everyone who reads the config.
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
	secrets, err := secretPaths(obj)
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
	return &Schema{compiled: compiled, secrets: secrets}, nil
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

func secretPaths(root map[string]any) ([][]string, error) {
	var out [][]string
	var walk func(node any, path []string, viaProperties bool) error
	walk = func(node any, path []string, viaProperties bool) error {
		switch n := node.(type) {
		case map[string]any:
			if v, ok := n["x-secret"]; ok {
				secret, isBool := v.(bool)
				switch {
				case !isBool:
					return fmt.Errorf("config schema: x-secret at %s must be true or false", pointer(path))
				case secret && (!viaProperties || len(path) == 0):
					return fmt.Errorf("config schema: x-secret is supported only on properties reached through \"properties\" from the root; found under %s", pointer(path))
				case secret && n["type"] != "string":
					return fmt.Errorf("config schema: secret property %s must have \"type\": \"string\"", configKey(path))
				case secret:
					out = append(out, slices.Clone(path))
				}
			}
			for k, v := range n {
				switch {
				case k == "x-secret" || dataKeywords[k]:
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
		return nil, err
	}
	slices.SortFunc(out, func(a, b []string) int { return slices.Compare(a, b) })
	return out, nil
}

// Secrets returns the dotted names of the secret properties ("key",
// "auth.token").
func (s *Schema) Secrets() []string {
	out := make([]string, len(s.secrets))
	for i, p := range s.secrets {
		out[i] = strings.Join(p, ".")
	}
	return out
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
func (s *Schema) Merge(stored, incoming map[string]any) map[string]any {
	out := deepCopy(incoming)
	for _, p := range s.secrets {
		v, ok := lookup(out, p)
		if ok && v != Mask {
			continue
		}
		if old, had := lookup(stored, p); had {
			set(out, p, old)
		} else if ok {
			remove(out, p)
		}
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
