package identity

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"net/http"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/rustbill/paymentd/internal/apperr"
	"github.com/rustbill/paymentd/internal/audit"
	"github.com/rustbill/paymentd/internal/auth"
	"github.com/rustbill/paymentd/internal/store"
)

const (
	// tokenBytes is the entropy of a session token and of an API key secret.
	tokenBytes = 32
	// tokenLen is its length in unpadded base64url.
	tokenLen = 43
	// touchEvery throttles the writes of sessions.last_seen_at and
	// api_keys.last_used_at: activity costs at most one write a minute per
	// session or key. The idle timeout is measured from the last write, so it
	// may end up to a minute early, never late.
	touchEvery = time.Minute
	// recheckEvery bounds how long a cached session is trusted before it is
	// read from the database again: a session deleted elsewhere (logout whose
	// cache delete failed) or an admin disabled is refused within a minute
	// even when the cache says otherwise.
	recheckEvery = time.Minute
	// maxUserAgent bounds what a session stores of the User-Agent header.
	maxUserAgent = 512
)

// tokenEncoding reads and writes session tokens and API key secrets; strict,
// so each secret has exactly one spelling.
var tokenEncoding = base64.RawURLEncoding.Strict()

// newSecret returns 32 random bytes, base64url, and their SHA-256.
func newSecret() (string, []byte, error) {
	var b [tokenBytes]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", nil, err
	}
	sum := sha256.Sum256(b[:])
	return tokenEncoding.EncodeToString(b[:]), sum[:], nil
}

// hashSecret returns SHA-256 of a token's 32 bytes, or false when s is not a
// well-formed token.
func hashSecret(s string) ([]byte, bool) {
	if len(s) != tokenLen {
		return nil, false
	}
	b, err := tokenEncoding.DecodeString(s)
	if err != nil || len(b) != tokenBytes {
		return nil, false
	}
	sum := sha256.Sum256(b)
	return sum[:], true
}

// Session is an admin session as the authenticator uses it, and what a
// SessionCache holds. It carries no secret: ID is SHA-256 of the token.
type Session struct {
	ID                []byte    `json:"id"`
	AdminID           uuid.UUID `json:"admin_id"`
	CreatedAt         time.Time `json:"created_at"`
	LastSeenAt        time.Time `json:"last_seen_at"`
	AbsoluteExpiresAt time.Time `json:"absolute_expires_at"`
	AdminDisabled     bool      `json:"admin_disabled"`
	// AdminTOTP is whether the admin had confirmed a second factor when
	// this copy was read.
	AdminTOTP bool `json:"admin_totp"`
	// VerifiedAt is when this copy was read from the database; a cached
	// copy older than a minute is read again.
	VerifiedAt time.Time `json:"verified_at"`
}

// SessionCache is an optional read-through cache of admin sessions in front
// of the database, which stays the system of record: a cache that fails is
// logged and bypassed, so a dead cache never logs anyone out (and never keeps
// anyone in for more than a minute, see Session.VerifiedAt).
//
// It must be shared by all instances (Redis, say): a per-instance cache would
// keep a session that was logged out on another instance alive there for up
// to a minute. Implementations should let an entry expire by
// AbsoluteExpiresAt, and must be safe for concurrent use.
type SessionCache interface {
	// Get returns the session with id, and false when the cache has none.
	Get(ctx context.Context, id []byte) (Session, bool, error)
	// Put stores s under s.ID.
	Put(ctx context.Context, s Session) error
	// Delete removes the session with id, if any.
	Delete(ctx context.Context, id []byte) error
}

func sessionFromStore(s store.SessionWithAdmin, now time.Time) Session {
	return Session{
		ID:                s.ID,
		AdminID:           s.AdminID,
		CreatedAt:         s.CreatedAt,
		LastSeenAt:        s.LastSeenAt,
		AbsoluteExpiresAt: s.AbsoluteExpiresAt,
		AdminDisabled:     s.AdminDisabledAt != nil,
		AdminTOTP:         s.AdminTOTP,
		VerifiedAt:        now,
	}
}

// expiry is why s has ended at now, "" while it lives.
func (s Session) expiry(now time.Time, idle time.Duration) string {
	switch {
	case !now.Before(s.AbsoluteExpiresAt):
		return "session expired (absolute timeout)"
	case !now.Before(s.LastSeenAt.Add(idle)):
		return "session expired (idle timeout)"
	}
	return ""
}

