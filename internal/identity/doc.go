// Package identity is who calls the service: admins (session cookie),
// customers (JWT access tokens) and customers' API keys; and the admins'
// management of customer accounts (API key permission, balance, credit
// limit, disabling, signing out everywhere), and password changes.
//
// Three credential kinds, each an auth.Authenticator run by its own auth.Layer
// in the API contract's order (docs/api.md, "Credential layers"):
//
//	session cookie ──▶ Authorization: Bearer <JWT> ──▶ x-api-key: pk_<id>_<secret>
//	 (admins; DB row)    (customers; signature    (customers; DB row, no caching)
//	                      self-contained, then its
//	                      generation: access.go)
//
// A customer's access tokens can be ended before they expire: each carries
// the customer's token generation (claim gen), and a password change, a
// sign-out everywhere and disabling move customers.token_generation on.
// Every request compares the two through accessStates (a second of this
// instance's memory, then the shared cache, then the database):
//
//	generation g ──(ChangePassword / SignOutEverywhere / Disable / Enable)──▶ g+1
//	tokens of g: refused here at once, on other instances within a second
//
// An admin session lives from AdminLogin until the first of: Logout, the
// idle timeout (no request for [session].idle_timeout_minutes), the absolute
// timeout ([session].absolute_timeout_hours after login, however active):
//
//	AdminLogin ──▶ active ──(request: last_seen_at moves, at most once a minute)──▶ active
//	                 │
//	                 ├──(Logout)──────────────────────────────────────┐
//	                 ├──(now ≥ last_seen_at + idle timeout)───────────┼──▶ row deleted,
//	                 └──(now ≥ created_at + absolute timeout)─────────┘    cookie refused
//
// Every time the service compares or writes is taken from one injected clock
// (Options.Clock), never from the database's now(), so tests can move time.
// The database keeps only SHA-256 of a session token and of an API key's
// secret; the cleartext is handed out once and never stored or logged.
//
// Passwords are argon2id (HashPassword, VerifyPassword). A login for an
// unknown e-mail address or username verifies against a fixed dummy hash, so
// the answer takes as long, and reads the same, as for a wrong password.
package identity
