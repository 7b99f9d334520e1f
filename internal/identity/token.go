package identity

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/lestrrat-go/jwx/v3/jwa"
	"github.com/lestrrat-go/jwx/v3/jws"
	"github.com/lestrrat-go/jwx/v3/jwt"

	"github.com/rustbill/paymentd/internal/auth"
)

// TokenIssuer is the iss claim of every access token.
const TokenIssuer = "paymentd"

const (
	// maxTokenLen bounds the work spent on an Authorization header; our
	// tokens are about 300 bytes.
	maxTokenLen = 4096
	// tokenLeeway tolerates clocks of instances that differ slightly for iat
	// and nbf; exp is checked strictly on our own clock.
	tokenLeeway = 5 * time.Second
)

// issueToken signs an access token for customer id: HS256 over sub, iss,
// iat, exp and a random jti.
func (s *Service) issueToken(id uuid.UUID) (AccessToken, error) {
	now := s.now().Truncate(time.Second)
	exp := now.Add(s.jwtTTL)
	tok, err := jwt.NewBuilder().
		Subject(id.String()).
		Issuer(TokenIssuer).
		IssuedAt(now).
		Expiration(exp).
		JwtID(uuid.NewString()).
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
// token, verified without the database, so any instance can check it.
type JWTAuthenticator struct{ svc *Service }

var _ auth.Authenticator = (*JWTAuthenticator)(nil)

// Kind is auth.KindJWT.
func (*JWTAuthenticator) Kind() auth.Kind { return auth.KindJWT }

// Authenticate returns the customer of a valid token; ErrNoCredential when
// the request has no Bearer authorization; *auth.Invalid for any token that
// is not one of ours, unexpired, signed HS256 with our key.
func (a *JWTAuthenticator) Authenticate(_ context.Context, r *http.Request) (auth.Principal, error) {
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
	id, jti, reason := a.svc.verifyToken(strings.TrimSpace(token))
	if reason != "" {
		return auth.Principal{}, &auth.Invalid{Reason: reason}
	}
	return auth.Principal{Role: auth.RoleCustomer, ID: id, Kind: auth.KindJWT, CredentialID: "jwt:" + jti}, nil
}

// verifyToken returns the customer id and jti of a valid token, or a reason
// (for logs; never the token or its claims) why it is refused.
func (s *Service) verifyToken(token string) (uuid.UUID, string, string) {
	if token == "" {
		return uuid.Nil, "", "empty bearer token"
	}
	if len(token) > maxTokenLen {
		return uuid.Nil, "", "token too long"
	}
	now := s.now()
	if v, ok := s.verified.get(token, now); ok {
		return v.customer, v.jti, ""
	}
	// Only the compact form, in canonical base64url, with our one
	// algorithm: "alg":"none", HS512, RS256, a JSON-serialised JWS and a
	// padded or otherwise re-encoded token are refused before any
	// verification.
	if alg, ok := compactAlg(token); !ok {
		return uuid.Nil, "", "malformed token"
	} else if alg != jwa.HS256().String() {
		return uuid.Nil, "", "algorithm not allowed"
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
		return uuid.Nil, "", "bad signature"
	case errors.Is(err, jwt.TokenExpiredError()):
		return uuid.Nil, "", "expired"
	case errors.Is(err, jwt.ValidateError()):
		return uuid.Nil, "", "claims not valid"
	default:
		return uuid.Nil, "", "malformed token"
	}
	exp, ok := tok.Expiration()
	if !ok || !now.Before(exp) {
		return uuid.Nil, "", "expired"
	}
	sub, _ := tok.Subject()
	id, err := uuid.Parse(sub)
	if err != nil || id.String() != sub || id == uuid.Nil {
		return uuid.Nil, "", "subject is not a customer id"
	}
	jti, _ := tok.JwtID()
	s.verified.put(token, verifiedToken{customer: id, jti: jti, exp: exp}, now)
	return id, jti, ""
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
