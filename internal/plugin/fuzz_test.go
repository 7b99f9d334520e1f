package plugin

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/rustbill/paymentd/internal/testkit"
)

// fuzzGateway calls the host function named by the input with up to five
// arguments of the kinds given (string, nil, number, table, boolean), in
// pcall, and reports what came back.
var fuzzGateway = gatewaySource(`
function test_config(c, i)
  local a = json_decode(i)
  local args = {}
  for k = 1, a.n do
    local kind, v = a.kinds[k], a.args[k]
    if kind == "nil" then v = nil
    elseif kind == "number" then v = #v
    elseif kind == "table" then v = {v, x = v}
    elseif kind == "bool" then v = (#v % 2 == 0)
    end
    args[k] = v
  end
  local ok, res = pcall(_G[a.f], unpack(args, 1, a.n))
  return json_encode({ok = ok, res = tostring(res)})
end
`)

// fuzzHostFunctions are the host functions the fuzzer calls: all but
// http_mtls, which dials for real (its argument checks run before the dial
// and are covered by http_test.go).
var fuzzHostFunctions = []string{
	"log", "http_get", "http_post", "http_post_headers", "http_post_binary",
	"md5", "sha256", "hmac_sha256", "base64_encode", "base64_decode",
	"urlencode", "urldecode", "json_encode", "json_decode", "parse_query", "now",
	// Appended, so the indexes of the seeds above keep their functions.
	"rsa_sha256_sign", "rsa_sha256_verify", "aes_256_gcm_decrypt", "constant_time_equals", "now_unix",
	"clip",
	"str", "snippet", "json_table", "form_encode",
	"sign_string", "format_time",
}

var fuzzKinds = []string{"string", "nil", "number", "table", "bool"}

