package identity

import (
	"cmp"
	"context"
	"errors"
	"log/slog"
	"runtime"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
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
	// Passwords is the budget of password attempts across every address
	// and per account ([rate_limit]); nil for none.
	Passwords PasswordLimiter
	// HashSlots is how many argon2id runs this instance does at once
	// (DefaultHashSlots when zero).
	HashSlots int
	// HashQueue is how many password calls may wait for a hashing slot
	// (DefaultHashQueue when zero); the next is refused at once,
	// ResourceExhausted with a retry delay.
	HashQueue int
	// HashWait is how long a password call may wait for a hashing slot
	// (DefaultHashWait when zero); then it is refused, ResourceExhausted
	// with a retry delay.
	HashWait time.Duration
	// ReleaseSlot gives back the request's slot of the concurrency limit
	// (concurrency.Release), so that a call waiting for a hashing slot
	// holds none; nil when there is no such limit.
	ReleaseSlot func(context.Context)
	// BeforeHash, when set, runs in every argon2id run on a caller's input
	// while it holds its hashing slot, before it hashes: tests block in it
	// to keep the slots full. The service never sets it.
	BeforeHash func()
}

// SecondFactorMetrics counts refused second-factor codes by outcome:
// SecondFactorWrong (judged wrong) or SecondFactorLocked (refused unjudged
// while the admin's codes are locked out).
type SecondFactorMetrics interface {
	SecondFactorRefused(outcome string)
}

// PasswordLimiter decides whether one more password attempt on account
// may be judged now; when not, retryAfter is how long until one would.
// account names the account the caller claims ("customer:<e-mail>",
// "admin:<username>"), whether or not it exists, so that the answer says
// nothing of its existence.
type PasswordLimiter interface {
	AllowPassword(ctx context.Context, account string) (ok bool, retryAfter time.Duration)
}

// DefaultHashQueue and DefaultHashWait are Options.HashQueue's and
// HashWait's defaults. With one hashing slot and an argon2id run of about
// 0.1 s the last of the queue waits about a second; on a machine so busy
// that a run takes a second, the wait bound answers first, so a password
// call is answered within the wait, its own run and its writes: a few
// seconds at worst (docs/security.md, "Login flood").
const (
	DefaultHashQueue = 8
	DefaultHashWait  = 2 * time.Second
)

// defaultHashQueue and defaultHashWait are the defaults, but in a test
// binary, whose hashes are cheap (newHashCost) and whose machine may be
// busy with other packages' tests: there a burst of logins that a test
// expects to be judged must not be refused by a bound meant for the
// production cost. The tests of the bounds set them (Options).
func defaultHashQueue() int {
	if testing.Testing() {
		return 256
	}
	return DefaultHashQueue
}

func defaultHashWait() time.Duration {
	if testing.Testing() {
		return time.Minute
	}
	return DefaultHashWait
}

// DefaultHashSlots is Options.HashSlots's default: half the CPUs Go uses,
// at least one. Each run hashes on argonThreads (2) threads, so that many
// runs already keep every CPU busy; more would only slow every other call
// (and the database, on the same machine) without hashing faster.
func DefaultHashSlots() int { return max(1, runtime.GOMAXPROCS(0)/int(argonThreads)) }

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
	// hashQueue bounds hashWaiting, the calls waiting for a hashSlot.
	hashQueue   int64
	hashWaiting atomic.Int64
	hashWait    time.Duration
	passwords   PasswordLimiter
	releaseSlot func(context.Context)
	beforeHash  func()
	sessions    *SessionAuthenticator
	tokens      *JWTAuthenticator
	apiKeys     *APIKeyAuthenticator
	cookieName  string
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
		hashSlots:  make(chan struct{}, cmp.Or(max(o.HashSlots, 0), DefaultHashSlots())),
		hashQueue:  int64(cmp.Or(max(o.HashQueue, 0), defaultHashQueue())),
		hashWait:   cmp.Or(max(o.HashWait, 0), defaultHashWait()),

		passwords:   o.Passwords,
		releaseSlot: o.ReleaseSlot,
		beforeHash:  o.BeforeHash,
		cookieName:  o.Session.CookieName,
		verified:    newVerifiedTokens(tokenCacheSize),

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

// errHashQueueFull answers a password call that finds HashQueue calls
// already waiting for a hashing slot, or that waited HashWait for one. A
// second: several runs of argon2id.
var errHashQueueFull = apperr.RetryLater(hashQueueRetryAfter, "too many password checks at once")

const hashQueueRetryAfter = time.Second

// acquireHashSlot bounds the argon2id runs in flight to HashSlots: each
// takes 64 MiB and two CPUs' worth of work, so a burst of logins queues
// here instead of exhausting memory. At most HashQueue calls wait, each
// at most HashWait; the next is refused at once, and a call that waited
// HashWait is refused then (errHashQueueFull), so a flood is answered
// rather than queued without end. Before it waits (or hashes) the call
// gives back its slot of the concurrency limit: it needs none to wait for
// a CPU, and holding one would make every other call wait behind the
// flood (docs/decisions.md, "Password checks outside the concurrency
// limit"). What the call does after its hash (a session or token, a
// write) runs without a slot, bounded by how fast the slots hash. A wait
// ends with ctx.
func (s *Service) acquireHashSlot(ctx context.Context) (func(), error) {
	release := func() { <-s.hashSlots }
	select {
	case s.hashSlots <- struct{}{}:
		s.holdSlot(ctx)
		return release, nil
	default:
	}
	if s.hashWaiting.Add(1) > s.hashQueue {
		s.hashWaiting.Add(-1)
		return nil, errHashQueueFull
	}
	defer s.hashWaiting.Add(-1)
	if s.releaseSlot != nil {
		s.releaseSlot(ctx)
	}
	waited := time.NewTimer(s.hashWait)
	defer waited.Stop()
	select {
	case s.hashSlots <- struct{}{}:
		s.holdSlot(ctx)
		return release, nil
	case <-waited.C:
		return nil, errHashQueueFull
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// HashesWaiting is the number of calls waiting for a hashing slot now.
func (s *Service) HashesWaiting() int { return int(s.hashWaiting.Load()) }

// holdSlot runs with a hashing slot taken: the call gives back its
// concurrency slot (if it still holds one) and the test hook runs.
func (s *Service) holdSlot(ctx context.Context) {
	if s.releaseSlot != nil {
		s.releaseSlot(ctx)
	}
	if s.beforeHash != nil {
		s.beforeHash()
	}
}

// errTooManyPasswordAttempts answers an attempt refused by the password
// budget. Its words are the same for an account that exists and one that
// does not.
const errTooManyPasswordAttempts = "too many password attempts"

// admitPassword counts one password attempt on account in the budget
// (Options.Passwords) and refuses it, ResourceExhausted with a retry
// delay, when the budget is spent: before any argon2id run, so a refused
// attempt judges nothing. Every procedure that checks or hashes a
// caller's password calls it first.
func (s *Service) admitPassword(ctx context.Context, account string) error {
	if s.passwords == nil {
		return nil
	}
	if ok, retryAfter := s.passwords.AllowPassword(ctx, account); !ok {
		return apperr.RetryLater(retryAfter, errTooManyPasswordAttempts)
	}
	return nil
}

// customerBudgetKey and adminBudgetKey name an account in the password budget.
func customerBudgetKey(email string) string { return "customer:" + NormalizeEmail(email) }
func adminBudgetKey(username string) string {
	return "admin:" + strings.ToLower(strings.TrimSpace(username))
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