// sessionLabel names a session in logs and principals without revealing
// anything usable: 8 hex digits of the token's hash.
func sessionLabel(id []byte) string { return "session:" + hex.EncodeToString(id[:4]) }

// SessionAuthenticator checks the admin session cookie.
type SessionAuthenticator struct{ svc *Service }

var _ auth.Authenticator = (*SessionAuthenticator)(nil)

// Kind is auth.KindSession.
func (*SessionAuthenticator) Kind() auth.Kind { return auth.KindSession }

// Authenticate returns the admin of a live session; ErrNoCredential when the
// request has no session cookie; *auth.Invalid when the cookie names no
// session, an expired one (which is then deleted) or a disabled admin's.
func (a *SessionAuthenticator) Authenticate(ctx context.Context, r *http.Request) (auth.Principal, error) {
	c, err := r.Cookie(a.svc.cookieName)
	if err != nil { // http.ErrNoCookie is the only error
		return auth.Principal{}, auth.ErrNoCredential
	}
	id, ok := hashSecret(c.Value)
	if !ok {
		return auth.Principal{}, &auth.Invalid{Reason: "malformed session token"}
	}
	s, reason, err := a.svc.checkSession(ctx, id)
	if err != nil {
		return auth.Principal{}, err
	}
	if reason != "" {
		return auth.Principal{}, &auth.Invalid{Reason: reason}
	}
	return auth.Principal{
		Role: auth.RoleAdmin, ID: s.AdminID, Kind: auth.KindSession, CredentialID: sessionLabel(id),
		Enrolling: a.svc.require2FA && !s.AdminTOTP,
	}, nil
}

// checkSession finds the session with id, enforces both timeouts and the
// admin's state, and refreshes last_seen_at when a minute has passed. It
// returns the session, or why it is refused, or an error when it could not
// be checked.
func (s *Service) checkSession(ctx context.Context, id []byte) (Session, string, error) {
	now := s.now()
	sess, fromDB, err := s.loadSession(ctx, id, now, false)
	if errors.Is(err, store.ErrNotFound) {
		return Session{}, "unknown session", nil
	}
	if err != nil {
		return Session{}, "", err
	}
	// Expiry, a refresh and the admin's state are decided on the database's
	// copy, never on a cached one alone.
	if !fromDB && (sess.expiry(now, s.idle) != "" || now.Sub(sess.LastSeenAt) >= touchEvery) {
		sess, fromDB, err = s.loadSession(ctx, id, now, true)
		if errors.Is(err, store.ErrNotFound) {
			return Session{}, "unknown session", nil
		}
		if err != nil {
			return Session{}, "", err
		}
	}
	if reason := sess.expiry(now, s.idle); reason != "" {
		s.dropSession(ctx, id)
		return Session{}, reason, nil
	}
	if sess.AdminDisabled {
		return Session{}, "admin disabled", nil
	}
	cacheable := fromDB
	if now.Sub(sess.LastSeenAt) >= touchEvery {
		touched, err := store.TouchSession(ctx, s.db, id, now)
		switch {
		case err != nil:
			// The session was just read from the database and is valid; a
			// failed refresh only brings its idle expiry a little closer.
			s.log.WarnContext(ctx, "session last_seen_at not refreshed", "session", sessionLabel(id), "err", err)
		case touched:
			sess.LastSeenAt = now
		default:
			// Deleted since it was read (a logout in flight) or refreshed
			// by another instance: this request stands, but this copy is
			// not cached.
			cacheable = false
		}
	}
	if s.cache != nil && cacheable {
		if err := s.cache.Put(ctx, sess); err != nil {
			s.log.WarnContext(ctx, "session cache put failed", "session", sessionLabel(id), "err", err)
		}
	}
	return sess, "", nil
}

// loadSession reads the session from the cache (unless forceDB) or the
// database, and reports whether the copy came from the database.
func (s *Service) loadSession(ctx context.Context, id []byte, now time.Time, forceDB bool) (Session, bool, error) {
	if s.cache != nil && !forceDB {
		sess, ok, err := s.cache.Get(ctx, id)
		if err != nil {
			s.log.WarnContext(ctx, "session cache get failed; reading the database", "session", sessionLabel(id), "err", err)
		}
		// A copy verified less than a minute ago (on this clock; one "from
		// the future" by more than that is not trusted either) is used.
		if age := now.Sub(sess.VerifiedAt); err == nil && ok && age > -recheckEvery && age < recheckEvery {
			return sess, false, nil
		}
	}
	row, err := store.GetSession(ctx, s.db, id)
	if err != nil {
		if errors.Is(err, store.ErrNotFound) && s.cache != nil {
			s.cacheDelete(ctx, id)
		}
		return Session{}, false, err
	}
	return sessionFromStore(row, now), true, nil
}

