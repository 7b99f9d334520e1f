package plugin

import (
	"context"
	"crypto"
	"crypto/aes"
	"crypto/cipher"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/pem"
	"fmt"
	"math/big"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// testKeys is one 2048-bit key in every form the RSA helpers read, made by
// Go's crypto/rsa once per test process.
type testKeys struct {
	key                    *rsa.PrivateKey
	pkcs1, pkcs8           string // private
	pkix, pkcs1Public, crt string // public
	bare8, bareX           string // base64 DER without armour
}

var goKeys = sync.OnceValue(func() testKeys {
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		panic(err)
	}
	p8, _ := x509.MarshalPKCS8PrivateKey(key)
	px, _ := x509.MarshalPKIXPublicKey(&key.PublicKey)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "gateway"},
		NotBefore: time.Unix(0, 0), NotAfter: time.Unix(1<<33, 0)}
	crt, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		panic(err)
	}
	enc := func(typ string, der []byte) string {
		return string(pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}))
	}
	return testKeys{
		key:         key,
		pkcs1:       enc("RSA PRIVATE KEY", x509.MarshalPKCS1PrivateKey(key)),
		pkcs8:       enc("PRIVATE KEY", p8),
		pkix:        enc("PUBLIC KEY", px),
		pkcs1Public: enc("RSA PUBLIC KEY", x509.MarshalPKCS1PublicKey(&key.PublicKey)),
		crt:         enc("CERTIFICATE", crt),
		bare8:       base64.StdEncoding.EncodeToString(p8),
		bareX:       base64.StdEncoding.EncodeToString(px),
	}
})

func goSign(t *testing.T, key *rsa.PrivateKey, msg string) string {
	t.Helper()
	d := sha256.Sum256([]byte(msg))
	sig, err := rsa.SignPKCS1v15(rand.Reader, key, crypto.SHA256, d[:])
	require.NoError(t, err)
	return base64.StdEncoding.EncodeToString(sig)
}

func TestHMACSHA256AnswersHexByDefaultAndBase64OrRawOnRequest(t *testing.T) {
	t.Parallel()
	// RFC 4231, test case 2.
	const want = "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"
	got := setup(t).runOK(t, `
		local k, m = "Jefe", "what do ya want for nothing?"
		local raw = hmac_sha256(k, m, "raw")
		local hex = ""
		for i = 1, #raw do hex = hex .. string.format("%02x", string.byte(raw, i)) end
		return json_encode({
			default = hmac_sha256(k, m), hex = hmac_sha256(k, m, "hex"), nil_enc = hmac_sha256(k, m, nil),
			b64 = hmac_sha256(k, m, "base64"), raw_len = #raw, raw_hex = hex,
		})`)
	require.Equal(t, map[string]any{
		"default": want, "hex": want, "nil_enc": want,
		"b64":     "W9zBRr9gdU5qBCQmCJV1x1oAPwidJzmDnexYuWTsOEM=",
		"raw_len": float64(32), "raw_hex": want,
	}, got)
}

func TestRSASHA256VerifiesGoSignaturesInEveryKeyForm(t *testing.T) {
	t.Parallel()
	k := goKeys()
	b := setup(t)
	msg := "app_id=2021&biz_content={\"out_trade_no\":\"p1\"}&charset=utf-8\n\x00é"
	sig := goSign(t, k.key, msg)
	for name, pub := range map[string]string{"pkix": k.pkix, "pkcs1": k.pkcs1Public, "certificate": k.crt, "bare base64 pkix": k.bareX,
		"pkix on one line": oneLine(k.pkix), "certificate on one line": oneLine(k.crt)} {
		got := b.runOK(t, `
			local pub, msg, sig = [[`+pub+`]], `+luaQuote(msg)+`, "`+sig+`"
			local bad = string.sub(sig, 1, 10) .. (string.sub(sig, 11, 11) == "A" and "B" or "A") .. string.sub(sig, 12)
			return json_encode({
				good = rsa_sha256_verify(pub, msg, sig),
				other_message = rsa_sha256_verify(pub, msg .. " ", sig),
				tampered = rsa_sha256_verify(pub, msg, bad),
				not_base64 = rsa_sha256_verify(pub, msg, "!!!"),
				empty = rsa_sha256_verify(pub, msg, ""),
				short = rsa_sha256_verify(pub, msg, "AAAA"),
			})`)
		require.Equal(t, map[string]any{
			"good": true, "other_message": false, "tampered": false, "not_base64": false, "empty": false, "short": false,
		}, got, name)
	}
}

