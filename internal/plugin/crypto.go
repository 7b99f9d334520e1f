package plugin

import (
	"container/list"
	"crypto"
	"crypto/aes"
	"crypto/cipher"
	"crypto/hmac"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/subtle"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"sync"

	lua "github.com/yuin/gopher-lua"
)

// The signing helpers of real gateways: Stripe signs webhooks with
// HMAC-SHA256 (hex), Alipay and WeChat Pay sign with RSA2 (SHA256withRSA,
// PKCS #1 v1.5, base64) and WeChat Pay v3 encrypts notification resources
// with AES-256-GCM. Every answer depends on the arguments alone; keys are
// parsed once and kept in the runtime's keyCache.

// RSA key sizes a script may use: below 2048 bits is broken, above 4096 a
// signature costs more than a call should.
const (
	minRSABits = 2048
	maxRSABits = 4096
)

// Budget charges of the RSA helpers, in instruction steps (the default
// budget is 10M steps, about 0.1 s). A private-key operation costs about
// the cube of the modulus size: 1 ms for 2048 bits, 7 ms for 4096, so it is
// charged 100K steps per 2048-bit unit cubed; a verification (e = 65537)
// costs about 30 µs. Parsing a key that is not cached yet costs as much as
// a signature (the private key's precomputation).
const (
	rsaPrivateSteps = 100_000
	rsaPublicSteps  = 5_000
)

// hostHMACSHA256 is hmac_sha256(key, message, encoding): lowercase hex by
// default (the original answer), "base64" (standard, padded) or "raw".
func hostHMACSHA256(s *state, L *lua.LState, a args) int {
	key, msg := a.str(1), a.str(2)
	enc, _ := a.opt(3)
	s.budget.charge(L, int64(len(msg)/64))
	m := hmac.New(sha256.New, []byte(key))
	m.Write([]byte(msg))
	var buf [sha256.Size]byte
	sum := m.Sum(buf[:0])
	switch enc {
	case "", "hex":
		return s.pushString(L, hex.EncodeToString(sum))
	case "base64":
		return s.pushString(L, base64.StdEncoding.EncodeToString(sum))
	case "raw":
		return s.pushString(L, string(sum))
	}
	L.RaiseError("hmac_sha256: argument 3 (encoding) must be hex, base64 or raw")
	return 0
}

// hostRSASHA256Sign is rsa_sha256_sign(private_key_pem, message): the
// PKCS #1 v1.5 signature of SHA-256(message), base64 (standard, padded).
func hostRSASHA256Sign(s *state, L *lua.LState, a args) int {
	pemText, msg := a.str(1), a.str(2)
	key, err := s.env.keys.private(s, L, pemText)
	if err != nil {
		L.RaiseError("rsa_sha256_sign: argument 1 (private_key_pem): %s", err.Error())
	}
	s.budget.charge(L, rsaPrivateCost(key.N.BitLen())+int64(len(msg)/64))
	digest := sha256.Sum256([]byte(msg))
	sig, err := rsa.SignPKCS1v15(rand.Reader, key, crypto.SHA256, digest[:])
	if err != nil {
		L.RaiseError("rsa_sha256_sign: %s", err.Error())
	}
	return s.pushString(L, base64.StdEncoding.EncodeToString(sig))
}

// hostRSASHA256Verify is rsa_sha256_verify(public_key_pem, message,
// signature_base64): true when the signature is PKCS #1 v1.5 over
// SHA-256(message) by the key. A signature that is not base64 is false,
// like any other wrong signature: it is data the gateway (or a forger)
// sent. A key that cannot be read raises an error: it is configuration.
func hostRSASHA256Verify(s *state, L *lua.LState, a args) int {
	pemText, msg, sigText := a.str(1), a.str(2), a.str(3)
	key, err := s.env.keys.public(s, L, pemText)
	if err != nil {
		L.RaiseError("rsa_sha256_verify: argument 1 (public_key_pem): %s", err.Error())
	}
	s.budget.charge(L, rsaPublicSteps+int64(len(msg)/64))
	sig, err := base64.StdEncoding.DecodeString(strings.TrimSpace(sigText))
	ok := err == nil && len(sig) == key.Size()
	if ok {
		digest := sha256.Sum256([]byte(msg))
		ok = rsa.VerifyPKCS1v15(key, crypto.SHA256, digest[:], sig) == nil
	}
	L.Push(lua.LBool(ok))
	return 1
}

// gcmNonceSize is the nonce AES-GCM is defined for (and WeChat Pay sends).
const gcmNonceSize = 12

