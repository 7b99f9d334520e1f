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
// ChangePassword, which checks a password as a login does (a stolen token must
// not become a fast way to guess its account's password).
const (
	LoginProcedure          = "/billing.identity.IdentityService/Login"
	AdminLoginProcedure     = "/billing.identity.IdentityService/AdminLogin"
	RegisterProcedure       = "/billing.identity.IdentityService/Register"
	ChangePasswordProcedure = "/billing.identity.IdentityService/ChangePassword"
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
	// LoginPerSec bounds logins, admin logins and password changes;
	// RegisterPerSec bounds registrations.
	LoginPerSec    int
	RegisterPerSec int
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
		// Not in the contract's list: a password check all the same.
		ChangePasswordProcedure: login,
	}
}

// errPerSec is returned for a limit below 1, which config.Validate rejects
// and Rules never makes.
var errPerSec = errors.New("ratelimit: perSec must be at least 1")

// gcra decides one request at now for a key whose theoretical arrival time
// is tat (zero when the key is unknown). It returns the TAT to store when
// the request is allowed, or how long to wait when it is not.
func gcra(now, tat time.Time, perSec int) (allowed bool, newTAT time.Time, retryAfter time.Duration) {
	interval, window := intervals(perSec)
	if tat.Before(now) {
		tat = now
	}
	newTAT = tat.Add(interval)
	if allowAt := newTAT.Add(-window); now.Before(allowAt) {
		return false, time.Time{}, allowAt.Sub(now)
	}
	return true, newTAT, 0
}

// intervals is the emission interval and the burst window for perSec. The
// window is interval × perSec rather than a second so that the two agree
// when a second does not divide evenly (perSec = 3).
func intervals(perSec int) (interval, window time.Duration) {
	interval = time.Second / time.Duration(perSec)
	return interval, interval * time.Duration(perSec)
}

// maxWindow bounds every key's window: a TAT is never more than this ahead
// of the last allowed request, so state untouched for longer is forgettable.
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
