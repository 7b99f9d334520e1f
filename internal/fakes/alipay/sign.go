package alipay

import (
	"crypto"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"fmt"
	"net/url"

	"github.com/rustbill/paymentd/internal/fakes/fakekit"
)

// SigningString is the text Alipay's RSA2 signs: every parameter with a
// non-empty value except `sign` (and, for what Alipay sends — notifies and
// the return redirect — `sign_type` too), names in ascending byte order,
// `k=v` joined with `&`, values raw: decoded once from the form, never
// re-encoded or re-formatted.
func SigningString(params url.Values, withoutSignType bool) string {
	if withoutSignType {
		return fakekit.SortedForm(params, "sign", "sign_type")
	}
	return fakekit.SortedForm(params, "sign")
}

// SignText is SHA256withRSA (PKCS #1 v1.5) of text, base64 (standard,
// padded): the "RSA2" of Alipay's sign_type.
func SignText(key *rsa.PrivateKey, text string) (string, error) {
	sum := sha256.Sum256([]byte(text))
	sig, err := rsa.SignPKCS1v15(rand.Reader, key, crypto.SHA256, sum[:])
	if err != nil {
		return "", fmt.Errorf("alipay fake: sign: %w", err)
	}
	return base64.StdEncoding.EncodeToString(sig), nil
}

// VerifyText reports whether sig (base64) is key's RSA2 signature of text.
func VerifyText(key *rsa.PublicKey, text, sig string) bool {
	raw, err := base64.StdEncoding.DecodeString(sig)
	if err != nil || len(raw) == 0 {
		return false
	}
	sum := sha256.Sum256([]byte(text))
	return rsa.VerifyPKCS1v15(key, crypto.SHA256, sum[:], raw) == nil
}

// Sign sets params' sign (over SigningString) and sign_type RSA2, as Alipay
// signs a notify; withoutSignType as for SigningString.
func Sign(key *rsa.PrivateKey, params url.Values, withoutSignType bool) error {
	params.Set("sign_type", "RSA2")
	sig, err := SignText(key, SigningString(params, withoutSignType))
	if err != nil {
		return err
	}
	params.Set("sign", sig)
	return nil
}

// Verify checks a signed request of an app: sign_type RSA2 (Alipay's
// "RSA", SHA1withRSA, is refused: no app should still use it) and a
// signature over every other parameter, sign_type included.
func Verify(key *rsa.PublicKey, params url.Values) bool {
	if params.Get("sign_type") != "RSA2" {
		return false
	}
	return VerifyText(key, SigningString(params, false), params.Get("sign"))
}

// GenerateKey makes a 2048-bit RSA key, Alipay's size.
func GenerateKey() (*rsa.PrivateKey, error) {
	k, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return nil, fmt.Errorf("alipay fake: generate key: %w", err)
	}
	return k, nil
}

// PrivateKeyPEM is key as a PKCS #8 "PRIVATE KEY" PEM block (what Alipay's
// key tool calls the PKCS8 format).
func PrivateKeyPEM(key *rsa.PrivateKey) string {
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		panic(err) // an RSA key always marshals
	}
	return string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}))
}

// PublicKeyPEM is key as a PKIX "PUBLIC KEY" PEM block, the form the
// Alipay console shows ("支付宝公钥") with its header added.
func PublicKeyPEM(key *rsa.PublicKey) string {
	der, err := x509.MarshalPKIXPublicKey(key)
	if err != nil {
		panic(err)
	}
	return string(pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der}))
}

// ParsePublicKeyPEM reads a PKIX or PKCS #1 RSA public key in PEM.
func ParsePublicKeyPEM(s string) (*rsa.PublicKey, error) {
	b, _ := pem.Decode([]byte(s))
	if b == nil {
		return nil, errors.New("alipay fake: no PEM block in public key")
	}
	if k, err := x509.ParsePKCS1PublicKey(b.Bytes); err == nil {
		return k, nil
	}
	k, err := x509.ParsePKIXPublicKey(b.Bytes)
	if err != nil {
		return nil, fmt.Errorf("alipay fake: public key: %w", err)
	}
	rk, ok := k.(*rsa.PublicKey)
	if !ok {
		return nil, errors.New("alipay fake: public key is not RSA")
	}
	return rk, nil
}

// ParsePrivateKeyPEM reads a PKCS #8 or PKCS #1 RSA private key in PEM.
func ParsePrivateKeyPEM(s string) (*rsa.PrivateKey, error) {
	b, _ := pem.Decode([]byte(s))
	if b == nil {
		return nil, errors.New("alipay fake: no PEM block in private key")
	}
	if k, err := x509.ParsePKCS1PrivateKey(b.Bytes); err == nil {
		return k, nil
	}
	k, err := x509.ParsePKCS8PrivateKey(b.Bytes)
	if err != nil {
		return nil, fmt.Errorf("alipay fake: private key: %w", err)
	}
	rk, ok := k.(*rsa.PrivateKey)
	if !ok {
		return nil, errors.New("alipay fake: private key is not RSA")
	}
	return rk, nil
}
