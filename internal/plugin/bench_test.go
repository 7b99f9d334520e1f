package plugin

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
)

func benchPlugin(b *testing.B, src []byte) *Plugin {
	b.Helper()
	sc, err := Compile("bench", Gateway, src)
	if err != nil {
		b.Fatal(err)
	}
	p := NewRuntime(Options{}).Load(sc)
	b.Cleanup(p.Close)
	return p
}

func benchGateway(b *testing.B) *Plugin {
	b.Helper()
	src, err := os.ReadFile(filepath.Join("testdata", "gateway.lua"))
	if err != nil {
		b.Fatal(err)
	}
	return benchPlugin(b, src)
}

// BenchmarkCreatePayment: testdata/gateway.lua's create_payment (decode the
// config and the input, md5 signature, json_encode of the answer) through
// the pool, one call at a time.
func BenchmarkCreatePayment(b *testing.B) {
	p := benchGateway(b)
	ctx := context.Background()
	in := paymentInput("pay_0001")
	b.ReportAllocs()
	for b.Loop() {
		if _, err := p.Call(ctx, "create_payment", benchConfig, in); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkCreatePaymentParallel: the same from GOMAXPROCS goroutines.
func BenchmarkCreatePaymentParallel(b *testing.B) {
	p := benchGateway(b)
	ctx := context.Background()
	in := paymentInput("pay_0001")
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := p.Call(ctx, "create_payment", benchConfig, in); err != nil {
				b.Error(err)
				return
			}
		}
	})
}

// BenchmarkCallOverhead is what the runtime itself costs per call: a
// function returning a constant string.
func BenchmarkCallOverhead(b *testing.B) {
	p := benchPlugin(b, gatewaySource(`function test_config(c, i) return "{}" end`))
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := p.Call(ctx, "test_config", "{}", "{}"); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkRSASHA256: one RSA2 signature and one verification (2048-bit
// keys of testdata, cached after the first call) from a script, the
// Alipay plugin's per-request cost.
func BenchmarkRSASHA256(b *testing.B) {
	priv, pub := string(readTestdata(b, "rsa2048_pkcs8.pem")), string(readTestdata(b, "rsa2048_public.pem"))
	p := benchPlugin(b, gatewaySource(`function test_config(c, i)
		local k = json_decode(i)
		local msg = "app_id=2021000000000000&biz_content={}&charset=utf-8&method=alipay.trade.query&timestamp=2026-11-25 18:00:00&version=1.0"
		local sig = rsa_sha256_sign(k.priv, msg)
		return json_encode({ok = rsa_sha256_verify(k.pub, msg, sig)})
	end`))
	in, _ := json.Marshal(map[string]string{"priv": priv, "pub": pub})
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if out, err := p.Call(ctx, "test_config", "{}", string(in)); err != nil || out != `{"ok":true}` {
			b.Fatal(err, out)
		}
	}
}
