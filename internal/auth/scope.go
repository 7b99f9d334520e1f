package auth

import (
	"context"
	"errors"
	"fmt"

	"connectrpc.com/connect"
)

// Scope is what an admin API key may do. An admin's session may do
// everything an admin may; a key only what its scope covers, and the scopes
// nest: read ⊂ operate ⊂ admin.
type Scope int

const (
	// ScopeRead: lists, reads and figures.
	ScopeRead Scope = iota + 1
	// ScopeOperate: read, and the day-to-day money operations (refunds,
	// bank-transfer confirmations, event retries, resolving refunds).
	ScopeOperate
	// ScopeAdmin: everything but managing admins and keys.
	ScopeAdmin
	// ScopeSession is no key's scope: what only an admin signed in with a
	// password may do (manage API keys, change the password, log out).
	ScopeSession
)

var scopeNames = map[Scope]string{ScopeRead: "read", ScopeOperate: "operate", ScopeAdmin: "admin", ScopeSession: "session"}

func (s Scope) String() string {
	if n, ok := scopeNames[s]; ok {
		return n
	}
	return fmt.Sprintf("scope(%d)", int(s))
}

// ParseScope reads a key's scope as stored and sent: read, operate or
// admin.
func ParseScope(name string) (Scope, bool) {
	for s, n := range scopeNames {
		if n == name && s != ScopeSession {
			return s, true
		}
	}
	return 0, false
}

// Covers reports whether a key of scope s may call a procedure that needs
// need.
func (s Scope) Covers(need Scope) bool {
	return need >= ScopeRead && need <= ScopeAdmin && s >= need && s <= ScopeAdmin
}

// Scopes maps every procedure an admin may call to the scope an admin API
// key needs for it. A procedure missing from the table is refused to every
// key: a new operation is closed to keys until someone decides.
type Scopes map[string]Scope

// checkScope refuses an admin API key whose scope does not cover the
// procedure (PermissionDenied, naming both scopes); any other caller
// passes.
func checkScope(ctx context.Context, scopes Scopes, procedure string) error {
	return requireScope(ctx, scopes[procedure]) // missing: 0, no key may
}

// requireScope refuses an admin API key whose scope does not cover need (0:
// no key may); sessions and customers are not asked about scopes.
func requireScope(ctx context.Context, need Scope) error {
	p, ok := FromContext(ctx)
	if !ok || !p.IsAdmin() || p.Kind != KindAPIKey {
		return nil
	}
	if need == 0 {
		return connect.NewError(connect.CodePermissionDenied, errors.New("no API key may call this operation"))
	}
	if need == ScopeSession {
		return connect.NewError(connect.CodePermissionDenied, errors.New("this operation needs an admin session, not an API key"))
	}
	if !p.Scope.Covers(need) {
		return connect.NewError(connect.CodePermissionDenied, fmt.Errorf("an API key of scope %s may not call this operation; it needs %s", p.Scope, need))
	}
	return nil
}

// RequireScope refuses an admin API key whose scope does not cover need
// for one part of an operation its procedure's scope lets it call (a
// refund of a gateway payment to the balance, which an operate key may
// not do though it may refund): what says that part, after "may not".
// Sessions and customers are not asked about scopes.
func RequireScope(ctx context.Context, need Scope, what string) error {
	p, ok := FromContext(ctx)
	if !ok || !p.IsAdmin() || p.Kind != KindAPIKey || p.Scope.Covers(need) {
		return nil
	}
	return connect.NewError(connect.CodePermissionDenied, fmt.Errorf("an API key of scope %s may not %s; it needs %s", p.Scope, what, need))
}

// CheckRoute is the interceptor's check for a plain HTTP route that is no
// Connect procedure (the CSV exports): who may call it (access) and, for an
// admin API key, the scope it needs. The error carries the Connect code
// (Unauthenticated, PermissionDenied, Unavailable) the route answers as an
// HTTP status.
func CheckRoute(ctx context.Context, access Access, need Scope) error {
	if err := Check(ctx, access); err != nil {
		return err
	}
	if access == Public {
		return nil
	}
	if err := refuseEnrolling(ctx); err != nil {
		return err
	}
	return requireScope(ctx, need)
}
