package identity_test

import (
	"encoding/base64"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/google/uuid"
	"github.com/lestrrat-go/jwx/v3/jwa"
	"github.com/lestrrat-go/jwx/v3/jwt"
	"github.com/stretchr/testify/require"

	"github.com/rustbill/paymentd/internal/identity"
)

// sign makes a token the way an attacker who knows (or guesses) a key would.
func sign(t *testing.T, alg jwa.SignatureAlgorithm, key []byte, claims map[string]any) string {
	t.Helper()
	tok := jwt.New()
	for k, v := range claims {
		require.NoError(t, tok.Set(k, v))
	}
	signed, err := jwt.Sign(tok, jwt.WithKey(alg, key))
	require.NoError(t, err)
	return string(signed)
}

func b64(v any) string {
	b, _ := json.Marshal(v)
	return base64.RawURLEncoding.EncodeToString(b)
}

func TestForgedAndExpiredAccessTokensAreRefused(t *testing.T) {
	t.Parallel()
	e := setup(t)
	victim := e.register(t, "victim@example.com")
	other := e.register(t, "other@example.com")
	now := e.clock.Now()
	claims := func(sub string) map[string]any {
		return map[string]any{
			"sub": sub, "iss": identity.TokenIssuer, "iat": now, "exp": now.Add(time.Hour), "jti": uuid.NewString(),
			identity.GenerationClaim: 0,
		}
	}
	secret := []byte(jwtSecret)

	// The real one, to show the claims above are otherwise acceptable.
	_, err := e.me(bearer(sign(t, jwa.HS256(), secret, claims(victim.id))))
	require.NoError(t, err)

	parts := strings.Split(other.token, ".")
	var payload map[string]any
	raw, err := base64.RawURLEncoding.DecodeString(parts[1])
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(raw, &payload))
	payload["sub"] = victim.id
	tampered := parts[0] + "." + b64(payload) + "." + parts[2]

	noExp := claims(victim.id)
	delete(noExp, "exp")
	wrongIss := claims(victim.id)
	wrongIss["iss"] = "someone-else"
	genWith := func(v any) map[string]any {
		c := claims(victim.id)
		if v == nil {
			delete(c, identity.GenerationClaim)
		} else {
			c[identity.GenerationClaim] = v
		}
		return c
	}

	forged := map[string]string{
		"alg none":               b64(map[string]string{"alg": "none", "typ": "JWT"}) + "." + b64(claims(victim.id)) + ".",
		"alg none, signature":    b64(map[string]string{"alg": "none"}) + "." + b64(claims(victim.id)) + "." + parts[2],
		"HS512 with our secret":  sign(t, jwa.HS512(), secret, claims(victim.id)),
		"HS384 with our secret":  sign(t, jwa.HS384(), secret, claims(victim.id)),
		"HS256 with another key": sign(t, jwa.HS256(), []byte("another-secret-another-secret-another"), claims(victim.id)),
		"tampered payload":       tampered,
		"header says HS512":      b64(map[string]string{"alg": "HS512"}) + "." + parts[1] + "." + parts[2],
		"sub not a UUID":         sign(t, jwa.HS256(), secret, claims("admin")),
		"sub a nil UUID":         sign(t, jwa.HS256(), secret, claims(uuid.Nil.String())),
		"sub UUID in braces":     sign(t, jwa.HS256(), secret, claims("{"+victim.id+"}")),
		"no exp":                 sign(t, jwa.HS256(), secret, noExp),
		"wrong issuer":           sign(t, jwa.HS256(), secret, wrongIss),
		// The generation is signed like the rest; one the customer has not
		// reached, or none, is no better than an ended one.
		"no generation":         sign(t, jwa.HS256(), secret, genWith(nil)),
		"generation ahead":      sign(t, jwa.HS256(), secret, genWith(5)),
		"generation negative":   sign(t, jwa.HS256(), secret, genWith(-1)),
		"generation fractional": sign(t, jwa.HS256(), secret, genWith(0.5)),
		"generation a string":   sign(t, jwa.HS256(), secret, genWith("0")),
		"garbage":               "not.a.token",
		"two segments":          parts[0] + "." + parts[1],
		"json serialization":    `{"payload":"` + parts[1] + `","signatures":[{"protected":"` + parts[0] + `","signature":"` + parts[2] + `"}]}`,
		"too long":              other.token + strings.Repeat("A", 5000),
		// A genuine token in a form no encoder writes: padded, or with the
		// unused bits of a segment's last character set. Only the canonical
		// unpadded base64url is taken.
		"signature padded":           other.token + "=",
		"signature padded twice":     other.token + "==",
		"payload padded":             parts[0] + "." + parts[1] + "=." + parts[2],
		"header padded":              parts[0] + "=." + parts[1] + "." + parts[2],
		"signature's spare bits set": parts[0] + "." + parts[1] + "." + spareBitsSet(parts[2]),
	}
	for name, tok := range forged {
		_, err := e.me(bearer(tok))
		require.Equal(t, connect.CodeUnauthenticated, connect.CodeOf(err), "%s: %v", name, err)
	}
	_, err = e.me(func(h http.Header) { h.Set("Authorization", "Bearer ") })
	requireCode(t, connect.CodeUnauthenticated, err)

	// The genuine token works until it expires, on the injected clock.
	_, err = e.me(bearer(victim.token))
	require.NoError(t, err)
	e.clock.Advance(24*time.Hour - time.Second)
	_, err = e.me(bearer(victim.token))
	require.NoError(t, err)
	e.clock.Advance(time.Second)
	_, err = e.me(bearer(victim.token))
	requireCode(t, connect.CodeUnauthenticated, err)
}

// spareBitsSet is seg (unpadded base64url) with the unused low bits of its
// last character set: the same bytes to a lenient decoder, another string.
func spareBitsSet(seg string) string {
	const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
	last := strings.IndexByte(alphabet, seg[len(seg)-1])
	switch len(seg) % 4 {
	case 2:
		last |= 0x0f
	case 3:
		last |= 0x03
	default:
		panic("a segment without spare bits")
	}
	return seg[:len(seg)-1] + alphabet[last:last+1]
}
