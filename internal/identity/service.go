package identity

import (
	"cmp"
	"context"
	"errors"
	"log/slog"
	"runtime"
	"slices"
	"time"

	"github.com/rustbill/paymentd/internal/apperr"
	"github.com/rustbill/paymentd/internal/auth"
	"github.com/rustbill/paymentd/internal/secrets"
	"github.com/rustbill/paymentd/internal/store"
)

// JWTOptions sign and verify customer access tokens ([jwt] in the
// configuration).
type JWTOptions struct {
	// Secret is the HMAC key, at least 32 characters.
	Secret string
	// Expiry is how long a token works (DefaultJWTExpiry when zero).
	Expiry time.Duration
}

// SessionOptions are the admin session cookie and its timeouts ([session]
// in the configuration). Zero values take the defaults below.
type SessionOptions struct {
	CookieName string
	// IdleTimeout ends a session not used for this long.
	IdleTimeout time.Duration
	// AbsoluteTimeout ends a session this long after its login, however
	// busy.
	AbsoluteTimeout time.Duration
	CookieSecure    bool
	// CookieSameSite is Strict, Lax or None.
	CookieSameSite string
}

// BootstrapOptions name the first admin, created on a database without
// admins ([bootstrap] in the configuration).
type BootstrapOptions struct {
	AdminUsername string
	// AdminPassword is required only while the database has no admin.
	AdminPassword string
}

// The defaults of JWTOptions, SessionOptions and BootstrapOptions.
const (
	DefaultJWTExpiry              = 24 * time.Hour
	DefaultSessionCookieName      = "paymentd_session"
	DefaultSessionIdleTimeout     = 24 * time.Hour
	DefaultSessionAbsoluteTimeout = 7 * 24 * time.Hour
	DefaultSessionCookieSameSite  = "Lax"
	DefaultBootstrapAdminUsername = "admin"
)

// withDefaults fills the zero values.
func (o SessionOptions) withDefaults() SessionOptions {
	o.CookieName = cmp.Or(o.CookieName, DefaultSessionCookieName)
	o.IdleTimeout = cmp.Or(max(o.IdleTimeout, 0), DefaultSessionIdleTimeout)
	o.AbsoluteTimeout = cmp.Or(max(o.AbsoluteTimeout, 0), DefaultSessionAbsoluteTimeout)
	o.CookieSameSite = cmp.Or(o.CookieSameSite, DefaultSessionCookieSameSite)
	return o
}

// Options are what a Service is built from.
type Options struct {
	// DB is the system of record (the pool).
	DB store.DB
	// JWT signs and verifies customer access tokens.
	JWT JWTOptions
	// Session configures the admin session cookie and its timeouts.
	Session SessionOptions
	// Currencies is [billing].currencies; a new customer's balance is in the
	// first.
	Currencies []string
	// Clock is the time every timeout is measured on; nil means time.Now.
	Clock func() time.Time
	// Cache is an optional read-through cache of admin sessions; nil for none.
	Cache SessionCache
	// AccessCache is an optional cache of customers' access states shared
	// by every instance (Redis); nil for none: each instance then reads the
	// database at most once a second per customer.
	AccessCache AccessCache
	// Log receives warnings (a cache that failed, a write that failed); nil
	// means slog.Default().
	Log *slog.Logger
	// AdminAPIKeyMaxLifetime bounds how long an admin API key may work
	// ([admin].api_key_max_lifetime_days); zero lets a key never expire.
	AdminAPIKeyMaxLifetime time.Duration
	// Secrets seals admins' TOTP secrets ([secrets]); nil refuses 2FA
	// enrolment (FailedPrecondition).
	Secrets *secrets.Keyring
	// Require2FA is [admin].require_2fa: an admin session without a
	// confirmed second factor may call only the enrolment procedures (see
	// auth.Principal.Enrolling); 2FA cannot be turned off.
	Require2FA bool
	// SecondFactorMetrics counts the second-factor codes refused; nil
	// counts nothing.
	SecondFactorMetrics SecondFactorMetrics
}

// SecondFactorMetrics counts refused second-factor codes by outcome:
// SecondFactorWrong (judged wrong) or SecondFactorLocked (refused unjudged
// while the admin's codes are locked out).
type SecondFactorMetrics interface {
	SecondFactorRefused(outcome string)
}

// Service is the identity domain.
type Service struct {
	db         store.DB
	clock      func() time.Time
	cache      SessionCache
	log        *slog.Logger
	jwtKey     []byte
	jwtTTL     time.Duration
	session    SessionOptions
	idle       time.Duration
	absolute   time.Duration
	currency   string
	currencies []string
	dummyHash  string
	hashSlots  chan struct{}
	sessions   *SessionAuthenticator
	tokens     *JWTAuthenticator
	apiKeys    *APIKeyAuthenticator
	cookieName string
	// verified are access tokens verified before (token_cache.go).
	verified *verifiedTokens
	// access answers whether a customer's tokens still work (access.go).
	access *accessStates
	// keyMaxLifetime is Options.AdminAPIKeyMaxLifetime.
	keyMaxLifetime time.Duration
	// keyring is Options.Secrets.
	keyring *secrets.Keyring
	// require2FA is Options.Require2FA.
	require2FA bool
	// factorMetrics is Options.SecondFactorMetrics.
	factorMetrics SecondFactorMetrics
}