// FuzzHostFunctionArguments calls every host function with arbitrary
// arguments — wrong counts, wrong types, hostile strings — and requires
// that nothing panics the process, every failure is a Lua error the script
// can catch (or a typed CallError when a limit trips), and the plugin keeps
// working afterwards.
func FuzzHostFunctionArguments(f *testing.F) {
	f.Add(uint8(0), uint8(2), uint8(0), "info", "hello", "", "", "")
	f.Add(uint8(2), uint8(4), uint8(0), "http://127.0.0.1:1/x", "body", "text/plain", `{"timeout_ms":5,"retry":true}`, "")
	f.Add(uint8(4), uint8(5), uint8(0), "http://h/", "!!notbase64", "a/b", `{"X":"1"}`, `{"timeout_ms":-1}`)
	f.Add(uint8(9), uint8(1), uint8(0), "\xff\xfe", "", "", "", "")
	f.Add(uint8(13), uint8(1), uint8(0), `{"a":[1,2,{"b":null}],"c":"\ud800"}`, "", "", "", "")
	f.Add(uint8(13), uint8(1), uint8(0), `[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[`, "", "", "", "")
	f.Add(uint8(14), uint8(1), uint8(0), "a=1&a=2&%zz=%&b", "", "", "", "")
	f.Add(uint8(7), uint8(2), uint8(17), "key", "msg", "", "", "")
	f.Add(uint8(12), uint8(1), uint8(3), "x", "", "", "", "")
	f.Add(uint8(1), uint8(2), uint8(0), "file:///etc/passwd", `{"Host":"evil"}`, "", "", "")
	f.Add(uint8(2), uint8(4), uint8(0), "http://[::1", "b", "c", "{", "")
	f.Add(uint8(15), uint8(3), uint8(99), "", "", "", "", "")
	// The signing helpers with a real key (testdata), and with junk.
	priv, pub := string(readTestdata(f, "rsa2048_pkcs8.pem")), string(readTestdata(f, "rsa2048_public.pem"))
	f.Add(uint8(16), uint8(2), uint8(0), priv, "message", "", "", "")
	f.Add(uint8(17), uint8(3), uint8(0), pub, "message", "c2ln", "", "")
	f.Add(uint8(17), uint8(3), uint8(0), priv, "message", "c2ln", "", "")
	f.Add(uint8(16), uint8(2), uint8(0), "-----BEGIN RSA PRIVATE KEY-----\nAAAA\n-----END RSA PRIVATE KEY-----", "m", "", "", "")
	f.Add(uint8(18), uint8(4), uint8(0), "0123456789abcdef0123456789abcdef", "nonce_12byte", "ad", "AAAAAAAAAAAAAAAAAAAAAA==", "")
	f.Add(uint8(19), uint8(2), uint8(0), "sig", "sig", "", "", "")
	f.Add(uint8(20), uint8(0), uint8(0), "", "", "", "", "")
	f.Add(uint8(7), uint8(3), uint8(0), "key", "msg", "base64", "", "")
	f.Add(uint8(7), uint8(3), uint8(0), "key", "msg", "binary", "", "")
	// The shared helpers (22 str … 25 form_encode): kinds 2 is a number, 3 a
	// table ({v, x = v}: neither names to values nor pairs), 4 a boolean.
	f.Add(uint8(22), uint8(1), uint8(2), "12345", "", "", "", "")
	f.Add(uint8(23), uint8(1), uint8(0), "\xff\x00"+string(make([]byte, 300)), "", "", "", "")
	f.Add(uint8(24), uint8(1), uint8(0), `{"a":[1,{"b":null}]} x`, "", "", "", "")
	f.Add(uint8(24), uint8(1), uint8(3), `[1]`, "", "", "", "")
	f.Add(uint8(25), uint8(1), uint8(3), "a b&c=d", "", "", "", "")
	f.Add(uint8(25), uint8(2), uint8(4), "", "", "", "", "")

	b := &bundle{logs: &testkit.Logs{}}
	b.opts = Options{
		// No network: every request gets a fixed answer.
		HTTP: HTTPDoerFunc(func(r *http.Request, _ bool) (*Response, error) {
			return &Response{Status: 200, Header: http.Header{"X": {"y"}}, Body: []byte(`{"ok":true}`)}, nil
		}),
		Limits: Limits{CallTimeout: 2 * time.Second},
	}
	b.rt = NewRuntime(b.opts)
	sc, err := Compile("fuzz", Gateway, fuzzGateway)
	if err != nil {
		f.Fatal(err)
	}
	p := b.rt.Load(sc)
	f.Cleanup(p.Close)

	f.Fuzz(func(t *testing.T, fn, n, kinds uint8, a1, a2, a3, a4, a5 string) {
		name := fuzzHostFunctions[int(fn)%len(fuzzHostFunctions)]
		count := int(n % 7) // 0..6: one more than allowed, too
		ks := make([]string, 6)
		for i := range ks {
			ks[i] = fuzzKinds[(int(kinds)>>i)%len(fuzzKinds)]
		}
		in, err := json.Marshal(map[string]any{
			"f": name, "n": count, "kinds": ks, "args": []string{a1, a2, a3, a4, a5, a5},
		})
		if err != nil {
			return
		}
		out, err := p.Call(context.Background(), "test_config", "{}", string(in))
		if err != nil {
			var ce *CallError
			if !errors.As(err, &ce) {
				t.Fatalf("%s: an error that is not a CallError: %v", name, err)
			}
			switch ce.Kind {
			case KindBudget, KindMemory, KindTimeout, KindScriptError:
			default:
				t.Fatalf("%s: %v", name, err)
			}
		} else {
			var res struct {
				OK  bool   `json:"ok"`
				Res string `json:"res"`
			}
			if err := json.Unmarshal([]byte(out), &res); err != nil {
				t.Fatalf("%s answered %q: %v", name, out, err)
			}
		}
		// The plugin still works.
		if _, err := p.Call(context.Background(), "test_config", "{}", `{"f":"md5","n":1,"kinds":["string"],"args":["x"]}`); err != nil {
			t.Fatalf("after %s the plugin is broken: %v", name, err)
		}
	})
}
