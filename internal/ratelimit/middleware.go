package ratelimit

import (
	"fmt"
	"log/slog"
	"maps"
	"net/http"
	"net/netip"

	"connectrpc.com/connect"

	"github.com/rustbill/paymentd/internal/rpcanswer"
)

// Middleware limits the procedures in rules (path → requests per second) per
// client IP and passes every other request through untouched. Empty rules
// (rate limiting disabled) give a layer that does nothing. clientIP nil
// means ClientIP(nil): the direct peer's address.
//
// A refused request is answered ResourceExhausted in the client's protocol
// (Connect, gRPC or gRPC-Web, through connect.ErrorWriter) or, for anything
// else, plain HTTP 429 (internal/rpcanswer); always with Retry-After (whole seconds, rounded up)
// and, for RPC clients, a google.rpc.RetryInfo detail. The body is not read.
//
// When the limiter cannot decide (only a bare Redis limiter can fail; use
// Fallback), the request is let through and a warning logged: an outage of
// the counters must not lock every customer out.
func Middleware(l Limiter, rules map[string]int, clientIP func(*http.Request) string, log *slog.Logger) func(http.Handler) http.Handler {
	if l == nil || len(rules) == 0 {
		return func(next http.Handler) http.Handler { return next }
	}
	for path, perSec := range rules {
		if perSec < 1 {
			panic(fmt.Sprintf("ratelimit: rule %s: limit must be at least 1 per second, got %d", path, perSec))
		}
	}
	rules = maps.Clone(rules)
	if clientIP == nil {
		clientIP = ClientIP(nil)
	}
	if log == nil {
		log = slog.Default()
	}
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			procedure := r.URL.Path
			perSec, ok := rules[procedure]
			if !ok {
				next.ServeHTTP(w, r)
				return
			}
			ip := clientIP(r)
			allowed, retryAfter, err := l.Allow(r.Context(), procedure+":"+bucket(ip), perSec)
			if err != nil {
				log.WarnContext(r.Context(), "rate limit not checked, request let through",
					"procedure", procedure, "client_ip", ip, "err", err)
				next.ServeHTTP(w, r)
				return
			}
			if allowed {
				next.ServeHTTP(w, r)
				return
			}
			// Debug, not info: a client hammering login would otherwise
			// write one line per refused attempt.
			log.DebugContext(r.Context(), "rate limited",
				"procedure", procedure, "client_ip", ip, "retry_after", retryAfter.String())
			rpcanswer.RetryLater(w, r, connect.CodeResourceExhausted, "too many requests", retryAfter)
		})
	}
}

// bucket is the part of the key that names the client: the address itself,
// or for IPv6 its /64, the usual allocation to one customer line, so that a
// client cannot get a fresh limit by moving within its own network.
func bucket(ip string) string {
	addr, err := netip.ParseAddr(ip)
	if err != nil {
		return ip
	}
	addr = addr.Unmap()
	if addr.Is4() {
		return addr.String()
	}
	p, err := addr.WithZone("").Prefix(64)
	if err != nil {
		return ip
	}
	return p.String()
}
