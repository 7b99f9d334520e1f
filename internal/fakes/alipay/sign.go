package alipay

import (
	"crypto/rsa"
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
	sig, err := fakekit.SignRSA(key, text)
	if err != nil {
		return "", fmt.Errorf("alipay fake: sign: %w", err)
	}
	return sig, nil
}

// VerifyText reports whether sig (base64) is key's RSA2 signature of text.
func VerifyText(key *rsa.PublicKey, text, sig string) bool {
	return fakekit.VerifyRSA(key, text, sig)
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
	k, err := fakekit.GenerateRSAKey()
	if err != nil {
		return nil, fmt.Errorf("alipay fake: generate key: %w", err)
	}
	return k, nil
}

// PrivateKeyPEM is key as a PKCS #8 "PRIVATE KEY" PEM block (what Alipay's
// key tool calls the PKCS8 format).
func PrivateKeyPEM(key *rsa.PrivateKey) string {
	return fakekit.PrivateKeyPEM(key)
}

// PublicKeyPEM is key as a PKIX "PUBLIC KEY" PEM block, the form the
// Alipay console shows ("支付宝公钥") with its header added.
func PublicKeyPEM(key *rsa.PublicKey) string {
	return fakekit.PublicKeyPEM(key)
}

// ParsePublicKeyPEM reads a PKIX or PKCS #1 RSA public key in PEM.
func ParsePublicKeyPEM(s string) (*rsa.PublicKey, error) {
	k, err := fakekit.ParsePublicKeyPEM(s)
	if err != nil {
		return nil, fmt.Errorf("alipay fake: %w", err)
	}
	return k, nil
}

// ParsePrivateKeyPEM reads a PKCS #8 or PKCS #1 RSA private key in PEM.
func ParsePrivateKeyPEM(s string) (*rsa.PrivateKey, error) {
	k, err := fakekit.ParsePrivateKeyPEM(s)
	if err != nil {
		return nil, fmt.Errorf("alipay fake: %w", err)
	}
	return k, nil
}
