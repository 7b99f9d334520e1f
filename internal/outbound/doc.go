// Package outbound is the service's only HTTP client. Gateway plugins
// (http_get, http_post, … host functions), upstream providers and webhook
// notifiers all call out through one *Client, so that every downstream host
// gets the same protection: a circuit breaker of its own, bounded retries,
// a per-attempt timeout and a bounded response body.
//
// # Breakers
//
// Each downstream host:port has one failsafe-go circuit breaker, created on
// first use. A failure is a transport error (refused, reset, TLS, a
// per-attempt timeout) or a 5xx answer. A 4xx, 429 included, is an answer
// from a working host and counts as a success. A body over the size limit is
// an error for the caller but not a host failure, and so is a call its
// caller gave up on mid-call (client gone, client deadline passed; recorded
// as a success): otherwise impatient clients would open a healthy host's
// breaker for everyone.
//
//	            FailureThreshold (5) consecutive failures
//	┌────────┐ ──────────────────────────────────────────▶ ┌────────┐
//	│ closed │                                             │  open  │
//	└────────┘                                             └────────┘
//	    ▲                                                   │      ▲
//	    │ the probe succeeds        Cooldown (30 s) passed: │      │ the probe fails:
//	    │                           the next call is the    │      │ open again for
//	    │                           probe                   ▼      │ a new Cooldown
//	    │                                              ┌─────────────┐
//	    └───────────────────────────────────────────── │  half_open  │
//	                                                   └─────────────┘
//
//	closed     every call is sent; every attempt's result is counted
//	open       nothing is sent: Do returns *CircuitOpenError
//	           (errors.Is ErrCircuitOpen) naming the host and RetryAt
//	half_open  exactly one call, the probe, is sent; all others fail
//	           fast with *CircuitOpenError until its result is in
//
// The open → half_open step happens when a call arrives after the cool-down,
// so Breakers may show "open" with a NextProbe in the past: the next call is
// the probe. Each state change is logged once (host, from, to). The gRPC edge
// maps ErrCircuitOpen to Unavailable with the message naming the host.
//
// # Retries
//
// A resend is allowed only when the caller says so (idempotent=true), the
// method is GET or HEAD, or the request carries an Idempotency-Key header
// (Resendable): a payment creation or a refund is never sent twice
// blindly, and one with a key is not blind — the receiver (Stripe, Adyen,
// PayPal…) answers a resend with the first answer. Retryable calls get up to Attempts (3) attempts on transport
// errors, 429 and 5xx, with exponential backoff (BaseBackoff doubling up to
// MaxBackoff, each wait jittered by ±25%). The breaker sits inside the retry
// policy, so every attempt needs its permit and is counted: a call whose
// attempts open the breaker ends with CircuitOpenError. The request body is
// read into memory before the first attempt, so each attempt sends the same
// bytes and none can fail, inside the breaker, for a reason of our own. When the retries run out the caller gets the last answer (say the
// third 503) as a Response, or the last transport error.
//
// # Composition
//
// Per host: failsafe.With(retrypolicy, circuitbreaker, timeout) for
// retryable calls and failsafe.With(circuitbreaker, timeout) for the rest,
// sharing one breaker. The timeout policy ends one attempt, body included;
// the request's context bounds the whole call, backoff included. A caller
// whose context is already done is refused before the breaker, so it cannot
// use up a half-open probe.
//
// The breaker's clock is failsafe-go's wall clock (it offers no way to
// inject one), so tests use a short Cooldown. Keep Timeout below Cooldown:
// failsafe-go does not tell an attempt begun before the breaker opened from
// the probe, and only the per-attempt timeout guarantees such an attempt has
// ended when the probe is let through. New logs a warning otherwise.
//
// Redirects are not followed: a 3xx is returned as the answer, because
// following it would reach a host whose breaker never sees the call. Errors
// name the method and host:port but never the URL's path or query string,
// which for some gateways carry a merchant key.
package outbound