// Currencies is [billing].currencies, the first being a new customer's
// balance currency; the caller gets its own copy.
func (s *Service) Currencies() []string {
	return slices.Clone(s.currencies)
}

// NewService builds the identity domain.
func NewService(o Options) (*Service, error) {
	if o.DB == nil {
		return nil, errors.New("identity: no database")
	}
	if len(o.JWT.Secret) < 32 {
		return nil, errors.New("identity: [jwt].secret must be at least 32 characters")
	}
	o.Session = o.Session.withDefaults()
	if len(o.Currencies) == 0 {
		return nil, errors.New("identity: [billing].currencies is empty")
	}
	s := &Service{
		db:         o.DB,
		clock:      o.Clock,
		cache:      o.Cache,
		log:        o.Log,
		jwtKey:     []byte(o.JWT.Secret),
		jwtTTL:     cmp.Or(max(o.JWT.Expiry, 0), DefaultJWTExpiry),
		session:    o.Session,
		idle:       o.Session.IdleTimeout,
		absolute:   o.Session.AbsoluteTimeout,
		currency:   o.Currencies[0],
		currencies: slices.Clone(o.Currencies),
		dummyHash:  dummyHash,
		hashSlots:  make(chan struct{}, runtime.GOMAXPROCS(0)),
		cookieName: o.Session.CookieName,
		verified:   newVerifiedTokens(tokenCacheSize),

		keyMaxLifetime: max(o.AdminAPIKeyMaxLifetime, 0),
		keyring:        o.Secrets,
		require2FA:     o.Require2FA,
		factorMetrics:  o.SecondFactorMetrics,
	}
	if s.clock == nil {
		s.clock = time.Now
	}
	if s.log == nil {
		s.log = slog.Default()
	}
	s.access = newAccessStates(s.db, o.AccessCache, s.now, s.log)
	s.sessions = &SessionAuthenticator{svc: s}
	s.tokens = &JWTAuthenticator{svc: s}
	s.apiKeys = &APIKeyAuthenticator{svc: s}
	return s, nil
}

// SessionAuthenticator is the admin session cookie layer's authenticator.
func (s *Service) SessionAuthenticator() *SessionAuthenticator { return s.sessions }

// JWTAuthenticator is the customer access token layer's authenticator.
func (s *Service) JWTAuthenticator() *JWTAuthenticator { return s.tokens }

// APIKeyAuthenticator is the API key layer's authenticator.
func (s *Service) APIKeyAuthenticator() *APIKeyAuthenticator { return s.apiKeys }

// now is the injected clock in UTC, at the microsecond precision PostgreSQL
// stores, so that a time written and read back compares equal.
func (s *Service) now() time.Time {
	return store.Timestamp(s.clock())
}

// dummyHash is the hash a login for an unknown user is verified against: an
// argon2id hash of a random password nobody kept, with the parameters
// HashPassword uses, so that verifying against it costs what a real login
// costs. A match is never accepted (checkPassword), so it need not be
// secret. It is a constant rather than hashed at start: hashing it there
// took 64 MiB of memory and a tenth of a second of every start.
const dummyHash = "$argon2id$v=19$m=65536,t=3,p=2$NbKL4j3OcDmSS+mllMcVCw$rva4/i5OxYfgexHEcGhNBxNMTyJlJSL72j/iHdKEPPY"

// errBad*Credentials answer every failed login: a wrong password, an unknown
// user and a disabled account read the same.
var (
	errBadCustomerCredentials = apperr.New(apperr.Unauthenticated, "invalid email or password")
	errBadAdminCredentials    = apperr.New(apperr.Unauthenticated, "invalid username or password")
)

// checkPassword verifies password against hash, or against the dummy hash
// when the user was not found (hash == ""), so both take one argon2id run.
// It reports whether the password matched; a malformed stored hash is logged
// and counts as a mismatch. The error is ctx's, when it ended while waiting
// for a hashing slot.
func (s *Service) checkPassword(ctx context.Context, hash, password string) (bool, error) {
	release, err := s.acquireHashSlot(ctx)
	if err != nil {
		return false, err
	}
	defer release()
	if hash == "" {
		_ = VerifyPassword(s.dummyHash, password)
		return false, nil
	}
	err = VerifyPassword(hash, password)
	if err != nil && !errors.Is(err, ErrPasswordMismatch) {
		s.log.ErrorContext(ctx, "stored password hash cannot be verified", "err", err)
	}
	return err == nil, nil
}

// hashPassword is HashPassword within the hashing bound.
func (s *Service) hashPassword(ctx context.Context, password string) (string, error) {
	release, err := s.acquireHashSlot(ctx)
	if err != nil {
		return "", err
	}
	defer release()
	return HashPassword(password)
}

// acquireHashSlot bounds the argon2id runs in flight to one per CPU: each
// takes 64 MiB, so a burst of logins queues here instead of exhausting
// memory. It waits until ctx is done.
func (s *Service) acquireHashSlot(ctx context.Context) (func(), error) {
	select {
	case s.hashSlots <- struct{}{}:
		return func() { <-s.hashSlots }, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// requireCustomer returns the calling customer.
func requireCustomer(ctx context.Context) (auth.Principal, error) {
	p, err := auth.Require(ctx)
	if err != nil {
		return p, err
	}
	if p.Role != auth.RoleCustomer {
		return p, apperr.New(apperr.PermissionDenied, "customers only")
	}
	return p, nil
}