// hostAES256GCMDecrypt is aes_256_gcm_decrypt(key, nonce, associated_data,
// ciphertext_base64): the plaintext, or nil when the ciphertext does not
// authenticate (a wrong key, a tampered text, a nonce that is not 12
// bytes, base64 that does not decode, a text shorter than the tag). Only a
// key that is not 32 bytes raises an error: that is configuration.
func hostAES256GCMDecrypt(s *state, L *lua.LState, a args) int {
	key, nonce, ct := a.str(1), a.str(2), a.str(4)
	ad, _ := a.opt(3)
	if len(key) != 32 {
		L.RaiseError("aes_256_gcm_decrypt: argument 1 (key) must be 32 bytes, got %d", len(key))
	}
	s.budget.charge(L, int64(len(ct)/64+len(ad)/64))
	raw, err := base64.StdEncoding.DecodeString(ct)
	if err != nil || len(nonce) != gcmNonceSize || len(raw) < 16 {
		L.Push(lua.LNil)
		return 1
	}
	block, err := aes.NewCipher([]byte(key))
	if err != nil {
		L.RaiseError("aes_256_gcm_decrypt: %s", err.Error())
	}
	gcm, err := cipher.NewGCM(block)
	if err != nil {
		L.RaiseError("aes_256_gcm_decrypt: %s", err.Error())
	}
	s.budget.alloc(L, int64(len(raw)))
	plain, err := gcm.Open(raw[:0], []byte(nonce), raw, []byte(ad))
	if err != nil {
		L.Push(lua.LNil)
		return 1
	}
	L.Push(lua.LString(plain))
	return 1
}

// hostConstantTimeEquals is constant_time_equals(a, b): whether the strings
// are equal, in a time that depends on their lengths only — for comparing
// a signature the script computed with the one it received.
func hostConstantTimeEquals(s *state, L *lua.LState, a args) int {
	x, y := a.str(1), a.str(2)
	s.budget.charge(L, int64(len(x)/64))
	L.Push(lua.LBool(subtle.ConstantTimeCompare([]byte(x), []byte(y)) == 1))
	return 1
}

// hostNowUnix is now_unix(): the service clock in whole seconds since the
// Unix epoch, a number (exact in a Lua number until the year 285 million).
func hostNowUnix(s *state, L *lua.LState, _ args) int {
	L.Push(lua.LNumber(s.env.now().Unix()))
	return 1
}

// rsaPrivateCost is the budget charge of one private-key operation.
func rsaPrivateCost(bits int) int64 {
	u := int64((bits + 2047) / 2048)
	return rsaPrivateSteps * u * u * u
}

// keyCacheSize bounds the parsed keys a runtime keeps: a few per gateway
// interface (our private key, the gateway's public key).
const keyCacheSize = 64

// keyCache keeps parsed RSA keys by the SHA-256 of their text, least
// recently used out first, so a key is parsed once per interface config
// rather than on every call (parsing a private key costs as much as a
// signature). Only keys that parsed are kept: a broken one raises an error
// every time, charged to the call's budget. Safe for concurrent use.
type keyCache struct {
	mu    sync.Mutex
	order *list.List // of *keyEntry, most recent first
	byID  map[keyID]*list.Element
}

type keyID struct {
	private bool
	sum     [sha256.Size]byte
}

type keyEntry struct {
	id   keyID
	priv *rsa.PrivateKey
	pub  *rsa.PublicKey
}

func newKeyCache() *keyCache {
	return &keyCache{order: list.New(), byID: make(map[keyID]*list.Element)}
}

func (c *keyCache) get(id keyID) (*keyEntry, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	el, ok := c.byID[id]
	if !ok {
		return nil, false
	}
	c.order.MoveToFront(el)
	return el.Value.(*keyEntry), true
}

func (c *keyCache) put(e *keyEntry) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if el, ok := c.byID[e.id]; ok {
		c.order.MoveToFront(el)
		return
	}
	c.byID[e.id] = c.order.PushFront(e)
	for c.order.Len() > keyCacheSize {
		old := c.order.Back()
		c.order.Remove(old)
		delete(c.byID, old.Value.(*keyEntry).id)
	}
}

// len is the number of keys kept (for tests).
func (c *keyCache) len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.order.Len()
}

func (c *keyCache) private(s *state, L *lua.LState, text string) (*rsa.PrivateKey, error) {
	id := keyID{private: true, sum: sha256.Sum256([]byte(text))}
	if e, ok := c.get(id); ok {
		return e.priv, nil
	}
	s.budget.charge(L, rsaPrivateSteps+int64(len(text)/64))
	key, err := parsePrivateKey(text)
	if err != nil {
		return nil, err
	}
	c.put(&keyEntry{id: id, priv: key})
	return key, nil
}

func (c *keyCache) public(s *state, L *lua.LState, text string) (*rsa.PublicKey, error) {
	id := keyID{sum: sha256.Sum256([]byte(text))}
	if e, ok := c.get(id); ok {
		return e.pub, nil
	}
	s.budget.charge(L, rsaPublicSteps+int64(len(text)/64))
	key, err := parsePublicKey(text)
	if err != nil {
		return nil, err
	}
	c.put(&keyEntry{id: id, pub: key})
	return key, nil
}

