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
	// Enrolling marks an admin session whose admin has no confirmed second
	// factor while one is required ([admin].require_2fa): it may call only
	// the procedures the interceptor was given as enrolment procedures.
	Enrolling bool
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
