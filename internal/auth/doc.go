// Package auth is who is calling: the principal in the request context, the
// credential layers that establish it, and the permission table that every
// procedure is checked against.
//
// An admin may also call with an API key (x-api-key: ak_…), which acts as
// the admin who created it within its Scope: the interceptor checks the
// scope each procedure needs in one table (Scopes) besides the Policy.
//
// Credential layers run in the API contract's order (docs/api.md, "Credential
// layers"), each an HTTP middleware that handles only its own kind and passes
// the request on when it finds none:
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