// dropSession deletes the session from the database and the cache; failures
// are logged (an expired session is refused whether or not its row is gone).
func (s *Service) dropSession(ctx context.Context, id []byte) {
	if _, err := store.DeleteSession(ctx, s.db, id); err != nil {
		s.log.WarnContext(ctx, "expired session not deleted", "session", sessionLabel(id), "err", err)
	}
	s.cacheDelete(ctx, id)
}

func (s *Service) cacheDelete(ctx context.Context, id []byte) {
	if s.cache == nil {
		return
	}
	if err := s.cache.Delete(ctx, id); err != nil {
		s.log.WarnContext(ctx, "session cache delete failed", "session", sessionLabel(id), "err", err)
	}
}

// AdminLoginInput is an admin's login attempt.
type AdminLoginInput struct {
	Username string
	Password string
	// UserAgent and RemoteAddr are stored with the session for the admins'
	// own review.
	UserAgent  string
	RemoteAddr string
	// PreviousToken is the session cookie the request carried, if any; that
	// session is ended, as the new one replaces it.
	PreviousToken string
	// TOTPCode is the admin's TOTP or recovery code, needed once their
	// two-factor sign-in is confirmed.
	TOTPCode string
}

// AdminSession is a started admin session. Token goes into the cookie and
// nowhere else.
type AdminSession struct {
	Admin     Admin
	Token     string
	ExpiresAt time.Time
}

// AdminLogin checks an admin's password and starts a session.
func (s *Service) AdminLogin(ctx context.Context, in AdminLoginInput) (AdminSession, error) {
	if err := s.admitPassword(ctx, adminBudgetKey(in.Username)); err != nil {
		return AdminSession{}, err
	}
	a, err := store.GetAdminByUsername(ctx, s.db, in.Username)
	switch {
	case errors.Is(err, store.ErrNotFound):
		if _, err := s.checkPassword(ctx, "", in.Password); err != nil {
			return AdminSession{}, err
		}
		return AdminSession{}, errBadAdminCredentials
	case err != nil:
		return AdminSession{}, err
	}
	ok, err := s.checkPassword(ctx, a.PasswordHash, in.Password)
	if err != nil {
		return AdminSession{}, err
	}
	if !ok || a.DisabledAt != nil {
		return AdminSession{}, errBadAdminCredentials
	}

	now := s.now()
	if a.TOTPConfirmedAt != nil {
		if err := s.checkSecondFactor(ctx, a, in.TOTPCode, in.RemoteAddr, now); err != nil {
			return AdminSession{}, err
		}
	}
	token, row, err := s.newSession(a.ID, in.UserAgent, in.RemoteAddr, now)
	if err != nil {
		return AdminSession{}, err
	}
	id := row.ID
	principal := auth.Principal{Role: auth.RoleAdmin, ID: a.ID, Kind: auth.KindSession, CredentialID: sessionLabel(id)}
	var previous []byte
	if in.PreviousToken != "" {
		previous, _ = hashSecret(in.PreviousToken)
	}
	err = store.WithTx(ctx, s.db, func(tx pgx.Tx) error {
		if previous != nil {
			if _, err := store.DeleteSession(ctx, tx, previous); err != nil {
				return err
			}
		}
		if _, err := store.Q(tx).DeleteExpiredAdminSessions(ctx, store.DeleteExpiredAdminSessionsParams{
			AdminID: a.ID, Now: now, IdleBefore: now.Add(-s.idle),
		}); err != nil {
			return err
		}
		if _, err := store.InsertSession(ctx, tx, row); err != nil {
			return err
		}
		if err := store.Q(tx).SetAdminLastLogin(ctx, store.SetAdminLastLoginParams{ID: a.ID, LastLoginAt: &now}); err != nil {
			return err
		}
		return audit.Write(ctx, tx, audit.Of(principal), s.now(), "admin.login", "admin_user", a.ID.String(), nil, map[string]any{
			"session": sessionLabel(id), "remote_addr": in.RemoteAddr, "expires_at": row.AbsoluteExpiresAt,
		})
	})
	if err != nil {
		return AdminSession{}, err
	}
	if previous != nil {
		s.cacheDelete(ctx, previous)
	}
	s.cacheNewSession(ctx, row, a.TOTPConfirmedAt != nil)
	return AdminSession{Admin: adminOf(a), Token: token, ExpiresAt: row.AbsoluteExpiresAt}, nil
}

