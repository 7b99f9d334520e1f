package fakekit

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
)

// The RSA of the gateways that sign with it (Alipay's RSA2, WeChat Pay's
// WECHATPAY2-SHA256-RSA2048): 2048-bit keys, SHA256withRSA (PKCS #1 v1.5)
// signatures in standard padded base64, keys in PEM. Each fake names its
// own errors by wrapping these.

// GenerateRSAKey makes a 2048-bit RSA key.
func GenerateRSAKey() (*rsa.PrivateKey, error) {
	return rsa.GenerateKey(rand.Reader, 2048)
}

// SignRSA is SHA256withRSA (PKCS #1 v1.5) of text, base64 (standard,
// padded).
func SignRSA(key *rsa.PrivateKey, text string) (string, error) {
	sum := sha256.Sum256([]byte(text))
	sig, err := rsa.SignPKCS1v15(rand.Reader, key, crypto.SHA256, sum[:])
	if err != nil {
		return "", err
	}
	return base64.StdEncoding.EncodeToString(sig), nil
}

// VerifyRSA reports whether sig (base64) is key's SignRSA of text.
func VerifyRSA(key *rsa.PublicKey, text, sig string) bool {
	raw, err := base64.StdEncoding.DecodeString(sig)
	if err != nil || len(raw) == 0 {
		return false
	}
	sum := sha256.Sum256([]byte(text))
	return rsa.VerifyPKCS1v15(key, crypto.SHA256, sum[:], raw) == nil
}

// PrivateKeyPEM is key as a PKCS #8 "PRIVATE KEY" PEM block.
func PrivateKeyPEM(key *rsa.PrivateKey) string {
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		panic(err) // an RSA key always marshals
	}
	return string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}))
}

// PublicKeyPEM is key as a PKIX "PUBLIC KEY" PEM block.
func PublicKeyPEM(key *rsa.PublicKey) string {
	der, err := x509.MarshalPKIXPublicKey(key)
	if err != nil {
		panic(err)
	}
	return string(pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der}))
}

// ParsePrivateKeyPEM reads a PKCS #8 or PKCS #1 RSA private key in PEM.
func ParsePrivateKeyPEM(s string) (*rsa.PrivateKey, error) {
	b, _ := pem.Decode([]byte(s))
	if b == nil {
		return nil, errors.New("no PEM block in private key")
	}
	if k, err := x509.ParsePKCS1PrivateKey(b.Bytes); err == nil {
		return k, nil
	}
	k, err := x509.ParsePKCS8PrivateKey(b.Bytes)
	if err != nil {
		return nil, fmt.Errorf("private key: %w", err)
	}
	rk, ok := k.(*rsa.PrivateKey)
	if !ok {
		return nil, errors.New("private key is not RSA")
	}
	return rk, nil
}

// ParsePublicKeyPEM reads a PKIX or PKCS #1 RSA public key in PEM.
func ParsePublicKeyPEM(s string) (*rsa.PublicKey, error) {
	b, _ := pem.Decode([]byte(s))
	if b == nil {
		return nil, errors.New("no PEM block in public key")
	}
	if k, err := x509.ParsePKCS1PublicKey(b.Bytes); err == nil {
		return k, nil
	}
	k, err := x509.ParsePKIXPublicKey(b.Bytes)
	if err != nil {
		return nil, fmt.Errorf("public key: %w", err)
	}
	rk, ok := k.(*rsa.PublicKey)
	if !ok {
		return nil, errors.New("public key is not RSA")
	}
	return rk, nil
}