// onePEM is a PEM block whose line breaks were lost: pasted into a
// one-line form field (a browser drops the line breaks of an <input>).
var onePEM = regexp.MustCompile(`^\s*-----BEGIN ([A-Z ]+)-----(.*?)-----END ([A-Z ]+)-----\s*$`)

// keyDER is the DER inside a PEM block, with the block's type, its line
// breaks optional (a key pasted into a one-line field); text without PEM
// armour is taken as base64 DER (as Alipay's console hands out keys), with
// the type "".
func keyDER(text string) (string, []byte, error) {
	if block, _ := pem.Decode([]byte(text)); block != nil {
		return block.Type, block.Bytes, nil
	}
	if strings.Contains(text, "-----") {
		m := onePEM.FindStringSubmatch(text)
		if m == nil || m[1] != m[3] {
			return "", nil, errors.New("not a readable PEM block")
		}
		der, ok := base64DER(m[2])
		if !ok {
			return "", nil, errors.New("not a readable PEM block")
		}
		return m[1], der, nil
	}
	der, ok := base64DER(text)
	if !ok {
		return "", nil, errors.New("neither PEM nor base64 DER")
	}
	return "", der, nil
}

// base64DER is the DER of base64 text, its white space (line breaks or
// the spaces that stand for them) dropped; false when it is no base64 or
// empty.
func base64DER(text string) ([]byte, bool) {
	der, err := base64.StdEncoding.DecodeString(strings.Join(strings.Fields(text), ""))
	return der, err == nil && len(der) > 0
}

// parsePrivateKey reads an RSA private key: PEM "RSA PRIVATE KEY" (PKCS #1)
// or "PRIVATE KEY" (PKCS #8), or bare base64 DER of either.
func parsePrivateKey(text string) (*rsa.PrivateKey, error) {
	typ, der, err := keyDER(text)
	if err != nil {
		return nil, err
	}
	var key *rsa.PrivateKey
	switch typ {
	case "RSA PRIVATE KEY":
		key, err = x509.ParsePKCS1PrivateKey(der)
	case "PRIVATE KEY":
		key, err = pkcs8RSA(der)
	case "":
		if key, err = x509.ParsePKCS1PrivateKey(der); err != nil {
			key, err = pkcs8RSA(der)
		}
	default:
		return nil, fmt.Errorf("a PEM block of type %q, want RSA PRIVATE KEY or PRIVATE KEY", typ)
	}
	if err != nil {
		return nil, errors.New("not an RSA private key in PKCS #1 or PKCS #8")
	}
	if err := checkBits(key.N.BitLen()); err != nil {
		return nil, err
	}
	return key, nil
}

func pkcs8RSA(der []byte) (*rsa.PrivateKey, error) {
	k, err := x509.ParsePKCS8PrivateKey(der)
	if err != nil {
		return nil, err
	}
	rk, ok := k.(*rsa.PrivateKey)
	if !ok {
		return nil, errors.New("not an RSA key")
	}
	return rk, nil
}

// parsePublicKey reads an RSA public key: PEM "PUBLIC KEY" (PKIX), "RSA
// PUBLIC KEY" (PKCS #1) or "CERTIFICATE" (the key of an X.509 certificate,
// as WeChat Pay and Alipay's certificate mode hand them out), or bare
// base64 DER of a PKIX or PKCS #1 key.
func parsePublicKey(text string) (*rsa.PublicKey, error) {
	typ, der, err := keyDER(text)
	if err != nil {
		return nil, err
	}
	var key *rsa.PublicKey
	switch typ {
	case "PUBLIC KEY":
		key, err = pkixRSA(der)
	case "RSA PUBLIC KEY":
		key, err = x509.ParsePKCS1PublicKey(der)
	case "CERTIFICATE":
		var cert *x509.Certificate
		if cert, err = x509.ParseCertificate(der); err == nil {
			var ok bool
			if key, ok = cert.PublicKey.(*rsa.PublicKey); !ok {
				err = errors.New("not an RSA key")
			}
		}
	case "":
		if key, err = pkixRSA(der); err != nil {
			key, err = x509.ParsePKCS1PublicKey(der)
		}
	default:
		return nil, fmt.Errorf("a PEM block of type %q, want PUBLIC KEY, RSA PUBLIC KEY or CERTIFICATE", typ)
	}
	if err != nil {
		return nil, errors.New("not an RSA public key in PKIX, PKCS #1 or a certificate")
	}
	if err := checkBits(key.N.BitLen()); err != nil {
		return nil, err
	}
	return key, nil
}

func pkixRSA(der []byte) (*rsa.PublicKey, error) {
	k, err := x509.ParsePKIXPublicKey(der)
	if err != nil {
		return nil, err
	}
	rk, ok := k.(*rsa.PublicKey)
	if !ok {
		return nil, errors.New("not an RSA key")
	}
	return rk, nil
}

func checkBits(bits int) error {
	if bits < minRSABits || bits > maxRSABits {
		return fmt.Errorf("an RSA key of %d bits, want %d to %d", bits, minRSABits, maxRSABits)
	}
	return nil
}
