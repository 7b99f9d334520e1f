package secrets

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
)

// Secrets at rest in a plugin's config (a JSON object: a gateway
// interface's config, a product's provider settings, an order's frozen copy
// of them): every non-empty secret is stored sealed and bound to its owner
// and the property's path, so a sealed value moved to another owner or
// property does not open. Sealing follows a schema (its "x-secret"
// properties); opening follows the values (whatever is sealed is opened,
// wherever it is), so a schema that stops calling a property secret never
// hands its ciphertext to a plugin.

// Owner is what a config's secrets belong to: the kind of row and its id,
// bound into each value's associated data; Field names the config in
// messages ("config", "provider_config").
type Owner struct {
	Kind  string
	ID    uuid.UUID
	Field string
}

// AAD is the associated data of the value at path of o's config. The path
// is JSON so that {"a.b": …} and {"a": {"b": …}} differ.
func (o Owner) AAD(path []string) []byte {
	p, _ := json.Marshal(path)
	return []byte("paymentd " + o.Kind + " " + o.ID.String() + " config " + string(p))
}

// String is "<kind in words> <id>" ("gateway interface 0b1…").
func (o Owner) String() string { return strings.ReplaceAll(o.Kind, "_", " ") + " " + o.ID.String() }

// Path names the value at path in messages ("config.key").
func (o Owner) Path(path []string) string {
	field := o.Field
	if field == "" {
		field = "config"
	}
	return field + "." + strings.Join(path, ".")
}