// newSession makes the row of a new session of admin, started at now, and
// its token (which goes into the cookie and nowhere else).
func (s *Service) newSession(admin uuid.UUID, userAgent, remoteAddr string, now time.Time) (string, store.Session, error) {
	token, id, err := newSecret()
	if err != nil {
		return "", store.Session{}, err
	}
	if len(userAgent) > maxUserAgent {
		userAgent = userAgent[:maxUserAgent]
	}
	return token, store.Session{
		ID:                id,
		AdminID:           admin,
		UserAgent:         strings.ToValidUTF8(userAgent, ""),
		RemoteAddr:        remoteAddr,
		CreatedAt:         now,
		LastSeenAt:        now,
		AbsoluteExpiresAt: now.Add(s.absolute),
	}, nil
}

// cacheNewSession puts a session just inserted into the shared cache;
// totp is whether its admin has confirmed a second factor.
func (s *Service) cacheNewSession(ctx context.Context, row store.Session, totp bool) {
	if s.cache == nil {
		return
	}
	sess := Session{ID: row.ID, AdminID: row.AdminID, CreatedAt: row.CreatedAt, LastSeenAt: row.LastSeenAt, AbsoluteExpiresAt: row.AbsoluteExpiresAt, AdminTOTP: totp, VerifiedAt: row.CreatedAt}
	if err := s.cache.Put(ctx, sess); err != nil {
		s.log.WarnContext(ctx, "session cache put failed", "session", sessionLabel(row.ID), "err", err)
	}
}

// Logout ends the caller's admin session; token is the session cookie's value.
func (s *Service) Logout(ctx context.Context, token string) error {
	p, err := auth.RequireAdmin(ctx)
	if err != nil {
		return err
	}
	if p.Kind != auth.KindSession {
		return apperr.New(apperr.PermissionDenied, "only an admin session can be logged out")
	}
	id, ok := hashSecret(token)
	if !ok || sessionLabel(id) != p.CredentialID {
		// The cookie read now is not the one that authenticated the request.
		return apperr.New(apperr.Unauthenticated, "no session to log out")
	}
	err = store.WithTx(ctx, s.db, func(tx pgx.Tx) error {
		if _, err := store.DeleteSession(ctx, tx, id); err != nil {
			return err
		}
		return audit.Write(ctx, tx, audit.Of(p), s.now(), "admin.logout", "admin_user", p.ID.String(), map[string]any{"session": sessionLabel(id)}, nil)
	})
	if err != nil {
		return err
	}
	s.cacheDelete(ctx, id)
	return nil
}

// SessionCookie is the cookie that carries token: httpOnly, Path /, living as
// long as the session's absolute timeout, Secure and SameSite as configured.
func (s *Service) SessionCookie(token string) *http.Cookie {
	return &http.Cookie{
		Name:     s.cookieName,
		Value:    token,
		Path:     "/",
		MaxAge:   int(s.absolute / time.Second),
		HttpOnly: true,
		Secure:   s.session.CookieSecure,
		SameSite: sameSite(s.session.CookieSameSite),
	}
}

// ClearSessionCookie removes the session cookie from the browser (Max-Age<0).
func (s *Service) ClearSessionCookie() *http.Cookie {
	c := s.SessionCookie("")
	c.MaxAge = -1
	return c
}

// SessionToken returns the session cookie's value among headers, if any.
func (s *Service) SessionToken(h http.Header) (string, bool) {
	c, err := (&http.Request{Header: h}).Cookie(s.cookieName)
	if err != nil {
		return "", false
	}
	return c.Value, true
}

func sameSite(v string) http.SameSite {
	switch v {
	case "Strict":
		return http.SameSiteStrictMode
	case "None":
		return http.SameSiteNoneMode
	default:
		return http.SameSiteLaxMode
	}
}
