// Package auth is who is calling: the principal in the request context, the
// credential layers that establish it, and the permission table that every
// procedure is checked against.
//
// An admin may also call with an API key (x-api-key: ak_…), which acts as
// the admin who created it within its Scope: the interceptor checks the
// scope each procedure needs in one table (Scopes) besides the Policy.
//
// Credential layers run in the spec's order, each an HTTP middleware that
// handles only its own kind and passes the request on when it finds none:
//
//	session cookie ──▶ customer JWT (authorization: Bearer) ──▶ API key (x-api-key)
//
// No layer answers 401. The first layer that finds its credential decides:
// valid → the principal is set; invalid (bad signature, expired, revoked) →
// the request is marked rejected and no later layer may authenticate it, so
// a bad credential never falls through to a weaker identity. The operation
// then answers Unauthenticated or PermissionDenied through the policy
// interceptor.
package auth

import (
	"context"

	"github.com/google/uuid"
)

// Role is what a principal may do.
type Role string

const (
	RoleAdmin    Role = "admin"
	RoleCustomer Role = "customer"
)

// Kind is the credential kind that established a principal.
type Kind string

const (
	KindSession Kind = "session"
	KindJWT     Kind = "jwt"
	KindAPIKey  Kind = "api_key"
)

// Principal is the authenticated caller.
type Principal struct {
	Role Role
	// ID is the admin's id for RoleAdmin and the customer's id for RoleCustomer.
	ID uuid.UUID
	// Kind is the credential that established it.
	Kind Kind
	// CredentialID names the credential for logs and audit (an API key's id,
	// a session id prefix); never a secret.
	CredentialID string
	// Scope is what an admin API key may do; zero for every other
	// credential (an admin session may do all an admin may).
	Scope Scope
}

// IsAdmin reports whether p is an admin.
func (p Principal) IsAdmin() bool { return p.Role == RoleAdmin }

// String is "admin:<id>" or "customer:<id>", for logs and the audit log.
func (p Principal) String() string { return string(p.Role) + ":" + p.ID.String() }

// state is the per-request authentication state the layers share.
type state struct {
	principal *Principal
	// rejected is the kind whose credential was present but invalid.
	rejected Kind
	reason   string
}

type ctxKey struct{}

func stateFrom(ctx context.Context) *state {
	s, _ := ctx.Value(ctxKey{}).(*state)
	return s
}

// WithPrincipal returns ctx carrying p (tests and background jobs acting as
// someone use it; requests get theirs from the layers).
func WithPrincipal(ctx context.Context, p Principal) context.Context {
	return context.WithValue(ctx, ctxKey{}, &state{principal: &p})
}

// FromContext returns the caller, if the request is authenticated.
func FromContext(ctx context.Context) (Principal, bool) {
	s := stateFrom(ctx)
	if s == nil || s.principal == nil {
		return Principal{}, false
	}
	return *s.principal, true
}

// Rejected reports the kind of a credential that was present but invalid, and
// why ("expired", "bad signature", "revoked"), for logs.
func Rejected(ctx context.Context) (Kind, string, bool) {
	s := stateFrom(ctx)
	if s == nil || s.rejected == "" {
		return "", "", false
	}
	return s.rejected, s.reason, true
}
