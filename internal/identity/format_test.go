package identity

import (
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"
)

func TestAPIKeyFormatRoundTrips(t *testing.T) {
	t.Parallel()
	secret, hash, err := newSecret()
	require.NoError(t, err)
	id := uuid.New()
	key := formatAPIKey(id, secret)
	require.Len(t, key, apiKeyLen)
	gotID, gotHash, ok := parseAPIKey(key)
	require.True(t, ok)
	require.Equal(t, id, gotID)
	require.Equal(t, hash, gotHash)
}

func TestMalformedAPIKeysAreRefused(t *testing.T) {
	t.Parallel()
	secret, _, err := newSecret()
	require.NoError(t, err)
	id := uuid.New()
	key := formatAPIKey(id, secret)
	for name, k := range map[string]string{
		"empty":             "",
		"prefix only":       "pk_",
		"no secret":         apiKeyPrefix + hexID(id) + "_",
		"short":             key[:len(key)-1],
		"long":              key + "A",
		"wrong prefix":      "sk_" + key[3:],
		"upper-case id":     "pk_" + strings.ToUpper(hexID(id)) + key[35:],
		"hyphenated id":     "pk_" + id.String()[:32] + key[35:],
		"no separator":      key[:35] + "-" + key[36:],
		"padded secret":     key[:len(key)-1] + "=",
		"not base64url":     key[:len(key)-1] + "+",
		"non-canonical end": key[:len(key)-1] + string(flipLowBits(key[len(key)-1])),
	} {
		_, _, ok := parseAPIKey(k)
		require.False(t, ok, name)
	}
}

// flipLowBits returns a base64url character that decodes to the same bytes
// but sets the unused low bits, which the strict decoding refuses.
func flipLowBits(c byte) byte {
	const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
	i := strings.IndexByte(alphabet, c)
	return alphabet[i^1]
}

func TestCompactAlgReadsOnlyTheCompactHeader(t *testing.T) {
	t.Parallel()
	alg, ok := compactAlg("eyJhbGciOiJIUzI1NiJ9.e30.sig")
	require.True(t, ok)
	require.Equal(t, "HS256", alg)
	for _, tok := range []string{"", "a.b", "a.b.c.d", "!!!.e30.x", "e30.e30.x", "bnVsbA.e30.x"} {
		_, ok := compactAlg(tok)
		require.False(t, ok, tok)
	}
}

func TestSessionExpiryIsDecidedOnBothTimeouts(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	s := Session{CreatedAt: t0, LastSeenAt: t0.Add(50 * time.Minute), AbsoluteExpiresAt: t0.Add(time.Hour)}
	idle := 30 * time.Minute
	require.Empty(t, s.expiry(t0.Add(59*time.Minute), idle))
	require.Contains(t, s.expiry(t0.Add(time.Hour), idle), "absolute")
	s.AbsoluteExpiresAt = t0.Add(10 * time.Hour)
	require.Empty(t, s.expiry(t0.Add(79*time.Minute), idle))
	require.Contains(t, s.expiry(t0.Add(80*time.Minute), idle), "idle")
}
