package secrets_test

import (
	"bytes"
	"encoding/base64"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/rustbill/paymentd/internal/secrets"
)

func key(b byte) []byte { return bytes.Repeat([]byte{b}, secrets.KeySize) }

func ring(t *testing.T, current string, keys map[string][]byte) *secrets.Keyring {
	t.Helper()
	k, err := secrets.New(current, keys)
	require.NoError(t, err)
	return k
}

func TestSealedValueOpensOnlyWithItsKeyAndItsAssociatedData(t *testing.T) {
	t.Parallel()
	k := ring(t, "k1", map[string][]byte{"k1": key(1)})
	aad := []byte("gateway_interface:a:[\"key\"]")

	s1, err := k.Seal("merchant-key-123", aad)
	require.NoError(t, err)
	s2, err := k.Seal("merchant-key-123", aad)
	require.NoError(t, err)
	require.NotEqual(t, s1, s2, "a fresh nonce every time")
	require.True(t, strings.HasPrefix(s1, "enc:v1:k1:"), s1)
	require.NotContains(t, s1, "merchant-key-123")
	id, ok := secrets.KeyID(s1)
	require.True(t, ok)
	require.Equal(t, "k1", id)

	got, err := k.Open(s1, aad)
	require.NoError(t, err)
	require.Equal(t, "merchant-key-123", got)

	_, err = k.Open(s1, []byte("gateway_interface:b:[\"key\"]"))
	require.ErrorIs(t, err, secrets.ErrNotAuthentic, "moved to another owner")

	// Any byte changed: not authentic (or not even well-formed).
	body := s1[len("enc:v1:k1:"):]
	raw, err := base64.RawURLEncoding.DecodeString(body)
	require.NoError(t, err)
	for i := range raw {
		c := bytes.Clone(raw)
		c[i] ^= 0x01
		_, err := k.Open("enc:v1:k1:"+base64.RawURLEncoding.EncodeToString(c), aad)
		require.ErrorIs(t, err, secrets.ErrNotAuthentic, "byte %d", i)
	}
	// The same bytes under another key id.
	other := ring(t, "k1", map[string][]byte{"k1": key(2)})
	_, err = other.Open(s1, aad)
	require.ErrorIs(t, err, secrets.ErrNotAuthentic)
}

func TestRotatedKeyringSealsWithTheCurrentKeyAndOpensWithEvery(t *testing.T) {
	t.Parallel()
	old := ring(t, "k1", map[string][]byte{"k1": key(1)})
	sealedOld, err := old.Seal("v", nil)
	require.NoError(t, err)

	both := ring(t, "k2", map[string][]byte{"k1": key(1), "k2": key(2)})
	require.Equal(t, "k2", both.Current())
	require.Equal(t, []string{"k1", "k2"}, both.IDs())
	got, err := both.Open(sealedOld, nil)
	require.NoError(t, err)
	require.Equal(t, "v", got)
	sealedNew, err := both.Seal("v", nil)
	require.NoError(t, err)
	require.True(t, strings.HasPrefix(sealedNew, "enc:v1:k2:"))

	_, err = old.Open(sealedNew, nil)
	require.ErrorIs(t, err, secrets.ErrUnknownKey)
	require.ErrorContains(t, err, `key "k2"`)
}

func TestMalformedAndKeylessValuesAreErrorsNamingNoSecret(t *testing.T) {
	t.Parallel()
	k := ring(t, "k1", map[string][]byte{"k1": key(1)})
	for _, s := range []string{"", "clear", "enc:", "enc:v1:", "enc:v1:k1", "enc:v1:k1:", "enc:v1:K1:AAAA", "enc:v1:k1:!!!!",
		"enc:v1:k1:AAAA", "enc:v2:k1:AAAA", "enc:v1:k1:" + strings.Repeat("A", 38) + "=="} {
		_, err := k.Open(s, nil)
		require.Error(t, err, "%q", s)
	}
	var none *secrets.Keyring
	_, err := none.Seal("v", nil)
	require.ErrorIs(t, err, secrets.ErrNoKey)
	sealed, err := k.Seal("v", nil)
	require.NoError(t, err)
	_, err = none.Open(sealed, nil)
	require.ErrorIs(t, err, secrets.ErrNoKey)
	require.Equal(t, "", none.Current())

	require.True(t, secrets.IsSealed("enc:v9:x"))
	require.False(t, secrets.IsSealed("encrypted"))
}

func TestKeysAndIDsAreChecked(t *testing.T) {
	t.Parallel()
	_, err := secrets.New("k1", map[string][]byte{"k2": key(1)})
	require.ErrorContains(t, err, "current key")
	_, err = secrets.New("K1", map[string][]byte{"K1": key(1)})
	require.ErrorContains(t, err, "key id")
	_, err = secrets.New("k1", map[string][]byte{"k1": key(1)[:16]})
	require.ErrorContains(t, err, "32 bytes")

	for _, id := range []string{"k1", "2026_01", "prod_a"} {
		require.True(t, secrets.ValidKeyID(id), id)
	}
	for _, id := range []string{"", "K1", "a:b", "a__b", "_a", "a_", "a-b", strings.Repeat("a", 33)} {
		require.False(t, secrets.ValidKeyID(id), id)
	}

	good := base64.StdEncoding.EncodeToString(key(7))
	raw, err := secrets.DecodeKey(good)
	require.NoError(t, err)
	require.Equal(t, key(7), raw)
	_, err = secrets.DecodeKey(base64.StdEncoding.EncodeToString(key(7)[:16]))
	require.ErrorContains(t, err, "must be 32 bytes, got 16")
	_, err = secrets.DecodeKey("not base64!")
	require.ErrorContains(t, err, "base64")
	require.NotContains(t, err.Error(), "not base64!")
}
