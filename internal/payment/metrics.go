package payment

import (
	"errors"
	"slices"

	"github.com/rustbill/paymentd/internal/apperr"
	"github.com/rustbill/paymentd/internal/money"
	"github.com/rustbill/paymentd/internal/store"
)

// Metrics counts what the payment domain does, for monitoring
// (internal/metrics implements it). Calls happen after the transaction
// that made the change committed; they must be cheap and safe for
// concurrent use. gateway is the interface's plugin name ("epay",
// "bank_transfer"), "balance" for a balance payment, "unknown" when a
// callback names no known interface.
type Metrics interface {
	// PaymentTransition: a payment was created (pending) or moved to
	// success, failed or refunded.
	PaymentTransition(gateway, status string, amount money.Amount, currency string)
	// MoneyCaptured: a gateway took the money of a payment that could no
	// longer apply (it is failed, the money to be returned).
	MoneyCaptured(gateway string, amount money.Amount, currency string)
	// CallbackOutcome: a gateway callback was answered (one of the
	// Callback* outcomes).
	CallbackOutcome(gateway, outcome string)
	// RefundOutcome: a refund ended succeeded, failed or unknown.
	RefundOutcome(gateway, outcome string, amount money.Amount, currency string)
}

// WithMetrics sets where the domain's counts go (default: nowhere).
func WithMetrics(m Metrics) Option { return func(s *Service) { s.metrics = m } }

type noMetrics struct{}

func (noMetrics) PaymentTransition(string, string, money.Amount, string) {}
func (noMetrics) MoneyCaptured(string, money.Amount, string)             {}
func (noMetrics) CallbackOutcome(string, string)                         {}
func (noMetrics) RefundOutcome(string, string, money.Amount, string)     {}

// The outcomes of a gateway callback.
const (
	CallbackAccepted     = "accepted"      // applied: the payment settled
	CallbackDuplicate    = "duplicate"     // a repeat of an applied callback
	CallbackIgnored      = "ignored"       // valid, but not a success: nothing to apply
	CallbackBadSignature = "bad_signature" // the plugin refused it (signature, foreign merchant)
	CallbackMalformed    = "malformed"     // refused before the plugin saw it (too many parameters)
	CallbackMismatch     = "mismatch"      // interface, currency, amount or order number does not match; late success
	CallbackNotFound     = "not_found"     // unknown payment or interface
	CallbackUnavailable  = "unavailable"   // plugin not loaded, circuit open
	CallbackError        = "error"         // anything else (the gateway retries)
)

// Gateway names for the metrics of payments without a known interface.
const (
	gatewayBalance = "balance"
	gatewayUnknown = "unknown"
)

// MetricLabels are the label sets the domain can give Metrics, each a
// gateway and a status (PaymentTransition), a currency (MoneyCaptured) or
// an outcome (CallbackOutcome, RefundOutcome).
type MetricLabels struct {
	Transitions, Captured, Callbacks, Refunds [][2]string
}

// KnownMetricLabels lists every label set the domain can count for these
// gateway plugins and currencies, and for "balance" (refunds to the
// balance) and "unknown" (callbacks naming no interface) in the counters
// they appear in. The service creates them at zero when it starts, so that
// an alert on any increase sees the first event as one (docs/decisions.md,
// "alerts on the first event").
func KnownMetricLabels(gateways, currencies []string) MetricLabels {
	statuses := []string{string(StatusPending), string(StatusSuccess), string(StatusFailed), string(StatusRefunded)}
	callbacks := []string{CallbackAccepted, CallbackDuplicate, CallbackIgnored, CallbackBadSignature,
		CallbackMalformed, CallbackMismatch, CallbackNotFound, CallbackUnavailable, CallbackError}
	refunds := []string{store.RefundSucceeded, store.RefundFailed, refundAccepted, refundUnknown}
	pairs := func(names, values []string) [][2]string {
		var out [][2]string
		for _, n := range names {
			for _, v := range values {
				out = append(out, [2]string{n, v})
			}
		}
		return out
	}
	withBalance := append(slices.Clone(gateways), gatewayBalance)
	return MetricLabels{
		Transitions: pairs(withBalance, statuses),
		Captured:    pairs(gateways, currencies),
		Callbacks:   pairs(append(slices.Clone(gateways), gatewayUnknown), callbacks),
		Refunds:     pairs(withBalance, refunds),
	}
}

// errBadSignature marks a callback the plugin refused (valid=false).
var errBadSignature = errors.New("bad signature")

// errMalformedCallback marks a callback refused before its plugin ran.
var errMalformedCallback = errors.New("malformed callback")

// callbackOutcome classifies a callback's answer.
func callbackOutcome(res CallbackResult, err error) string {
	if err == nil {
		switch {
		case res.Applied:
			return CallbackAccepted
		case res.Duplicate:
			return CallbackDuplicate
		default:
			return CallbackIgnored
		}
	}
	if errors.Is(err, errBadSignature) {
		return CallbackBadSignature
	}
	if errors.Is(err, errMalformedCallback) {
		return CallbackMalformed
	}
	kind, _ := apperr.KindOf(err)
	switch kind {
	case apperr.NotFound:
		return CallbackNotFound
	case apperr.InvalidArgument:
		return CallbackMismatch
	case apperr.Unavailable:
		return CallbackUnavailable
	}
	return CallbackError
}
