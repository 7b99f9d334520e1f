package gateway

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/google/uuid"

	"github.com/rustbill/paymentd/internal/apperr"
	"github.com/rustbill/paymentd/internal/configschema"
	"github.com/rustbill/paymentd/internal/secrets"
)

// Secrets at rest (doc.go, "Gateway interfaces and secrets"): every
// non-empty secret of an interface's config is stored sealed
// (secrets.Keyring) and bound to the interface id and the property's path,
// so a sealed value moved to another interface or property does not open.
// Sealing follows the interface's schema (its "x-secret" properties);
// opening follows the values (whatever is sealed is opened, wherever it
// is), so a schema that stops calling a property secret never hands its
// ciphertext to a plugin.

// secretAAD is the associated data of the value at path of interface id.
// The path is JSON so that {"a.b": …} and {"a": {"b": …}} differ.
func secretAAD(id uuid.UUID, path []string) []byte {
	p, _ := json.Marshal(path)
	return []byte("paymentd gateway_interface " + id.String() + " config " + string(p))
}

// visitStrings calls fn with every string reached from cfg through objects
// (not arrays: secrets are reached through "properties" only, and the input
// check refuses a sealed-looking string anywhere) and its path. When fn
// answers replace, the value is replaced in cfg.
func visitStrings(cfg map[string]any, fn func(path []string, v string) (string, bool)) {
	var walk func(m map[string]any, path []string)
	walk = func(m map[string]any, path []string) {
		for _, k := range sortedKeys(m) {
			p := append(slices.Clip(path), k)
			switch v := m[k].(type) {
			case string:
				if nv, replace := fn(p, v); replace {
					m[k] = nv
				}
			case map[string]any:
				walk(v, p)
			}
		}
	}
	walk(cfg, nil)
}

func sortedKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

func configPath(path []string) string { return "config." + strings.Join(path, ".") }

// containsSealed reports cheaply whether raw (a stored config) may hold a
// sealed value: PostgreSQL writes jsonb strings without escaping letters.
func containsSealed(raw []byte) bool { return bytes.Contains(raw, []byte(`"`+secrets.Prefix)) }

// unreadableError says which sealed values of an interface's config do not
// open, and why (key id and kind of failure; never a value).
type unreadableError struct {
	id       uuid.UUID
	problems []string
}

func (e *unreadableError) Error() string {
	return fmt.Sprintf("gateway interface %s: secrets that do not decrypt: %s", e.id, strings.Join(e.problems, "; "))
}

// openConfig returns a copy of cfg with every sealed value opened, or an
// *unreadableError naming each one that does not open (nothing is
// returned half-opened).
func openConfig(k *secrets.Keyring, id uuid.UUID, cfg map[string]any) (map[string]any, error) {
	out, failed := openConfigLenient(k, id, cfg)
	if len(failed) > 0 {
		return nil, &unreadableError{id: id, problems: failed}
	}
	return out, nil
}

// openConfigLenient opens what opens: the sealed values that do not stay
// sealed in the copy, and failed names them ("config.key: key "k1": …").
func openConfigLenient(k *secrets.Keyring, id uuid.UUID, cfg map[string]any) (map[string]any, []string) {
	out := deepCopy(cfg)
	var failed []string
	visitStrings(out, func(path []string, v string) (string, bool) {
		if !secrets.IsSealed(v) {
			return "", false
		}
		plain, err := k.Open(v, secretAAD(id, path))
		if err != nil {
			failed = append(failed, configPath(path)+": "+err.Error())
			return "", false
		}
		return plain, true
	})
	return out, failed
}

// openRaw is openConfig of a stored config, as JSON: the config a plugin
// is called with. A config without sealed values is returned as stored.
func openRaw(k *secrets.Keyring, id uuid.UUID, raw []byte) (string, error) {
	if !containsSealed(raw) {
		return string(raw), nil
	}
	cfg, err := decodeConfig(raw)
	if err != nil {
		return "", fmt.Errorf("gateway interface %s: stored config is not a JSON object: %w", id, err)
	}
	opened, err := openConfig(k, id, cfg)
	if err != nil {
		return "", err
	}
	out, err := json.Marshal(opened)
	if err != nil {
		return "", err
	}
	return string(out), nil
}

// errNoKeyForSecrets: a config with secrets, and no key to seal them with.
var errNoKeyForSecrets = errors.New("no [secrets] key is configured")

// sealConfig returns a copy of cfg (clear, as an admin sent it) with every
// non-empty secret of schema sealed for interface id under the current key.
// Without a keyring a config with a secret is refused: the service stores
// no secret in clear.
func sealConfig(k *secrets.Keyring, id uuid.UUID, schema *configschema.Schema, cfg map[string]any) (map[string]any, error) {
	out := deepCopy(cfg)
	secretPaths := schema.SecretPaths()
	var err error
	visitStrings(out, func(path []string, v string) (string, bool) {
		if err != nil || v == "" || !slices.ContainsFunc(secretPaths, func(p []string) bool { return slices.Equal(p, path) }) {
			return "", false
		}
		if k == nil {
			err = apperr.Wrap(apperr.FailedPrecondition, errNoKeyForSecrets,
				"%s is a secret, and the service stores secrets only encrypted: configure [secrets].current and [secrets].keys (docs/operations.md, \"Secrets at rest\")", configPath(path))
			return "", false
		}
		sealed, serr := k.Seal(v, secretAAD(id, path))
		if serr != nil {
			err = serr
			return "", false
		}
		return sealed, true
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// sealedLooking names the values of an admin's config that look sealed. The
// API takes clear values only: a sealed value is something the service
// writes, and one sent in (copied from a database dump, forged) would be
// stored as if it were the service's own.
func sealedLooking(cfg map[string]any) []string {
	var out []string
	var walk func(v any, path []string)
	walk = func(v any, path []string) {
		switch x := v.(type) {
		case string:
			if secrets.IsSealed(x) {
				out = append(out, configPath(path)+": a value may not start with \""+secrets.Prefix+"\" (the form of an encrypted secret; send the clear value)")
			}
		case map[string]any:
			for _, k := range sortedKeys(x) {
				walk(x[k], append(slices.Clip(path), k))
			}
		case []any:
			for i, e := range x {
				walk(e, append(slices.Clip(path), fmt.Sprint(i)))
			}
		}
	}
	walk(cfg, nil)
	return out
}

// maskSealed replaces every sealed value left in a (schema-masked) config
// by the mask: a property that held a secret under an earlier schema shows
// no ciphertext either.
func maskSealed(cfg map[string]any) map[string]any {
	visitStrings(cfg, func(_ []string, v string) (string, bool) {
		return configschema.Mask, secrets.IsSealed(v)
	})
	return cfg
}

func deepCopy(m map[string]any) map[string]any {
	out := make(map[string]any, len(m))
	for k, v := range m {
		if sub, ok := v.(map[string]any); ok {
			out[k] = deepCopy(sub)
		} else {
			out[k] = v // arrays are never written to
		}
	}
	return out
}
