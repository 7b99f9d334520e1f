package configschema_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/rustbill/paymentd/internal/configschema"
)

// FuzzConfigSchema feeds arbitrary JSON as a plugin's config_schema() answer
// and an arbitrary config: parsing refuses or compiles, never panics, never
// loads anything from outside; and with a schema that compiles, a secret's
// value never survives masking — not in the masked config, not in a
// validation problem.
func FuzzConfigSchema(f *testing.F) {
	f.Add(`{"type":"object","required":["key"],"properties":{"pid":{"type":"string"},"key":{"type":"string","x-secret":true}}}`, `{"pid":"1001","key":"s3cret-value"}`)
	f.Add(`{"type":"object","properties":{"auth":{"type":"object","properties":{"token":{"type":"string","x-secret":true,"minLength":40}}}}}`, `{"auth":{"token":"short-secret"}}`)
	f.Add(`{"type":"object","properties":{"key":{"type":"string","x-secret":true,"enum":["a"]}}}`, `{"key":"not-in-enum-secret"}`)
	f.Add(`{"type":"object","properties":{"key":{"type":"string","x-secret":true,"pattern":"^[0-9]+$"}}}`, `{"key":"letters-secret"}`)
	f.Add(`{"$ref":"http://example.com/schema.json"}`, `{}`)
	f.Add(`{"$ref":"file:///etc/passwd"}`, `{}`)
	f.Add(`{"type":"object","items":{"x-secret":true}}`, `{}`)
	f.Add(`{"properties":{"a":{"$ref":"#/properties/a"}}}`, `{"a":1}`)
	f.Add(`[]`, `[]`)
	f.Add(`{"type":"object","properties":{"k":{"type":"string","format":"uri","x-secret":true}}}`, `{"k":"::not a uri secret"}`)
	f.Fuzz(func(t *testing.T, schema, config string) {
		s, err := configschema.Parse([]byte(schema))
		if err != nil {
			return
		}
		var cfg map[string]any
		if json.Unmarshal([]byte(config), &cfg) != nil || cfg == nil {
			return
		}
		problems := s.Problems(cfg)
		masked := s.Mask(cfg)
		if _, err := s.Merge(cfg, masked); err != nil {
			t.Fatalf("sending back what a read shows is refused: %v", err)
		}
		_ = s.MaskSent(cfg)
		out, _ := json.Marshal(masked)
		for _, name := range s.Secrets() {
			v, ok := dig(cfg, strings.Split(name, "."))
			str, isString := v.(string)
			if !ok || !isString || len(str) < 6 || str == configschema.Mask {
				continue
			}
			if strings.Contains(string(out), str) && !appearsElsewhere(cfg, name, str) {
				t.Fatalf("secret %s survives masking: %s", name, out)
			}
			for _, p := range problems {
				if strings.Contains(p, str) && !appearsElsewhere(cfg, name, str) && !inWording(s, config, name, str) {
					t.Fatalf("a problem quotes secret %s: %q", name, p)
				}
			}
		}
	})
}

// inWording reports whether str is in the problems' own words rather than
// quoted from the config: it is still there when the secret at name is
// replaced by another text of its length (a secret "secret" and the
// message's "(secret value not shown)").
func inWording(s *configschema.Schema, config, name, str string) bool {
	var alt map[string]any
	if json.Unmarshal([]byte(config), &alt) != nil {
		return false
	}
	path := strings.Split(name, ".")
	parent := alt
	for _, k := range path[:len(path)-1] {
		next, ok := parent[k].(map[string]any)
		if !ok {
			return false
		}
		parent = next
	}
	parent[path[len(path)-1]] = strings.Repeat("Z", len(str))
	for _, p := range s.Problems(alt) {
		if strings.Contains(p, str) {
			return true
		}
	}
	return false
}

func dig(m map[string]any, path []string) (any, bool) {
	var cur any = m
	for _, p := range path {
		mm, ok := cur.(map[string]any)
		if !ok {
			return nil, false
		}
		if cur, ok = mm[p]; !ok {
			return nil, false
		}
	}
	return cur, true
}

// appearsElsewhere reports whether value is also found outside the secret
// (the fuzzer may put the same text in a public field or a key name).
func appearsElsewhere(cfg map[string]any, secret, value string) bool {
	var walk func(prefix string, v any) bool
	walk = func(prefix string, v any) bool {
		switch x := v.(type) {
		case map[string]any:
			for k, vv := range x {
				if strings.Contains(k, value) {
					return true
				}
				name := k
				if prefix != "" {
					name = prefix + "." + k
				}
				if walk(name, vv) {
					return true
				}
			}
		case []any:
			for i, vv := range x {
				if walk(fmt.Sprintf("%s[%d]", prefix, i), vv) {
					return true
				}
			}
		default:
			return prefix != secret && strings.Contains(fmt.Sprint(x), value)
		}
		return false
	}
	return walk("", cfg)
}
