package plugin

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestDigestsGiveKnownAnswers(t *testing.T) {
	t.Parallel()
	got := setup(t).runOK(t, `return json_encode({
		md5_empty = md5(""),
		md5_abc = md5("abc"),
		sha256_abc = sha256("abc"),
		hmac = hmac_sha256("key", "The quick brown fox jumps over the lazy dog"),
		hmac_empty = hmac_sha256("", ""),
	})`)
	require.Equal(t, map[string]any{
		"md5_empty":  "d41d8cd98f00b204e9800998ecf8427e",
		"md5_abc":    "900150983cd24fb0d6963f7d28e17f72",
		"sha256_abc": "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad",
		"hmac":       "f7bc83f430538424b13298e6aa6fb143ef4d59a14946175997479dbc2d1a3cd8",
		"hmac_empty": "b613679a0814d9ec772f95d778c35fc5ff1697c493715653c6c712144292c5ad",
	}, got)
}

func TestEncodingsRoundTrip(t *testing.T) {
	t.Parallel()
	got := setup(t).runOK(t, `
		local raw = "a b&c=d/é+%"
		local enc = urlencode(raw)
		local b64 = base64_encode("\0\1binary\255")
		return json_encode({
			enc = enc,
			dec = urldecode(enc),
			plus = urldecode("a+b%20c"),
			b64 = b64,
			back = base64_decode(b64) == "\0\1binary\255",
		})`)
	require.Equal(t, map[string]any{
		"enc":  "a+b%26c%3Dd%2F%C3%A9%2B%25",
		"dec":  "a b&c=d/é+%",
		"plus": "a b c",
		"b64":  "AAFiaW5hcnn/",
		"back": true,
	}, got)
}

func TestParseQueryKeepsRawValuesAndTheFirstOfRepeatedKeys(t *testing.T) {
	t.Parallel()
	got := setup(t).runOK(t, `
		local p = parse_query("money=1.00&name=VIP%20%E4%BC%9A&a=1&a=2&empty=&flag&sign=AbC+x&&=skipped")
		return json_encode(p)`)
	require.Equal(t, map[string]any{
		"money": "1.00",
		"name":  "VIP%20%E4%BC%9A",
		"a":     "1",
		"empty": "",
		"flag":  "",
		"sign":  "AbC+x",
	}, got)
}

func TestJSONRoundTrip(t *testing.T) {
	t.Parallel()
	got := setup(t).runOK(t, `
		local doc = '{"s":"x\\"y\\u00e9\\ud83d\\ude00","n":12.5,"i":-3,"big":1e21,"t":true,"f":false,"z":null,' ..
			'"arr":[1,"two",{"three":3},[]],"obj":{"nested":{"deep":[{}]}},"empty":{}}'
		local v = json_decode(doc)
		local again = json_decode(json_encode(v))
		return json_encode({
			v = v,
			same = json_encode(again) == json_encode(v),
			ntype = type(v.n), itype = type(v.i),
			z_absent = v.z == nil,
			empty_is_table = type(v.empty) == "table",
			len = #v.arr,
			encoded_empty = json_encode({}),
			encoded_seq = json_encode({"a", "b"}),
			encoded_mixed = json_encode({"a", x = 1}),
			encoded_sparse = json_encode({[1] = "a", [3] = "c"}),
			scalars = json_encode("é\n\t\1<>&") .. json_encode(12) .. json_encode(0.1) .. json_encode(nil) .. json_encode(true),
		})`)
	require.Equal(t, true, got["same"])
	require.Equal(t, "number", got["ntype"])
	require.Equal(t, "number", got["itype"])
	require.Equal(t, true, got["z_absent"])
	require.Equal(t, true, got["empty_is_table"])
	require.Equal(t, float64(4), got["len"])
	require.Equal(t, "{}", got["encoded_empty"])
	require.Equal(t, `["a","b"]`, got["encoded_seq"])
	require.Equal(t, `{"1":"a","x":1}`, got["encoded_mixed"])
	require.Equal(t, `{"1":"a","3":"c"}`, got["encoded_sparse"])
	require.Equal(t, `"é\n\t\u0001<>&"12`+`0.1null`+`true`, got["scalars"])
	want := map[string]any{
		"s": "x\"yé😀", "n": 12.5, "i": float64(-3), "big": 1e21, "t": true, "f": false,
		"arr": []any{float64(1), "two", map[string]any{"three": float64(3)}, map[string]any{}},
		"obj": map[string]any{"nested": map[string]any{"deep": []any{map[string]any{}}}}, "empty": map[string]any{},
	}
	require.Equal(t, want, got["v"])
}

