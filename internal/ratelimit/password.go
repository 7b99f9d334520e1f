package ratelimit

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"log/slog"
	"time"
)

// The password budgets' defaults ([rate_limit].password_per_sec and
// password_per_account_per_min); config.Default() starts from the same
// values.
const (
	// DefaultPasswordPerSec bounds password attempts across every address:
	// 20 a second is more than the logins of a busy day and about what
	// two instances of two CPUs can hash, so a flood spread over many
	// addresses is refused by the budget before it reaches argon2id.
	DefaultPasswordPerSec = 20
	// DefaultPasswordPerAccountPerMin bounds password attempts on one
	// account from every address together: ten at once (a user who
	// mistypes a few times), then one every six seconds.
	DefaultPasswordPerAccountPerMin = 10
)

// RateLimiter is a Limiter for any Rate (Memory, Redis, Fallback).
type RateLimiter interface {
	AllowRate(ctx context.Context, key string, rate Rate) (allowed bool, retryAfter time.Duration, err error)
}

// PasswordBudget is the budget of password attempts beyond the per-address
// limit (Middleware): one for the whole service, shared by every address,
// and one per account, shared by every address that names it. A flood
// from many addresses, each under its own limit, thus still meets a
// bound; so does a guess at one account from many addresses. It
// implements identity.PasswordLimiter.
type PasswordBudget struct {
	limiter         RateLimiter
	global, account Rate
	log             *slog.Logger
}

// NewPasswordBudget returns the budget of l's password limits counted in
// limiter, or nil (no budget) when l is not enabled.
func NewPasswordBudget(limiter RateLimiter, l Limits, log *slog.Logger) *PasswordBudget {
	if !l.Enabled || limiter == nil {
		return nil
	}
	if log == nil {
		log = slog.Default()
	}
	return &PasswordBudget{
		limiter: limiter,
		global:  PerSecond(cmp.Or(max(l.PasswordPerSec, 0), DefaultPasswordPerSec)),
		account: PerMinute(cmp.Or(max(l.PasswordPerAccountPerMin, 0), DefaultPasswordPerAccountPerMin)),
		log:     log,
	}
}

// AllowPassword counts one attempt on account: the account's budget
// first, so that an attack on one account spends no more of the global
// budget than its own allows, then the global one. An attempt the global
// budget refuses has still spent one of the account's. When a counter
// cannot decide (a bare Redis limiter failed) the attempt is let through
// and a warning logged, as Middleware does: an outage of the counters must
// not lock everyone out. The account's key is a hash of its name, so the
// counters (in Redis) hold no e-mail address.
func (b *PasswordBudget) AllowPassword(ctx context.Context, account string) (bool, time.Duration) {
	if b == nil {
		return true, 0
	}
	sum := sha256.Sum256([]byte(account))
	for _, c := range []struct {
		key  string
		rate Rate
	}{
		{"password:account:" + hex.EncodeToString(sum[:16]), b.account},
		{"password:global", b.global},
	} {
		allowed, retryAfter, err := b.limiter.AllowRate(ctx, c.key, c.rate)
		if err != nil {
			b.log.WarnContext(ctx, "password budget not checked, attempt let through", "budget", c.key, "err", err)
			continue
		}
		if !allowed {
			b.log.DebugContext(ctx, "password attempt refused by its budget", "budget", c.key, "retry_after", retryAfter.String())
			return false, retryAfter
		}
	}
	return true, 0
}