// oneLine is a PEM block pasted into a one-line form field: its line
// breaks dropped.
func oneLine(pemText string) string { return strings.ReplaceAll(pemText, "\n", "") }

func TestRSASHA256SignsWhatGoVerifiesAndMatchesGoByteForByte(t *testing.T) {
	t.Parallel()
	k := goKeys()
	b := setup(t)
	msg := "charset=utf-8&method=alipay.trade.page.pay&total_amount=12.30"
	want := goSign(t, k.key, msg) // PKCS #1 v1.5 is deterministic
	for name, priv := range map[string]string{"pkcs1": k.pkcs1, "pkcs8": k.pkcs8, "bare base64 pkcs8": k.bare8,
		"pkcs8 on one line": oneLine(k.pkcs8), "pkcs1 on one line, spaces for line breaks": strings.ReplaceAll(strings.TrimSpace(k.pkcs1), "\n", " ")} {
		got := b.runOK(t, `return json_encode({sig = rsa_sha256_sign([[`+priv+`]], `+luaQuote(msg)+`)})`)
		sig := got["sig"].(string)
		require.Equal(t, want, sig, name)
		raw, err := base64.StdEncoding.DecodeString(sig)
		require.NoError(t, err)
		d := sha256.Sum256([]byte(msg))
		require.NoError(t, rsa.VerifyPKCS1v15(&k.key.PublicKey, crypto.SHA256, d[:], raw), name)
	}
}

// TestRSASHA256AgreesWithOpenSSL: a key made by openssl, a signature made
// by `openssl dgst -sha256 -sign` at test time — an implementation that
// shares nothing with Go's — verified by the helper, and the helper's own
// signature equal to openssl's.
func TestRSASHA256AgreesWithOpenSSL(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("openssl"); err != nil {
		t.Skip("openssl is not installed")
	}
	dir := t.TempDir()
	keyFile, msgFile := filepath.Join(dir, "key.pem"), filepath.Join(dir, "msg")
	msg := "notify_time=2026-11-25 17:00:00&out_trade_no=p1&total_amount=12.30&trade_status=TRADE_SUCCESS"
	require.NoError(t, os.WriteFile(msgFile, []byte(msg), 0o600))
	run := func(args ...string) []byte {
		out, err := exec.Command("openssl", args...).Output()
		require.NoError(t, err, "openssl %v", args)
		return out
	}
	run("genpkey", "-algorithm", "RSA", "-pkeyopt", "rsa_keygen_bits:2048", "-out", keyFile)
	pub := string(run("pkey", "-in", keyFile, "-pubout"))
	sig := base64.StdEncoding.EncodeToString(run("dgst", "-sha256", "-sign", keyFile, msgFile))
	priv, err := os.ReadFile(keyFile)
	require.NoError(t, err)

	got := setup(t).runOK(t, `
		local pub, priv, msg, sig = [[`+pub+`]], [[`+string(priv)+`]], `+luaQuote(msg)+`, "`+sig+`"
		return json_encode({ok = rsa_sha256_verify(pub, msg, sig), ours = rsa_sha256_sign(priv, msg), other = rsa_sha256_verify(pub, "x", sig)})`)
	require.Equal(t, true, got["ok"])
	require.Equal(t, false, got["other"])
	require.Equal(t, sig, got["ours"], "PKCS #1 v1.5 signatures are deterministic: ours must be openssl's")
}

func TestRSAKeysThatCannotBeUsedRaiseErrors(t *testing.T) {
	t.Parallel()
	small, err := rsa.GenerateKey(rand.Reader, 1024)
	require.NoError(t, err)
	ec, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	ecDER, _ := x509.MarshalPKCS8PrivateKey(ec)
	ecPub, _ := x509.MarshalPKIXPublicKey(&ec.PublicKey)
	enc := func(typ string, der []byte) string {
		return string(pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}))
	}
	k := goKeys()
	b := setup(t)
	for code, want := range map[string]string{
		`rsa_sha256_sign([[` + enc("RSA PRIVATE KEY", x509.MarshalPKCS1PrivateKey(small)) + `]], "m")`: "an RSA key of 1024 bits, want 2048 to 4096",
		`rsa_sha256_sign([[` + enc("PRIVATE KEY", ecDER) + `]], "m")`:                                  "not an RSA private key",
		`rsa_sha256_sign([[` + k.pkix + `]], "m")`:                                                     `a PEM block of type "PUBLIC KEY"`,
		`rsa_sha256_sign("not a key", "m")`:                                                            "neither PEM nor base64 DER",
		`rsa_sha256_sign("-----BEGIN PRIVATE KEY-----\nxx", "m")`:                                      "not a readable PEM block",
		`rsa_sha256_sign("-----BEGIN PRIVATE KEY-----AAAA-----END PUBLIC KEY-----", "m")`:              "not a readable PEM block",
		`rsa_sha256_verify([[` + enc("PUBLIC KEY", ecPub) + `]], "m", "AAAA")`:                         "not an RSA public key",
		`rsa_sha256_verify([[` + k.pkcs8 + `]], "m", "AAAA")`:                                          `a PEM block of type "PRIVATE KEY"`,
		`rsa_sha256_verify("", "m", "AAAA")`:                                                           "rsa_sha256_verify: argument 1 (public_key_pem): neither PEM",
		`rsa_sha256_verify("k", "m")`:                                                                  "rsa_sha256_verify: argument 3 (signature_base64) is required",
		`rsa_sha256_sign("k", "m", "x")`:                                                               "rsa_sha256_sign: takes at most 2 arguments, got 3",
	} {
		_, err := b.run(t, code)
		requireKind(t, err, KindScriptError, want, code)
	}
}

