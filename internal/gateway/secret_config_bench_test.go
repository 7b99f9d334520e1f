package gateway

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/google/uuid"

	"github.com/rustbill/paymentd/internal/configschema"
	"github.com/rustbill/paymentd/internal/secrets"
)

// BenchmarkOpenRawEpayConfig is what Registry.Get adds to every callback,
// payment creation and status query: opening an epay interface's config
// (one sealed key among three values) into the JSON the plugin receives.
// The clear case is the fast path of a config without secrets.
func BenchmarkOpenRawEpayConfig(b *testing.B) {
	k, err := secrets.New("k1", map[string][]byte{"k1": bytes.Repeat([]byte{1}, secrets.KeySize)})
	if err != nil {
		b.Fatal(err)
	}
	schema, err := configschema.Parse([]byte(`{"type": "object", "properties": {"key": {"type": "string", "x-secret": true}}}`))
	if err != nil {
		b.Fatal(err)
	}
	id := uuid.New()
	clear := map[string]any{"api_url": "https://pay.example.com/", "pid": "1001", "key": "0123456789abcdef0123456789abcdef"}
	sealed, err := sealConfig(k, id, schema, clear)
	if err != nil {
		b.Fatal(err)
	}
	for name, cfg := range map[string]map[string]any{"sealed": sealed, "clear": {"api_url": "https://pay.example.com/", "pid": "1001"}} {
		raw, err := json.Marshal(cfg)
		if err != nil {
			b.Fatal(err)
		}
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := openRaw(k, id, raw); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
