package secrets

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
)

// Prefix starts every sealed value; the version follows it.
const Prefix = "enc:"

// prefixV1 is the form this package writes.
const prefixV1 = Prefix + "v1:"

// KeySize is the size of a key: AES-256.
const KeySize = 32

// MaxPlaintext bounds what Seal takes: a config value is a few hundred
// bytes, and the config as a whole is bounded far below this.
const MaxPlaintext = 64 << 10

var (
	// ErrNoKey: there is no keyring (no [secrets].keys) to seal or open with.
	ErrNoKey = errors.New("no encryption key is configured ([secrets].keys)")
	// ErrUnknownKey: the value was sealed under a key id the keyring lacks.
	ErrUnknownKey = errors.New("sealed under a key that [secrets].keys does not hold")
	// ErrMalformed: the value starts like a sealed one but is not one.
	ErrMalformed = errors.New("malformed sealed value")
	// ErrNotAuthentic: the key is known but the value does not open under
	// it with this associated data: altered, moved from another owner, or
	// sealed under another key of the same id.
	ErrNotAuthentic = errors.New("does not decrypt: altered, moved from another owner (interface, product, order) or property, or sealed under another key of that id")
)

// keyIDRE is what a key id may be: it travels in the sealed value (so no
// ":") and in environment variable names (PAYMENTD_SECRETS__KEYS__<ID>,
// which koanf lowercases; "__" would split the name), so lowercase words
// joined by single underscores.
var keyIDRE = regexp.MustCompile(`^[a-z0-9]+(_[a-z0-9]+)*$`)

// MaxKeyIDLen bounds a key id.
const MaxKeyIDLen = 32

// ValidKeyID reports whether id may name a key.
func ValidKeyID(id string) bool { return len(id) <= MaxKeyIDLen && keyIDRE.MatchString(id) }

// DecodeKey decodes a key as the configuration holds it: standard base64
// (padded, as `openssl rand -base64 32` prints it) of exactly KeySize bytes.
// The error never quotes the value.
func DecodeKey(b64 string) ([]byte, error) {
	raw, err := base64.StdEncoding.Strict().DecodeString(strings.TrimSpace(b64))
	if err != nil {
		return nil, errors.New("is not standard base64")
	}
	if len(raw) != KeySize {
		return nil, fmt.Errorf("must be %d bytes, got %d", KeySize, len(raw))
	}
	return raw, nil
}

// Keyring is a set of keys by id, one of which (the current one) seals. It
// is immutable and safe for concurrent use. A nil *Keyring has no key: it
// seals nothing and opens nothing (ErrNoKey).
type Keyring struct {
	current string
	aeads   map[string]cipher.AEAD
}

// New returns a keyring whose key current seals and every key of keys
// opens. keys maps an id (ValidKeyID) to KeySize bytes.
func New(current string, keys map[string][]byte) (*Keyring, error) {
	if _, ok := keys[current]; !ok {
		return nil, fmt.Errorf("the current key %q is not among the keys", current)
	}
	k := &Keyring{current: current, aeads: make(map[string]cipher.AEAD, len(keys))}
	for id, key := range keys {
		if !ValidKeyID(id) {
			return nil, fmt.Errorf("key id %q: lowercase letters and digits, words joined by single underscores, at most %d characters", id, MaxKeyIDLen)
		}
		if len(key) != KeySize {
			return nil, fmt.Errorf("key %q: must be %d bytes, got %d", id, KeySize, len(key))
		}
		block, err := aes.NewCipher(key)
		if err != nil {
			return nil, fmt.Errorf("key %q: %w", id, err)
		}
		aead, err := cipher.NewGCM(block)
		if err != nil {
			return nil, fmt.Errorf("key %q: %w", id, err)
		}
		k.aeads[id] = aead
	}
	return k, nil
}

// Current is the id of the key that seals ("" for a nil keyring).
func (k *Keyring) Current() string {
	if k == nil {
		return ""
	}
	return k.current
}

// IDs are the ids of every key, sorted.
func (k *Keyring) IDs() []string {
	if k == nil {
		return nil
	}
	ids := make([]string, 0, len(k.aeads))
	for id := range k.aeads {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids
}

// Seal encrypts plaintext under the current key, bound to aad, with a
// fresh random nonce. The same plaintext sealed twice gives two different
// values.
func (k *Keyring) Seal(plaintext string, aad []byte) (string, error) {
	if k == nil {
		return "", ErrNoKey
	}
	if len(plaintext) > MaxPlaintext {
		return "", fmt.Errorf("a secret of %d bytes is over the limit of %d", len(plaintext), MaxPlaintext)
	}
	aead := k.aeads[k.current]
	buf := make([]byte, aead.NonceSize(), aead.NonceSize()+len(plaintext)+aead.Overhead())
	if _, err := rand.Read(buf); err != nil {
		return "", err
	}
	buf = aead.Seal(buf, buf, []byte(plaintext), aad)
	return prefixV1 + k.current + ":" + base64.RawURLEncoding.EncodeToString(buf), nil
}

// Open decrypts a sealed value bound to aad. It answers the exact
// plaintext or an error (ErrNoKey, ErrUnknownKey, ErrMalformed,
// ErrNotAuthentic, wrapped with the key id); never anything else.
func (k *Keyring) Open(sealed string, aad []byte) (string, error) {
	id, body, err := parse(sealed)
	if err != nil {
		return "", err
	}
	if k == nil {
		return "", fmt.Errorf("key %q: %w", id, ErrNoKey)
	}
	aead, ok := k.aeads[id]
	if !ok {
		return "", fmt.Errorf("key %q: %w", id, ErrUnknownKey)
	}
	raw, err := base64.RawURLEncoding.Strict().DecodeString(body)
	if err != nil || len(raw) < aead.NonceSize()+aead.Overhead() {
		return "", fmt.Errorf("key %q: %w", id, ErrMalformed)
	}
	plain, err := aead.Open(nil, raw[:aead.NonceSize()], raw[aead.NonceSize():], aad)
	if err != nil {
		return "", fmt.Errorf("key %q: %w", id, ErrNotAuthentic)
	}
	return string(plain), nil
}

// IsSealed reports whether s has the form of a sealed value (of any
// version: a value of a later version is not clear text either).
func IsSealed(s string) bool { return strings.HasPrefix(s, Prefix) }

// KeyID is the id of the key s was sealed under; false when s is not a
// well-formed sealed value.
func KeyID(s string) (string, bool) {
	id, _, err := parse(s)
	return id, err == nil
}

func parse(s string) (id, body string, err error) {
	rest, ok := strings.CutPrefix(s, prefixV1)
	if !ok {
		if IsSealed(s) {
			return "", "", fmt.Errorf("%w: an unknown version", ErrMalformed)
		}
		return "", "", fmt.Errorf("%w: not sealed", ErrMalformed)
	}
	id, body, ok = strings.Cut(rest, ":")
	if !ok || !ValidKeyID(id) || body == "" {
		return "", "", ErrMalformed
	}
	return id, body, nil
}