func TestRSAKeysAreParsedOnceAndTheCacheIsBounded(t *testing.T) {
	t.Parallel()
	k := goKeys()
	b := setup(t)
	p := b.load(t, probe(`
		local c = json_decode(i)
		local sig
		for n = 1, 20 do sig = rsa_sha256_sign(c.priv, "m" .. n) end
		return json_encode({ok = rsa_sha256_verify(c.pub, "m20", sig)})`))
	in := `{"priv":` + jsonQuote(k.pkcs1) + `,"pub":` + jsonQuote(k.pkix) + `}`
	for range 3 {
		out, err := p.Call(context.Background(), "test_config", "{}", in)
		require.NoError(t, err)
		require.JSONEq(t, `{"ok":true}`, out)
	}
	require.Equal(t, 2, b.rt.env.keys.len(), "one private and one public key, each parsed once")

	c := newKeyCache()
	for n := range keyCacheSize + 10 {
		c.put(&keyEntry{id: keyID{sum: sha256.Sum256([]byte{byte(n)})}})
	}
	require.Equal(t, keyCacheSize, c.len())
	_, ok := c.get(keyID{sum: sha256.Sum256([]byte{0})})
	require.False(t, ok, "the least recently used key went first")
	_, ok = c.get(keyID{sum: sha256.Sum256([]byte{byte(keyCacheSize + 9)})})
	require.True(t, ok)
}

func TestRSASigningIsChargedToTheBudget(t *testing.T) {
	t.Parallel()
	k := goKeys()
	b := setup(t, func(o *Options) { o.Limits.Instructions = 150_000 })
	_, err := b.run(t, `return rsa_sha256_sign([[`+k.pkcs8+`]], "m")`)
	requireKind(t, err, KindBudget, "", "parsing and one signature cost 200K steps")
}

func TestAES256GCMDecryptOpensWhatGoSealedAndNothingElse(t *testing.T) {
	t.Parallel()
	key, nonce, ad := "0123456789abcdef0123456789abcdef", "nonce_12byte", "transaction"
	plain := `{"out_trade_no":"p1","amount":{"total":1230}}`
	block, err := aes.NewCipher([]byte(key))
	require.NoError(t, err)
	gcm, err := cipher.NewGCM(block)
	require.NoError(t, err)
	ct := base64.StdEncoding.EncodeToString(gcm.Seal(nil, []byte(nonce), []byte(plain), []byte(ad)))
	got := setup(t).runOK(t, `
		local key, nonce, ad, ct = "`+key+`", "`+nonce+`", "`+ad+`", "`+ct+`"
		local bad = (string.sub(ct, 1, 1) == "A" and "B" or "A") .. string.sub(ct, 2)
		return json_encode({
			plain = aes_256_gcm_decrypt(key, nonce, ad, ct),
			wrong_ad = aes_256_gcm_decrypt(key, nonce, "other", ct) == nil,
			no_ad = aes_256_gcm_decrypt(key, nonce, nil, ct) == nil,
			tampered = aes_256_gcm_decrypt(key, nonce, ad, bad) == nil,
			wrong_key = aes_256_gcm_decrypt(string.rep("k", 32), nonce, ad, ct) == nil,
			short_nonce = aes_256_gcm_decrypt(key, "n", ad, ct) == nil,
			not_base64 = aes_256_gcm_decrypt(key, nonce, ad, "!!") == nil,
			too_short = aes_256_gcm_decrypt(key, nonce, ad, "AAAA") == nil,
		})`)
	require.Equal(t, map[string]any{
		"plain": plain, "wrong_ad": true, "no_ad": true, "tampered": true, "wrong_key": true,
		"short_nonce": true, "not_base64": true, "too_short": true,
	}, got)

	_, err = setup(t).run(t, `return aes_256_gcm_decrypt("short", "`+nonce+`", "", "`+ct+`")`)
	requireKind(t, err, KindScriptError, "aes_256_gcm_decrypt: argument 1 (key) must be 32 bytes, got 5")
}