func TestJSONEncodeRefusesWhatJSONCannotHold(t *testing.T) {
	t.Parallel()
	b := setup(t)
	for code, want := range map[string]string{
		`local t = {} t.self = t return json_encode(t)`:                    "cycle",
		`local t = {a = {}} t.a.b = {t} return json_encode(t)`:             "cycle",
		`return json_encode({f = print})`:                                  "cannot encode a function",
		`return json_encode({[true] = 1})`:                                 "cannot use a boolean as an object key",
		`return json_encode({x = 0/0})`:                                    "cannot encode NaN",
		`return json_encode({x = 1/0})`:                                    "cannot encode +Inf",
		`return json_encode("\255")`:                                       "not valid UTF-8",
		`return json_encode({[1] = "a", ["1"] = "b", x = 1})`:              "appears twice",
		`local t = {} for i = 1, 300 do t = {t} end return json_encode(t)`: "nested deeper than 200",
	} {
		_, err := b.run(t, code)
		requireKind(t, err, KindScriptError, want, code)
	}
}

func TestJSONDecodeRefusesInvalidJSON(t *testing.T) {
	t.Parallel()
	b := setup(t)
	for _, doc := range []string{
		``, `{`, `{"a" 1}`, `[1,]`, `{"a":1,}`, `tru`, `01`, `1.`, `-`, `"\x"`, `"abc`, `{} {}`,
		`[` + string(make([]byte, 0)) + `"` + "\x01" + `"]`,
	} {
		_, err := b.run(t, `return json_encode(json_decode(`+luaQuote(doc)+`))`)
		requireKind(t, err, KindScriptError, "json_decode:", doc)
	}
	deep := ""
	for range 300 {
		deep += "["
	}
	_, err := b.run(t, `return json_encode(json_decode("`+deep+`"))`)
	requireKind(t, err, KindScriptError, "nested deeper than 200")
}

// clip cuts before a character and cleans what json_encode would refuse;
// a max_bytes that is not a whole number in range is the script's error.
func TestClipCutsBeforeACharacterAndAnswersWhatJSONEncodeTakes(t *testing.T) {
	t.Parallel()
	b := setup(t)
	got := b.runOK(t, `return json_encode({
		short = clip("abc", 200),
		cut = clip("ab" .. "\195\169" .. "cd", 3),
		exact = clip("ab" .. "\195\169", 4),
		bad = clip("a\255b\0c", 200),
	})`)
	require.Equal(t, "abc", got["short"])
	require.Equal(t, "ab…", got["cut"], "é is not cut in half")
	require.Equal(t, "abé", got["exact"])
	require.Equal(t, "a?b?c", got["bad"])
	for _, code := range []string{`return clip("x", 0)`, `return clip("x", 1.5)`, `return clip("x", 70000)`, `return clip("x", "10")`, `return clip("x")`} {
		_, err := b.run(t, code)
		requireKind(t, err, KindScriptError, "clip: argument 2 (max_bytes) must be a whole number", code)
	}
}

// TestJSONDecodeReadsBytesThatAreNotUTF8AsGoDoes: a gateway's body is
// bytes, and a signed one that is not UTF-8 once made json_encode of a
// decoded field fail (stripe.lua's "ignored" reason, found by
// FuzzStripeSignature). json_decode now answers U+FFFD for each such
// byte, as encoding/json does, on the copying path (after an escape) and
// the slicing one, in keys and values.
func TestJSONDecodeReadsBytesThatAreNotUTF8AsGoDoes(t *testing.T) {
	t.Parallel()
	b := setup(t)
	for _, doc := range []string{
		"\"a\xffb\"", "\"\xc3\"", "\"é\xe2\x82\"", "\"x\\n\xff\xfe y\"", "\"\xed\xa0\x80\"",
		"{\"k\xff\":\"v\xc0\xaf\"}", "[\"ok é 😀\", \"\\u00e9\xf4\x90\x80\x80\"]",
	} {
		var want any
		require.NoError(t, json.Unmarshal([]byte(doc), &want), doc)
		wantJSON, err := json.Marshal(want)
		require.NoError(t, err)
		out, err := b.run(t, `return json_encode(json_decode(`+luaQuote(doc)+`))`)
		require.NoError(t, err, "%q", doc)
		var got any
		require.NoError(t, json.Unmarshal([]byte(out), &got), out)
		gotJSON, err := json.Marshal(got)
		require.NoError(t, err)
		require.Equal(t, string(wantJSON), string(gotJSON), "%q", doc)
	}
}

