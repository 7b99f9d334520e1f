package identity

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/lestrrat-go/jwx/v3/jwa"
	"github.com/lestrrat-go/jwx/v3/jws"
	"github.com/lestrrat-go/jwx/v3/jwt"

	"github.com/rustbill/paymentd/internal/auth"
	"github.com/rustbill/paymentd/internal/store"
)

// TokenIssuer is the iss claim of every access token.
const TokenIssuer = "paymentd"

// GenerationClaim is the private claim that carries the customer's token
// generation (customers.token_generation) when the token was issued: the
// token works only while it is still the customer's generation.
const GenerationClaim = "gen"

const (
	// maxTokenLen bounds the work spent on an Authorization header; our
	// tokens are about 300 bytes.
	maxTokenLen = 4096
	// tokenLeeway tolerates clocks of instances that differ slightly for iat
	// and nbf; exp is checked strictly on our own clock.
	tokenLeeway = 5 * time.Second
)

// issueToken signs an access token for customer id in token generation gen:
// HS256 over sub, iss, iat, exp, a random jti and gen.
func (s *Service) issueToken(id uuid.UUID, gen int64) (AccessToken, error) {
	now := s.now().Truncate(time.Second)
	exp := now.Add(s.jwtTTL)
	tok, err := jwt.NewBuilder().
		Subject(id.String()).
		Issuer(TokenIssuer).
		IssuedAt(now).
		Expiration(exp).
		JwtID(uuid.NewString()).
		Claim(GenerationClaim, gen).
		Build()
	if err != nil {
		return AccessToken{}, err
	}
	signed, err := jwt.Sign(tok, jwt.WithKey(jwa.HS256(), s.jwtKey))
	if err != nil {
		return AccessToken{}, err
	}
	return AccessToken{Token: string(signed), ExpiresAt: exp}, nil
}

// JWTAuthenticator checks `authorization: Bearer <token>`: a customer's access
// token, verified without the database, so any instance can check it; then
// its generation and the account's state against the customer's access
// state (access.go), which a second's memory, the shared cache and at worst
// the database answer.
type JWTAuthenticator struct{ svc *Service }

var _ auth.Authenticator = (*JWTAuthenticator)(nil)

// Kind is auth.KindJWT.
func (*JWTAuthenticator) Kind() auth.Kind { return auth.KindJWT }

// Authenticate returns the customer of a valid token; ErrNoCredential when
// the request has no Bearer authorization; *auth.Invalid for any token that
// is not one of ours, unexpired, signed HS256 with our key, of the
// customer's current generation, of an account that exists and is not
// disabled; another error when the access state could not be read.
func (a *JWTAuthenticator) Authenticate(ctx context.Context, r *http.Request) (auth.Principal, error) {
	values := r.Header.Values("Authorization")
	if len(values) == 0 {
		return auth.Principal{}, auth.ErrNoCredential
	}
	scheme, token, _ := strings.Cut(values[0], " ")
	if !strings.EqualFold(scheme, "Bearer") {
		// Another scheme is not this layer's kind of credential.
		return auth.Principal{}, auth.ErrNoCredential
	}
	if len(values) > 1 {
		return auth.Principal{}, &auth.Invalid{Reason: "more than one authorization header"}
	}
	v, reason := a.svc.verifyToken(strings.TrimSpace(token))
	if reason != "" {
		return auth.Principal{}, &auth.Invalid{Reason: reason}
	}
	st, err := a.svc.access.get(ctx, v.customer, v.gen)
	switch {
	case errors.Is(err, store.ErrNotFound):
		return auth.Principal{}, &auth.Invalid{Reason: "customer not found"}
	case err != nil:
		return auth.Principal{}, err
	case st.Disabled:
		return auth.Principal{}, &auth.Invalid{Reason: "customer disabled"}
	case v.gen != st.Generation:
		// Older: ended by a password change, a sign-out everywhere, or
		// disabling. Newer cannot be (get asks the database then).
		return auth.Principal{}, &auth.Invalid{Reason: "token ended (generation " + strconv.FormatInt(v.gen, 10) + ", now " + strconv.FormatInt(st.Generation, 10) + ")"}
	}
	return auth.Principal{Role: auth.RoleCustomer, ID: v.customer, Kind: auth.KindJWT, CredentialID: "jwt:" + v.jti}, nil
}