func TestConstantTimeEqualsComparesWholeStrings(t *testing.T) {
	t.Parallel()
	got := setup(t).runOK(t, `return json_encode({
		same = constant_time_equals("abc", "abc"), empty = constant_time_equals("", ""),
		differ = constant_time_equals("abc", "abd"), prefix = constant_time_equals("abc", "abcd"),
		case = constant_time_equals("ABC", "abc"),
	})`)
	require.Equal(t, map[string]any{"same": true, "empty": true, "differ": false, "prefix": false, "case": false}, got)
	_, err := setup(t).run(t, `return constant_time_equals("a")`)
	requireKind(t, err, KindScriptError, "constant_time_equals: argument 2 (b) is required")
}

func TestNowUnixUsesTheRuntimeClock(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 3, 4, 5, 6, 7, 890, time.FixedZone("CST", 8*3600))
	b := setup(t, func(o *Options) { o.Now = func() time.Time { return at } })
	got := b.runOK(t, `local n = now_unix() return json_encode({n = n, t = type(n), s = tostring(n)})`)
	require.Equal(t, map[string]any{"n": float64(at.Unix()), "t": "number", "s": "1772571967"}, got)
	_, err := b.run(t, `return now_unix(1)`)
	requireKind(t, err, KindScriptError, "now_unix: takes at most 0 arguments, got 1")
}

// format_time writes the times Alipay and WeChat Pay read, in Beijing time,
// across a day, a month and a leap day, and refuses what it cannot write.
func TestFormatTimeWritesAFixedOffsetsTimeInAGoLayout(t *testing.T) {
	t.Parallel()
	b := setup(t)
	cases := []struct {
		at     time.Time
		offset string
		layout string
		want   string
	}{
		{time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC), "+08:00", "2006-01-02 15:04:05", "2026-03-04 13:06:07"},
		{time.Date(2026, 12, 31, 16, 0, 0, 0, time.UTC), "+08:00", "2006-01-02 15:04:05", "2027-01-01 00:00:00"},
		{time.Date(2028, 2, 28, 20, 30, 0, 0, time.UTC), "+08:00", time.RFC3339, "2028-02-29T04:30:00+08:00"},
		{time.Date(2026, 1, 1, 2, 0, 0, 0, time.UTC), "-05:30", time.RFC3339, "2025-12-31T20:30:00-05:30"},
		{time.Date(1970, 1, 1, 0, 0, 0, 0, time.UTC), "Z", time.RFC3339, "1970-01-01T00:00:00Z"},
	}
	for _, c := range cases {
		got := b.runOK(t, fmt.Sprintf(`return json_encode({s = format_time(%d, %q, %q)})`, c.at.Unix(), c.offset, c.layout))
		require.Equal(t, map[string]any{"s": c.want}, got, "%s at %s", c.at, c.offset)
	}
	for script, msg := range map[string]string{
		`return format_time(1.5, "Z", "2006")`:             "argument 1 (unix) must be whole seconds",
		`return format_time("1", "Z", "2006")`:             "argument 1 (unix) must be whole seconds",
		`return format_time(1e15, "Z", "2006")`:            "within the years 0001 to 9999",
		`return format_time(0, "+8:00", "2006")`:           `argument 2 (utc_offset) must be "Z" or`,
		`return format_time(0, "+15:00", "2006")`:          `argument 2 (utc_offset) must be "Z" or`,
		`return format_time(0, "+0-:00", "2006")`:          `argument 2 (utc_offset) must be "Z" or`,
		`return format_time(0, "+08:00", "")`:              "argument 3 (layout) must be a Go time layout",
		`return format_time(0, "+08:00")`:                  "argument 3 (layout) is required",
		`return format_time(0, "+08:00", "2006", "extra")`: "takes at most 3 arguments, got 4",
	} {
		_, err := b.run(t, script)
		requireKind(t, err, KindScriptError, msg)
	}
}

func jsonQuote(s string) string {
	r := strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`)
	return `"` + r.Replace(s) + `"`
}
