package wechatpay

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"crypto/rsa"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"strings"

	"github.com/rustbill/paymentd/internal/fakes/fakekit"
)

// Scheme is the Authorization scheme of API v3 requests.
const Scheme = "WECHATPAY2-SHA256-RSA2048"

// RequestText is what a merchant signs: method, the path with its query,
// timestamp, nonce and body, each followed by "\n".
func RequestText(method, uri, timestamp, nonce, body string) string {
	return method + "\n" + uri + "\n" + timestamp + "\n" + nonce + "\n" + body + "\n"
}

// AnswerText is what WeChat Pay signs in an answer or a notification.
func AnswerText(timestamp, nonce, body string) string {
	return timestamp + "\n" + nonce + "\n" + body + "\n"
}

// SignText is SHA256withRSA (PKCS #1 v1.5) of text, base64.
func SignText(key *rsa.PrivateKey, text string) (string, error) {
	sig, err := fakekit.SignRSA(key, text)
	if err != nil {
		return "", fmt.Errorf("wechatpay fake: sign: %w", err)
	}
	return sig, nil
}

// VerifyText reports whether sig (base64) is key's signature of text.
func VerifyText(key *rsa.PublicKey, text, sig string) bool {
	return fakekit.VerifyRSA(key, text, sig)
}

// Authorization is a parsed Authorization header.
type Authorization struct {
	MchID, NonceStr, Signature, Timestamp, SerialNo string
}

var authParamRE = regexp.MustCompile(`^([a-z_]+)="([^"]*)"$`)

// ParseAuthorization reads `WECHATPAY2-SHA256-RSA2048 k="v",k="v",…`: each
// of the five parameters exactly once, nothing else.
func ParseAuthorization(h string) (Authorization, error) {
	rest, ok := strings.CutPrefix(h, Scheme+" ")
	if !ok {
		return Authorization{}, errors.New("the Authorization scheme is not " + Scheme)
	}
	seen := map[string]string{}
	for _, part := range strings.Split(rest, ",") {
		m := authParamRE.FindStringSubmatch(strings.TrimSpace(part))
		if m == nil {
			return Authorization{}, fmt.Errorf("malformed Authorization parameter %q", part)
		}
		if _, dup := seen[m[1]]; dup {
			return Authorization{}, fmt.Errorf("repeated Authorization parameter %s", m[1])
		}
		seen[m[1]] = m[2]
	}
	a := Authorization{MchID: seen["mchid"], NonceStr: seen["nonce_str"], Signature: seen["signature"], Timestamp: seen["timestamp"], SerialNo: seen["serial_no"]}
	if len(seen) != 5 || a.MchID == "" || a.NonceStr == "" || a.Signature == "" || a.Timestamp == "" || a.SerialNo == "" {
		return Authorization{}, errors.New("the Authorization needs mchid, nonce_str, signature, timestamp and serial_no")
	}
	return a, nil
}

// SignedHeaders are the four headers of a signed answer or notification.
func SignedHeaders(key *rsa.PrivateKey, serial, timestamp, nonce, body string) (http.Header, error) {
	sig, err := SignText(key, AnswerText(timestamp, nonce, body))
	if err != nil {
		return nil, err
	}
	h := http.Header{}
	h.Set("Wechatpay-Timestamp", timestamp)
	h.Set("Wechatpay-Nonce", nonce)
	h.Set("Wechatpay-Signature", sig)
	h.Set("Wechatpay-Serial", serial)
	return h, nil
}

// Nonce is a random 32-character string.
func Nonce() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	return strings.ToUpper(hex.EncodeToString(b))
}

// Seal encrypts plaintext as a notification's resource: AES-256-GCM with
// the APIv3 key (32 bytes), a 12-byte nonce and associated data; the
// ciphertext with its tag, base64.
func Seal(apiV3Key, nonce, associatedData string, plaintext []byte) (string, error) {
	block, err := aes.NewCipher([]byte(apiV3Key))
	if err != nil {
		return "", fmt.Errorf("wechatpay fake: APIv3 key: %w", err)
	}
	gcm, err := cipher.NewGCM(block)
	if err != nil {
		return "", err
	}
	if len(nonce) != gcm.NonceSize() {
		return "", errors.New("wechatpay fake: the nonce must be 12 bytes")
	}
	return base64.StdEncoding.EncodeToString(gcm.Seal(nil, []byte(nonce), plaintext, []byte(associatedData))), nil
}

// Open is Seal's inverse (for tests reading what the fake sent).
func Open(apiV3Key, nonce, associatedData, ciphertext string) ([]byte, error) {
	raw, err := base64.StdEncoding.DecodeString(ciphertext)
	if err != nil {
		return nil, err
	}
	block, err := aes.NewCipher([]byte(apiV3Key))
	if err != nil {
		return nil, err
	}
	gcm, err := cipher.NewGCM(block)
	if err != nil {
		return nil, err
	}
	return gcm.Open(nil, []byte(nonce), raw, []byte(associatedData))
}

// GenerateKey makes a 2048-bit RSA key, WeChat Pay's size.
func GenerateKey() (*rsa.PrivateKey, error) {
	k, err := fakekit.GenerateRSAKey()
	if err != nil {
		return nil, fmt.Errorf("wechatpay fake: generate key: %w", err)
	}
	return k, nil
}

// PrivateKeyPEM is key as PKCS #8 PEM, the form of apiclient_key.pem.
func PrivateKeyPEM(key *rsa.PrivateKey) string {
	return fakekit.PrivateKeyPEM(key)
}

// PublicKeyPEM is key as PKIX PEM, the form of the WeChat Pay public key
// (pub_key.pem).
func PublicKeyPEM(key *rsa.PublicKey) string {
	return fakekit.PublicKeyPEM(key)
}

// ParsePrivateKeyPEM reads a PKCS #8 or PKCS #1 RSA private key.
func ParsePrivateKeyPEM(s string) (*rsa.PrivateKey, error) {
	k, err := fakekit.ParsePrivateKeyPEM(s)
	if err != nil {
		return nil, fmt.Errorf("wechatpay fake: %w", err)
	}
	return k, nil
}
