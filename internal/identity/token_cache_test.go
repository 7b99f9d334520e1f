package identity

import (
	"fmt"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"
)

func TestVerifiedTokensAnswerOnlyUntilTheTokenExpires(t *testing.T) {
	t.Parallel()
	c := newVerifiedTokens(8)
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	v := verifiedToken{customer: uuid.New(), jti: "j", exp: now.Add(time.Hour)}
	_, ok := c.get("tok", now)
	require.False(t, ok, "nothing verified yet")
	c.put("tok", v, now)
	got, ok := c.get("tok", now.Add(time.Hour-time.Nanosecond))
	require.True(t, ok)
	require.Equal(t, v, got)
	_, ok = c.get("tok", now.Add(time.Hour))
	require.False(t, ok, "an expired token is verified again, and refused")
	_, ok = c.get("tok2", now)
	require.False(t, ok)
}

func TestVerifiedTokensStayWithinTheirBound(t *testing.T) {
	t.Parallel()
	c := newVerifiedTokens(100)
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	for i := range 1000 {
		c.put(fmt.Sprint("tok", i), verifiedToken{exp: now.Add(time.Hour)}, now)
		require.LessOrEqual(t, len(c.entries), 100)
	}
	_, ok := c.get("tok999", now)
	require.True(t, ok, "the newest token is kept")
}

// Verifying a token from the cache answers what verifying it again would:
// the same customer, jti and generation, and "expired" once the clock
// passes exp.
func TestCachedAccessTokenIsVerifiedLikeAFreshOne(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	s := &Service{clock: func() time.Time { return now }, jwtKey: []byte("0123456789abcdef0123456789abcdef"), jwtTTL: time.Hour,
		verified: newVerifiedTokens(tokenCacheSize)}
	customer := uuid.New()
	tok, err := s.issueToken(customer, 7)
	require.NoError(t, err)
	v, reason := s.verifyToken(tok.Token)
	require.Empty(t, reason)
	require.Len(t, s.verified.entries, 1)
	v2, reason2 := s.verifyToken(tok.Token)
	require.Empty(t, reason2)
	require.Equal(t, v, v2)
	require.Equal(t, customer, v.customer)
	require.EqualValues(t, 7, v.gen)

	now = now.Add(time.Hour)
	_, reason = s.verifyToken(tok.Token)
	require.Equal(t, "expired", reason)
	// Another signature, still canonical base64url (the last character of
	// a 32-byte signature has its two spare bits zero: A, E, I, …).
	tampered := tok.Token[:len(tok.Token)-2] + "xA"
	if tampered == tok.Token {
		tampered = tok.Token[:len(tok.Token)-2] + "xE"
	}
	_, reason = s.verifyToken(tampered)
	require.Equal(t, "bad signature", reason)
}