// VisitStrings calls fn with every string reached from cfg through objects
// (not arrays: secrets are reached through "properties" only, and
// SealedLooking refuses a sealed-looking string anywhere) and its path.
// When fn answers replace, the value is replaced in cfg.
func VisitStrings(cfg map[string]any, fn func(path []string, v string) (string, bool)) {
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

// ContainsSealed reports cheaply whether raw (a stored config) may hold a
// sealed value: PostgreSQL writes jsonb strings without escaping letters.
func ContainsSealed(raw []byte) bool { return bytes.Contains(raw, []byte(`"`+Prefix)) }

// DecodeConfig decodes a stored config: a JSON object, numbers kept as
// written.
func DecodeConfig(raw []byte) (map[string]any, error) {
	var m map[string]any
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if err := dec.Decode(&m); err != nil {
		return nil, err
	}
	if m == nil {
		return nil, errors.New("not a JSON object")
	}
	return m, nil
}

// UnreadableError says which sealed values of an owner's config do not
// open, and why (key id and kind of failure; never a value).
type UnreadableError struct {
	Owner    Owner
	Problems []string
}

func (e *UnreadableError) Error() string {
	return fmt.Sprintf("%s: secrets that do not decrypt: %s", e.Owner, strings.Join(e.Problems, "; "))
}

// OpenConfig returns a copy of cfg with every sealed value opened, or an
// *UnreadableError naming each one that does not open (nothing is
// returned half-opened).
func (k *Keyring) OpenConfig(o Owner, cfg map[string]any) (map[string]any, error) {
	out, failed := k.OpenConfigLenient(o, cfg)
	if len(failed) > 0 {
		return nil, &UnreadableError{Owner: o, Problems: failed}
	}
	return out, nil
}

// OpenConfigLenient opens what opens: the sealed values that do not stay
// sealed in the copy, and failed names them ("config.key: key "k1": …").
func (k *Keyring) OpenConfigLenient(o Owner, cfg map[string]any) (map[string]any, []string) {
	out := DeepCopy(cfg)
	var failed []string
	VisitStrings(out, func(path []string, v string) (string, bool) {
		if !IsSealed(v) {
			return "", false
		}
		plain, err := k.Open(v, o.AAD(path))
		if err != nil {
			failed = append(failed, o.Path(path)+": "+err.Error())
			return "", false
		}
		return plain, true
	})
	return out, failed
}

// OpenRaw is OpenConfig of a stored config, as JSON: the config a plugin is
// called with. A config without sealed values is returned as stored.
func (k *Keyring) OpenRaw(o Owner, raw []byte) (string, error) {
	if !ContainsSealed(raw) {
		return string(raw), nil
	}
	cfg, err := DecodeConfig(raw)
	if err != nil {
		return "", fmt.Errorf("%s: stored %s is not a JSON object: %w", o, o.Path(nil), err)
	}
	opened, err := k.OpenConfig(o, cfg)
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
var errNoKeyForSecrets = fmt.Errorf("no [secrets] key is configured: %w", ErrNoKey)

// SealConfig returns a copy of cfg (clear, as an admin sent it) with every
// non-empty value at one of secretPaths sealed for o under the current
// key. Without a keyring a config with a secret is refused
// (FailedPrecondition): the service stores no secret in clear.
func (k *Keyring) SealConfig(o Owner, secretPaths [][]string, cfg map[string]any) (map[string]any, error) {
	out := DeepCopy(cfg)
	var err error
	VisitStrings(out, func(path []string, v string) (string, bool) {
		if err != nil || v == "" || !isSecretPath(secretPaths, path) {
			return "", false
		}
		if k == nil {
			err = apperr.Wrap(apperr.FailedPrecondition, errNoKeyForSecrets,
				"%s is a secret, and the service stores secrets only encrypted: configure [secrets].current and [secrets].keys (docs/operations.md, \"Secrets at rest\")", o.Path(path))
			return "", false
		}
		sealed, serr := k.Seal(v, o.AAD(path))
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

func isSecretPath(secretPaths [][]string, path []string) bool {
	return slices.ContainsFunc(secretPaths, func(p []string) bool { return slices.Equal(p, path) })
}

// SealedLooking names the values of an admin's config that look sealed
// (field: "config", "provider_config"). The API takes clear values only: a
// sealed value is something the service writes, and one sent in (copied
// from a database dump, forged) would be stored as if it were the
// service's own.
func SealedLooking(field string, cfg map[string]any) []string {
	var out []string
	var walk func(v any, path []string)
	walk = func(v any, path []string) {
		switch x := v.(type) {
		case string:
			if IsSealed(x) {
				out = append(out, Owner{Field: field}.Path(path)+": a value may not start with \""+Prefix+"\" (the form of an encrypted secret; send the clear value)")
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

// MaskSealed replaces every sealed value left in a (schema-masked) config
// by mask: a property that held a secret under an earlier schema shows no
// ciphertext either.
func MaskSealed(cfg map[string]any, mask string) map[string]any {
	VisitStrings(cfg, func(_ []string, v string) (string, bool) {
		return mask, IsSealed(v)
	})
	return cfg
}

// DeepCopy copies the objects of m; arrays and other values are shared
// (they are never written to).
func DeepCopy(m map[string]any) map[string]any {
	out := make(map[string]any, len(m))
	for k, v := range m {
		if sub, ok := v.(map[string]any); ok {
			out[k] = DeepCopy(sub)
		} else {
			out[k] = v
		}
	}
	return out
}

// MergeUpdate is the config an update of o's config (stored) leads to, in
// clear: the stored config opened, and incoming laid over it by merge (a
// schema's Merge: a secret incoming omits or masks keeps its stored value).
// A kept secret that does not open is refused (FailedPrecondition, naming
// it): the admin sends its value again. So is a kept secret of an update
// that changes an endpoint (InvalidArgument, naming both: see
// configschema.Schema.Merge).
func (k *Keyring) MergeUpdate(o Owner, stored, incoming map[string]any, merge func(stored, incoming map[string]any) (map[string]any, error)) (map[string]any, error) {
	opened, unreadable := k.OpenConfigLenient(o, stored)
	merged, err := merge(opened, incoming)
	if err != nil {
		var moved *configschema.KeptSecretsError
		if errors.As(err, &moved) {
			return nil, apperr.Wrap(apperr.InvalidArgument, err, "%s", moved.Message(o.Path))
		}
		return nil, err
	}
	var kept []string
	VisitStrings(merged, func(path []string, v string) (string, bool) {
		if IsSealed(v) {
			kept = append(kept, o.Path(path)+": the stored secret does not decrypt with the keys of [secrets]; send its value again")
		}
		return "", false
	})
	if len(kept) > 0 {
		return nil, apperr.Wrap(apperr.FailedPrecondition, errors.New(strings.Join(unreadable, "; ")), "%s", strings.Join(kept, "; "))
	}
	return merged, nil
}