// verifyToken returns the customer id, jti and generation of a token that
// is ours, well-formed and unexpired, or a reason (for logs; never the
// token or its claims) why it is refused. Whether its generation is still
// the customer's is for the caller to check.
func (s *Service) verifyToken(token string) (verifiedToken, string) {
	if token == "" {
		return verifiedToken{}, "empty bearer token"
	}
	if len(token) > maxTokenLen {
		return verifiedToken{}, "token too long"
	}
	now := s.now()
	if v, ok := s.verified.get(token, now); ok {
		return v, ""
	}
	// Only the compact form, in canonical base64url, with our one
	// algorithm: "alg":"none", HS512, RS256, a JSON-serialised JWS and a
	// padded or otherwise re-encoded token are refused before any
	// verification.
	if alg, ok := compactAlg(token); !ok {
		return verifiedToken{}, "malformed token"
	} else if alg != jwa.HS256().String() {
		return verifiedToken{}, "algorithm not allowed"
	}
	tok, err := jwt.ParseString(token,
		jwt.WithKey(jwa.HS256(), s.jwtKey),
		jwt.WithValidate(true),
		jwt.WithClock(jwt.ClockFunc(func() time.Time { return now })),
		jwt.WithAcceptableSkew(tokenLeeway),
		jwt.WithIssuer(TokenIssuer),
		jwt.WithRequiredClaim(jwt.SubjectKey),
		jwt.WithRequiredClaim(jwt.ExpirationKey),
		jwt.WithRequiredClaim(jwt.IssuedAtKey),
		jwt.WithRequiredClaim(jwt.JwtIDKey),
	)
	switch {
	case err == nil:
	case errors.Is(err, jws.VerifyError()), errors.Is(err, jws.VerificationError()):
		return verifiedToken{}, "bad signature"
	case errors.Is(err, jwt.TokenExpiredError()):
		return verifiedToken{}, "expired"
	case errors.Is(err, jwt.ValidateError()):
		return verifiedToken{}, "claims not valid"
	default:
		return verifiedToken{}, "malformed token"
	}
	exp, ok := tok.Expiration()
	if !ok || !now.Before(exp) {
		return verifiedToken{}, "expired"
	}
	sub, _ := tok.Subject()
	id, err := uuid.Parse(sub)
	if err != nil || id.String() != sub || id == uuid.Nil {
		return verifiedToken{}, "subject is not a customer id"
	}
	jti, _ := tok.JwtID()
	var rawGen any
	if err := tok.Get(GenerationClaim, &rawGen); err != nil {
		return verifiedToken{}, "no token generation"
	}
	gen, ok := generationOf(rawGen)
	if !ok {
		return verifiedToken{}, "token generation not valid"
	}
	v := verifiedToken{customer: id, jti: jti, gen: gen, exp: exp}
	s.verified.put(token, v, now)
	return v, ""
}

// generationOf reads the gen claim as JSON decoded it: a whole number from
// 0 to 2^53 (a float64 holds every such integer exactly).
func generationOf(v any) (int64, bool) {
	switch g := v.(type) {
	case float64:
		if g < 0 || g > 1<<53 || g != math.Trunc(g) {
			return 0, false
		}
		return int64(g), true
	case json.Number:
		n, err := strconv.ParseInt(string(g), 10, 64)
		return n, err == nil && n >= 0
	case int64:
		return g, g >= 0
	}
	return 0, false
}

// compactAlg returns the alg of a compact JWS "header.payload.signature"
// whose three segments are canonical base64url (canonicalSegment).
func compactAlg(token string) (string, bool) {
	if strings.Count(token, ".") != 2 {
		return "", false
	}
	head, rest, _ := strings.Cut(token, ".")
	payload, sig, _ := strings.Cut(rest, ".")
	if !canonicalSegment(head) || !canonicalSegment(payload) || !canonicalSegment(sig) {
		return "", false
	}
	raw, err := base64.RawURLEncoding.DecodeString(head)
	if err != nil {
		return "", false
	}
	var h struct {
		Alg *string `json:"alg"`
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	if err := dec.Decode(&h); err != nil || h.Alg == nil {
		return "", false
	}
	return *h.Alg, true
}

// base64url is the alphabet of RFC 4648 §5.
const base64url = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"

// canonicalSegment reports whether s is base64url as RFC 7515 writes a JWS
// segment: only the 64 letters (no "=" padding, no line breaks, which Go's
// and jwx's decoders skip), a length a whole number of bytes encodes to,
// and the unused low bits of the last character zero. A lenient decoder
// reads "sig", "sig=" and "sig" with its spare bits set as the same bytes;
// taking only the one form keeps a token from having several spellings
// (the outside probe's token+"=" was accepted: no impact found, but a
// token is one string).
func canonicalSegment(s string) bool {
	for i := range len(s) {
		if strings.IndexByte(base64url, s[i]) < 0 {
			return false
		}
	}
	if len(s) == 0 {
		return true
	}
	last := strings.IndexByte(base64url, s[len(s)-1])
	switch len(s) % 4 {
	case 1:
		return false // six bits: not a whole byte
	case 2:
		return last&0x0f == 0 // one byte: 8 of 12 bits used
	case 3:
		return last&0x03 == 0 // two bytes: 16 of 18 bits used
	}
	return true
}
