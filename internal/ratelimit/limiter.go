package ratelimit

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"time"
)

// Limiter decides whether one more request under key fits perSec.
type Limiter interface {
	// Allow counts one request. When it is refused, retryAfter is how long
	// until one would be allowed. An error means the limiter could not
	// decide; the request has not been counted.
	Allow(ctx context.Context, key string, perSec int) (allowed bool, retryAfter time.Duration, err error)
}

// The procedures the API contract rate-limits (docs/api.md, "Limits"), and
// ChangePassword and DisableTotp, which check a password as a login does (a
// stolen token or session must not become a fast way to guess its account's
// password).
const (
	LoginProcedure          = "/billing.identity.IdentityService/Login"
	AdminLoginProcedure     = "/billing.identity.IdentityService/AdminLogin"
	RegisterProcedure       = "/billing.identity.IdentityService/Register"
	ChangePasswordProcedure = "/billing.identity.IdentityService/ChangePassword"
	DisableTotpProcedure    = "/billing.identity.IdentityService/DisableTotp"
	// The enrolment of a second factor asks for the password too.
	StartTotpEnrolmentProcedure   = "/billing.identity.IdentityService/StartTotpEnrolment"
	ConfirmTotpEnrolmentProcedure = "/billing.identity.IdentityService/ConfirmTotpEnrolment"
)

// The per-second limits Rules applies to a zero Limits field (the API
// contract's, docs/api.md "Limits"); config.Default() starts [rate_limit]
// from the same values.
const (
	DefaultLoginPerSec    = 5
	DefaultRegisterPerSec = 1
)

// Limits are the per-client-IP limits of the rate-limited procedures
// ([rate_limit], mapped by config.RateLimit.Limits).
type Limits struct {
	// Enabled: false turns the rate limit off.
	Enabled bool
	// LoginPerSec bounds logins, admin logins, password changes and
	// enrolling or turning off the second factor (each asks for the
	// password); RegisterPerSec bounds registrations.
	LoginPerSec    int
	RegisterPerSec int
	// PasswordPerSec and PasswordPerAccountPerMin are the password
	// budgets (PasswordBudget): across every address, and per account.
	PasswordPerSec           int
	PasswordPerAccountPerMin int
}

// Rules maps the rate-limited procedures to their per-second limits; nil
// when l is not enabled, which makes Middleware a no-op. Login, admin login
// and password changes share the login limit but not a counter.
func Rules(l Limits) map[string]int {
	if !l.Enabled {
		return nil
	}
	login := cmp.Or(max(l.LoginPerSec, 0), DefaultLoginPerSec)
	return map[string]int{
		LoginProcedure:      login,
		AdminLoginProcedure: login,
		RegisterProcedure:   cmp.Or(max(l.RegisterPerSec, 0), DefaultRegisterPerSec),
		// Not in the contract's list: password checks all the same.
		ChangePasswordProcedure: login,
		DisableTotpProcedure:    login,
		// And the enrolment of a second factor, which asks for it too.
		StartTotpEnrolmentProcedure:   login,
		ConfirmTotpEnrolmentProcedure: login,
	}
}

// errPerSec is returned for a limit below 1, which config.Validate rejects
// and Rules never makes.
var errPerSec = errors.New("ratelimit: perSec must be at least 1")

// Rate is Count requests at once (the burst) and then one every Per/Count:
// Count per Per on average. A per-second limit n is Rate{n, time.Second}.
type Rate struct {
	Count int
	Per   time.Duration
}

// PerSecond is the Rate of n requests a second.
func PerSecond(n int) Rate { return Rate{Count: n, Per: time.Second} }

// PerMinute is the Rate of n requests a minute.
func PerMinute(n int) Rate { return Rate{Count: n, Per: time.Minute} }

// gcra decides one request at now for a key whose theoretical arrival time
// is tat (zero when the key is unknown). It returns the TAT to store when
// the request is allowed, or how long to wait when it is not.
func gcra(now, tat time.Time, r Rate) (allowed bool, newTAT time.Time, retryAfter time.Duration) {
	interval, window := intervals(r)
	if tat.Before(now) {
		tat = now
	}
	newTAT = tat.Add(interval)
	if allowAt := newTAT.Add(-window); now.Before(allowAt) {
		return false, time.Time{}, allowAt.Sub(now)
	}
	return true, newTAT, 0
}

// intervals is the emission interval and the burst window for r. The
// window is interval × Count rather than Per so that the two agree when
// Per does not divide evenly (3 a second).
func intervals(r Rate) (interval, window time.Duration) {
	interval = r.Per / time.Duration(r.Count)
	return interval, interval * time.Duration(r.Count)
}

// maxWindow bounds every per-second key's window: a TAT is never more than
// this ahead of the last allowed request, so state untouched for longer is
// forgettable. Memory widens it to the longest Rate.Per it is asked for.
const maxWindow = time.Second

// Option configures Memory, Redis and Fallback.
type Option func(*options)

type options struct {
	now     func() time.Time
	maxKeys int
}

// WithClock replaces time.Now (tests). For Redis it also replaces the Redis
// server's clock, which is used otherwise so that instances whose clocks
// drift still agree.
func WithClock(now func() time.Time) Option {
	return func(o *options) { o.now = now }
}

// WithMaxKeys bounds Memory's keys per generation (DefaultMaxKeys).
func WithMaxKeys(n int) Option {
	return func(o *options) {
		if n > 0 {
			o.maxKeys = n
		}
	}
}

func buildOptions(opts []Option) options {
	o := options{maxKeys: DefaultMaxKeys}
	for _, opt := range opts {
		opt(&o)
	}
	return o
}

func checkPerSec(perSec int) error {
	if perSec < 1 {
		return fmt.Errorf("%w, got %d", errPerSec, perSec)
	}
	return nil
}

// checkRate refuses a Rate that allows nothing or whose interval would be
// zero.
func checkRate(r Rate) error {
	if r.Count < 1 || r.Per < time.Duration(r.Count) {
		return fmt.Errorf("%w, got %d per %s", errPerSec, r.Count, r.Per)
	}
	return nil
}