// luaQuote writes s as a Lua string literal.
func luaQuote(s string) string {
	out := []byte{'"'}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '"' || c == '\\':
			out = append(out, '\\', c)
		case c < 0x20 || c >= 0x7f:
			out = append(out, []byte("\\"+itoa3(int(c)))...)
		default:
			out = append(out, c)
		}
	}
	return string(append(out, '"'))
}

func itoa3(n int) string {
	return string([]byte{byte('0' + n/100), byte('0' + n/10%10), byte('0' + n%10)})
}

func TestHostFunctionArgumentsAreChecked(t *testing.T) {
	t.Parallel()
	b := setup(t)
	for code, want := range map[string]string{
		`md5("a", "b", "c", "d", "e", "f")`:                      "md5: takes at most 1 argument, got 6",
		`http_mtls("GET", "https://x", "", "{}", "{}", "extra")`: "http_mtls: takes at most 5 arguments, got 6",
		`http_post_binary(1, 2, 3, 4, 5, 6)`:                     "http_post_binary: takes at most 5 arguments, got 6",
		`now("x")`:                                               "now: takes at most 0 arguments, got 1",
		`md5(123)`:                                               "md5: argument 1 (s) must be a string, got number",
		`md5()`:                                                  "md5: argument 1 (s) is required",
		`hmac_sha256("k", {})`:                                   "hmac_sha256: argument 2 (message) must be a string, got table",
		`log("loud", "x")`:                                       "log: argument 1 (level) must be debug, info, warn or error",
		`urldecode("%zz")`:                                       "urldecode:",
		`base64_decode("!!")`:                                    "base64_decode:",
		`http_get("https://example.com", "[1]")`:                 "http_get: argument 2 (headers_json) must be a JSON object of strings",
		`hmac_sha256("k", "m", "hex", "x")`:                      "hmac_sha256: takes at most 3 arguments, got 4",
		`hmac_sha256("k", "m", "binary")`:                        "hmac_sha256: argument 3 (encoding) must be hex, base64 or raw",
		`hmac_sha256("k", "m", 1)`:                               "hmac_sha256: argument 3 (encoding) must be a string, got number",
		`rsa_sha256_verify("k", {}, "s")`:                        "rsa_sha256_verify: argument 2 (message) must be a string, got table",
		`aes_256_gcm_decrypt("k", "n", "a")`:                     "aes_256_gcm_decrypt: argument 4 (ciphertext_base64) is required",
		`aes_256_gcm_decrypt("k", "n", "a", "c", "x")`:           "aes_256_gcm_decrypt: takes at most 4 arguments, got 5",
		`constant_time_equals(1, "a")`:                           "constant_time_equals: argument 1 (a) must be a string, got number",
	} {
		_, err := b.run(t, code)
		requireKind(t, err, KindScriptError, want, code)
	}
}

func TestNowUsesTheRuntimeClock(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 3, 4, 5, 6, 7, 890, time.FixedZone("CST", 8*3600))
	b := setup(t, func(o *Options) { o.Now = func() time.Time { return at } })
	out, err := b.run(t, `return json_encode({now = now()})`)
	require.NoError(t, err)
	require.JSONEq(t, `{"now":"2026-03-03T21:06:07Z"}`, out)
}

func TestHostFunctionsAreNotUsableWhileLoading(t *testing.T) {
	t.Parallel()
	_, err := Compile("x", Gateway, gatewaySource(`local r = http_get("https://example.com", "{}")`))
	require.ErrorContains(t, err, "http_get: not available while the script loads")

	// Pure helpers are fine at load time.
	sc, err := Compile("x", Gateway, gatewaySource(`local SIGN = md5("constant") function test_config(c, i) return json_encode({s = SIGN}) end`))
	require.NoError(t, err)
	p := setup(t).rt.Load(sc)
	defer p.Close()
	out, err := p.Call(context.Background(), "test_config", "{}", "{}")
	require.NoError(t, err)
	var m map[string]string
	require.NoError(t, json.Unmarshal([]byte(out), &m))
	require.Len(t, m["s"], 32)
}
