package identity

import (
	"sync"
	"time"

	"github.com/google/uuid"
)

// verifiedTokens remembers access tokens that passed verification, until
// they expire. Parsing and checking a token (base64, JSON, HMAC, claims)
// was a fifth of the CPU of a read request; whether a token is valid
// depends only on the token, the key and the clock, so a token verified
// once is valid until its exp, and the cache answers with exactly what
// verifying it again would — exp is checked against the clock on every
// use. Only verified tokens get in: refused ones are checked every time.
// Whether the token has been ended since (its generation) is not the
// signature's business: the authenticator asks that on every use.
//
// It is bounded: when full, an arbitrary tenth of the entries is dropped
// (expired ones first), so a flood of new valid tokens costs at most
// their verification.
type verifiedTokens struct {
	mu      sync.RWMutex
	entries map[string]verifiedToken
	max     int
}

type verifiedToken struct {
	customer uuid.UUID
	jti      string
	// gen is the token generation the token carries; whether it is still
	// the customer's is asked on every use (access.go).
	gen int64
	exp time.Time
}

// tokenCacheSize bounds the cache: about 400 bytes per entry.
const tokenCacheSize = 4096

func newVerifiedTokens(max int) *verifiedTokens {
	return &verifiedTokens{entries: make(map[string]verifiedToken), max: max}
}

// get returns the verified token when it is cached and unexpired at now.
func (c *verifiedTokens) get(token string, now time.Time) (verifiedToken, bool) {
	c.mu.RLock()
	v, ok := c.entries[token]
	c.mu.RUnlock()
	if !ok || !now.Before(v.exp) {
		return verifiedToken{}, false
	}
	return v, true
}

func (c *verifiedTokens) put(token string, v verifiedToken, now time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.entries) >= c.max {
		drop := max(1, c.max/10)
		for k, e := range c.entries {
			if !now.Before(e.exp) {
				delete(c.entries, k)
			}
		}
		for k := range c.entries {
			if len(c.entries) < c.max-drop {
				break
			}
			delete(c.entries, k)
		}
	}
	c.entries[token] = v
}
