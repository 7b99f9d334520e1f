package payment

import (
	"context"
	"encoding/base64"
	"net/http"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"

	"github.com/rustbill/paymentd/internal/apperr"
	"github.com/rustbill/paymentd/internal/audit"
	"github.com/rustbill/paymentd/internal/auth"
	"github.com/rustbill/paymentd/internal/money"
	"github.com/rustbill/paymentd/internal/store"
	"github.com/rustbill/paymentd/internal/text"
)

// MaxCallbackBytes bounds a callback's query string or body, as the gRPC
// HandleCallback bounds its payload.
const MaxCallbackBytes = 64 << 10

// Callback is a gateway's asynchronous notification as it arrived.
type Callback struct {
	GatewayInterfaceID uuid.UUID
	// Method is GET or POST; ContentType the request's Content-Type.
	Method      string
	ContentType string
	// Payload is the raw query string (GET) or body (POST), byte for byte.
	Payload string
	// Headers are the request's headers as CallbackHeaders keeps them
	// (nil from the gRPC HandleCallback, which has none).
	Headers map[string]string
}

// Bounds of the headers a callback hands to parse_callback. A gateway's
// notification carries a dozen headers with a signature of a few hundred
// bytes (Stripe-Signature with two secrets during a rotation is under
// 300); proxies add some. A header over maxCallbackHeaderBytes is left out
// whole rather than cut, so a plugin never sees half a signature.
const (
	MaxCallbackHeaders     = 64
	maxCallbackHeaderBytes = 4 << 10
	maxCallbackHeadersSize = 32 << 10
)

// privateHeaders are never handed to a plugin: they carry the caller's
// credentials, which a gateway never sends and a script must not see.
var privateHeaders = map[string]bool{"cookie": true, "authorization": true, "proxy-authorization": true}

// CallbackHeaders is what parse_callback receives of a request's headers:
// names lower-cased, the first value of each, at most MaxCallbackHeaders
// names (taken in name order, so the choice does not depend on the map's)
// of at most 4 KiB each and 32 KiB in all, never cookie or authorization.
func CallbackHeaders(h http.Header) map[string]string {
	names := make([]string, 0, len(h))
	for k, v := range h {
		if len(v) > 0 && !privateHeaders[strings.ToLower(k)] {
			names = append(names, k)
		}
	}
	slices.Sort(names)
	out := make(map[string]string, min(len(names), MaxCallbackHeaders))
	total := 0
	for _, k := range names {
		name, v := strings.ToLower(k), h[k][0]
		if _, dup := out[name]; dup || len(name)+len(v) > maxCallbackHeaderBytes || total+len(name)+len(v) > maxCallbackHeadersSize {
			continue
		}
		out[name] = v
		total += len(name) + len(v)
		if len(out) == MaxCallbackHeaders {
			break
		}
	}
	return out
}

// CallbackResult is the outcome of a callback that was accepted.
type CallbackResult struct {
	Payment store.Payment
	// Ack is the body the gateway expects when the callback was taken
	// (epay: "success").
	Ack string
	// Duplicate: the callback repeats one already applied. The gRPC
	// HandleCallback answers AlreadyExists; the /callbacks route
	// acknowledges it again so the gateway stops retrying.
	Duplicate bool
	// Applied: this callback settled the payment.
	Applied bool
	// Ignored: a genuine notification about nothing this service acts on
	// (parse_callback answered status "ignored": a Stripe event of another
	// type). Payment is empty; Ack still goes back so the gateway stops.
	Ignored bool
}

// HandleCallback verifies a gateway callback with the interface's plugin
// (parse_callback) and applies it exactly once:
//
//   - a callback no gateway sends (over MaxCallbackPairs parameters or
//     MaxCallbackBytes) is InvalidArgument "malformed callback: …", refused
//     before the plugin runs, counted as malformed;
//   - a bad signature (valid=false) is InvalidArgument "signature
//     verification failed: …", nothing changed;
//   - an unknown payment is NotFound;
//   - a success is settled (see settle): pending → success, order paid,
//     order_paid queued, in one transaction under the row locks; a repeat of
//     the applied callback comes back with Duplicate set; an interface,
//     amount or order-number mismatch is InvalidArgument and is recorded;
//   - a failure the plugin marks final (Stripe: the Checkout Session
//     expired, its bank debit failed) is settled too (see finalFailure): a
//     pending payment fails, freeing its order or invoice for another
//     payment; a repeat is Duplicate; a paid payment stays paid and the
//     contradiction is recorded (InvalidArgument);
//   - another status (pending, a failure not marked final) changes nothing
//     and answers the record as it is: such a notification may mean
//     something else (Alipay's TRADE_CLOSED is also a trade refunded in
//     full), so those payments fail on a status query's answer;
//   - "refund" (a verified notification about a refund the service asked
//     for) completes or fails that pending refund, exactly once (see
//     refundCallback);
//   - "dispute" (a verified notification about a dispute of a payment)
//     records it and suspends, resumes or refunds as it says, once per
//     status change (see disputeCallback);
//   - "ignored" (a verified notification about nothing a payment needs,
//     such as a Stripe event of another type) changes nothing, looks up
//     nothing and answers the ack with Ignored set.
//
// No credential is needed: the signature is the protection. A disabled
// interface still takes callbacks, since money paid through it must land.
func (s *Service) HandleCallback(ctx context.Context, cb Callback) (CallbackResult, error) {
	gateway := gatewayUnknown
	res, err := s.handleCallback(ctx, cb, &gateway)
	s.metrics.CallbackOutcome(gateway, callbackOutcome(res, err))
	return res, err
}

// handleCallback is HandleCallback; it sets *gateway to the interface's
// plugin name once it is known.
func (s *Service) handleCallback(ctx context.Context, cb Callback, gateway *string) (CallbackResult, error) {
	if s.gateways == nil {
		return CallbackResult{}, apperr.New(apperr.Unavailable, "payment gateways are not available")
	}
	gw, err := s.gateways.Get(ctx, cb.GatewayInterfaceID)
	if apperr.Is(err, apperr.NotFound) {
		return CallbackResult{}, apperr.New(apperr.NotFound, "gateway interface %s not found", cb.GatewayInterfaceID)
	}
	if err != nil {
		return CallbackResult{}, err
	}
	*gateway = gw.PluginName
	if err := checkCallbackShape(cb); err != nil {
		return CallbackResult{}, err
	}
	if gw.Plugin == nil {
		return CallbackResult{}, apperr.New(apperr.Unavailable, "the plugin of gateway interface %s is not loaded", cb.GatewayInterfaceID)
	}
	var res parseCallbackOutput
	if err := callPlugin(ctx, gw, "parse_callback", parseCallbackInput{
		Method: cb.Method, ContentType: cb.ContentType, Payload: cb.Payload, PayloadBase64: payloadBase64(cb.Payload),
		Headers: nonNil(cb.Headers),
	}, &res); err != nil {
		return CallbackResult{}, err
	}
	if !res.Valid {
		reason := text.Clip(strings.TrimSpace(res.Reason), 120)
		if reason == "" {
			reason = "rejected by the gateway plugin"
		}
		s.log.WarnContext(ctx, "gateway callback rejected", "gateway_interface_id", cb.GatewayInterfaceID, "reason", reason)
		return CallbackResult{}, apperr.Wrap(apperr.InvalidArgument, errBadSignature, "signature verification failed: %s", reason)
	}
	if res.Status == gatewayIgnored {
		s.log.InfoContext(ctx, "gateway callback ignored", "gateway_interface_id", cb.GatewayInterfaceID, "reason", text.Clip(res.Reason, 120))
		return CallbackResult{Ack: res.Ack, Ignored: true}, nil
	}
	if res.Status == gatewayRefund {
		return s.refundCallback(ctx, cb.GatewayInterfaceID, gw, res)
	}
	if res.Status == gatewayDispute {
		return s.disputeCallback(ctx, cb.GatewayInterfaceID, gw, res)
	}
	paymentID, err := uuid.Parse(res.PaymentID)
	if err != nil {
		return CallbackResult{}, apperr.New(apperr.NotFound, "payment %q not found", text.Clip(res.PaymentID, 64))
	}
	if res.Status == gatewayFailed && res.Final {
		return s.finalFailure(ctx, cb.GatewayInterfaceID, gw, paymentID, res)
	}
	amount, err := money.Parse(res.Amount)
	if err != nil {
		return CallbackResult{}, apperr.New(apperr.InvalidArgument, "the gateway reports an unreadable amount %q", text.Clip(res.Amount, 40))
	}

	if res.Status != gatewaySuccess {
		// Nothing to apply; answer the record as it is, after the same
		// identity checks a success gets.
		pay, err := store.Q(s.db).GetPayment(ctx, paymentID)
		if err != nil {
			return CallbackResult{}, store.NotFound(err, "payment %s not found", paymentID)
		}
		if pay.GatewayInterfaceID == nil || *pay.GatewayInterfaceID != cb.GatewayInterfaceID {
			return CallbackResult{}, apperr.New(apperr.InvalidArgument, "payment %s does not belong to gateway interface %s", paymentID, cb.GatewayInterfaceID)
		}
		s.log.InfoContext(ctx, "gateway callback without success", "payment_id", paymentID, "gateway_status", text.Clip(res.Status, 20))
		return CallbackResult{Payment: pay, Ack: res.Ack}, nil
	}

	st, err := s.settle(ctx, fromCallback, audit.Gateway(cb.GatewayInterfaceID), paymentID, cb.GatewayInterfaceID, report{
		Status: gatewaySuccess, GatewayPaymentID: res.GatewayPaymentID, GatewayTxID: res.GatewayTxID,
		Amount: &amount, RawAmount: res.Amount, Currency: res.Currency, Takes: takes(gw), Gateway: gw.PluginName,
	})
	if err != nil {
		return CallbackResult{}, err
	}
	s.keepSavedMethod(ctx, st.Payment, gw, res.SavedMethod)
	return CallbackResult{Payment: st.Payment, Ack: res.Ack, Duplicate: st.Duplicate, Applied: st.Applied}, nil
}

// finalFailure applies a notification that says a payment can never be
// paid (parse_callback's failed with final: Stripe's expired session or
// failed bank debit) through the settlement, as a status query's failure
// is: a pending payment fails (its order or invoice is free for another
// payment), a failed one is a duplicate, a paid one stays paid and the
// contradiction is recorded as a failed_after_success anomaly
// (InvalidArgument). The amount and currency, when reported, are held to
// the payment's as for a success.
func (s *Service) finalFailure(ctx context.Context, interfaceID uuid.UUID, gw Gateway, paymentID uuid.UUID, res parseCallbackOutput) (CallbackResult, error) {
	rep := report{
		Status: gatewayFailed, GatewayPaymentID: res.GatewayPaymentID, GatewayTxID: res.GatewayTxID,
		RawAmount: res.Amount, Currency: res.Currency, Takes: takes(gw), Gateway: gw.PluginName,
		Reason: text.Clip(strings.TrimSpace(res.Reason), 200),
	}
	if rep.Reason == "" {
		rep.Reason = "the gateway reports the payment can no longer be paid"
	}
	if res.Amount != "" {
		amount, err := money.Parse(res.Amount)
		if err != nil {
			return CallbackResult{}, apperr.New(apperr.InvalidArgument, "the gateway reports an unreadable amount %q", text.Clip(res.Amount, 40))
		}
		rep.Amount = &amount
	}
	st, err := s.settle(ctx, fromCallback, audit.Gateway(interfaceID), paymentID, interfaceID, rep)
	if err != nil {
		return CallbackResult{}, err
	}
	return CallbackResult{Payment: st.Payment, Ack: res.Ack, Duplicate: st.Duplicate, Applied: st.Applied}, nil
}

// payloadBase64 is the payload's exact bytes when they are not UTF-8: a
// JSON string cannot carry them (they would arrive as U+FFFD), and a
// signature is over the bytes the gateway sent.
func payloadBase64(p string) string {
	if utf8.ValidString(p) {
		return ""
	}
	return base64.StdEncoding.EncodeToString([]byte(p))
}

func nonNil(m map[string]string) map[string]string {
	if m == nil {
		return map[string]string{}
	}
	return m
}

// MaxCallbackPairs bounds the parameters of a form-encoded callback (a GET
// query, a POST form) that reach a plugin's parse_callback, counted as
// '&'-separated parts, empty ones included. Real notifications carry about
// 10 (epay) to 40 (Alipay).
//
// Without it, unsigned junk — 6,150 "k=v" pairs, 48 KiB, under
// MaxCallbackBytes — ran epay's parse_callback out of its 10M-instruction
// budget before any signature check, answering 500 and counting as a
// gateway error. Measured (internal/plugintest, epay_budget_test.go), each
// part costs about 100 instructions of its own plus one per 16 bytes of
// payload after it (string.find is charged for the text from its start to
// the end), so the cost grows with parts × payload: 6,150 parts of 48 KiB
// come to about 10M. Under this bound the worst payload (128 parts in
// 64 KiB: pid and sign present so the signature is computed, short parts
// and one long last value) costs 0.55M instructions, 5.5% of the budget,
// which TestEpayParseCallbackWorstCaseUnderTheCallbackBounds keeps under a
// tenth; a 40-parameter notification costs 6K. The bound leaves real
// notifications three times Alipay's parameters.
const MaxCallbackPairs = 128

// checkCallbackShape refuses, before any plugin runs, a callback no gateway
// sends: a payload over MaxCallbackBytes, or a form of more than
// MaxCallbackPairs parts. It is InvalidArgument, counted as malformed:
// junk anyone can send is neither a gateway failure nor a forged signature.
func checkCallbackShape(cb Callback) error {
	if len(cb.Payload) > MaxCallbackBytes {
		return apperr.Wrap(apperr.InvalidArgument, errMalformedCallback, "malformed callback: the payload is over %d bytes", MaxCallbackBytes)
	}
	if formEncoded(cb) && strings.Count(cb.Payload, "&") >= MaxCallbackPairs {
		return apperr.Wrap(apperr.InvalidArgument, errMalformedCallback, "malformed callback: more than %d parameters", MaxCallbackPairs)
	}
	return nil
}

// formEncoded reports whether a callback's payload is form-encoded pairs: a
// GET query, or a POST without a content type (the gRPC HandleCallback's)
// or with a form one. Other bodies (JSON, XML) are the plugin's to bound.
func formEncoded(cb Callback) bool {
	if cb.Method != http.MethodPost {
		return true
	}
	ct := strings.ToLower(strings.TrimSpace(cb.ContentType))
	return ct == "" || strings.Contains(ct, "application/x-www-form-urlencoded")
}

// QueryPaymentStatus asks the gateway for a payment's status and
// synchronises the record (admin): success is settled like a callback (an
// already settled payment is simply returned), failed fails a pending
// payment, pending changes nothing. A failed gateway payment whose money
// is not captured is asked about too while it failed at most
// [payments].late_capture_days ago: a success then is recorded as
// captured money to return (the payment stays failed). Any other payment
// is returned as it is. A failed query is Internal; an open circuit
// breaker Unavailable.
func (s *Service) QueryPaymentStatus(ctx context.Context, id uuid.UUID) (store.Payment, error) {
	p, err := auth.RequireAdmin(ctx)
	if err != nil {
		return store.Payment{}, err
	}
	pay, err := store.Q(s.db).GetPayment(ctx, id)
	if err != nil {
		return store.Payment{}, store.NotFound(err, "payment %s not found", id)
	}
	if pay.Method != methodGateway || pay.GatewayInterfaceID == nil {
		return store.Payment{}, apperr.New(apperr.InvalidArgument, "payment %s was paid from the balance; there is no gateway to ask", id)
	}
	if Status(pay.Status) != StatusPending && !s.mayBeCapturedLate(pay) {
		return pay, nil
	}
	return s.syncWithGateway(ctx, pay, fromQuery, audit.Of(p))
}

// mayBeCapturedLate reports whether a gateway may still have taken the
// money of a failed payment: it failed within the late-capture window and
// no capture is recorded yet.
func (s *Service) mayBeCapturedLate(pay store.Payment) bool {
	return Status(pay.Status) == StatusFailed && pay.CapturedAmount.Sign() == 0 && pay.FailedAt != nil &&
		!s.now().After(pay.FailedAt.Add(s.lateCapture))
}

// SyncForReconciler is QueryPaymentStatus for the reconciler: pay's gateway
// is asked and its answer applied, under the system actor node.
func (s *Service) SyncForReconciler(ctx context.Context, pay store.Payment, node string) (store.Payment, error) {
	return s.syncWithGateway(ctx, pay, fromReconcile, audit.System(node))
}

// syncWithGateway asks pay's gateway (query_payment, outside any
// transaction) and applies the answer through settle.
func (s *Service) syncWithGateway(ctx context.Context, pay store.Payment, src string, who audit.Actor) (store.Payment, error) {
	gw, err := s.gateway(ctx, *pay.GatewayInterfaceID)
	if err != nil {
		if apperr.Is(err, apperr.NotFound) {
			return store.Payment{}, apperr.Wrap(apperr.Internal, err, "gateway interface of payment %s not found", pay.ID)
		}
		return store.Payment{}, err
	}
	var out queryPaymentOutput
	if err := callPlugin(ctx, gw, "query_payment", queryPaymentInput{
		PaymentID: pay.ID.String(), GatewayPaymentID: pay.GatewayPaymentID, Amount: pay.Amount, Currency: pay.Currency,
	}, &out); err != nil {
		return store.Payment{}, err
	}
	rep := report{
		Status: out.Status, GatewayPaymentID: out.GatewayPaymentID, GatewayTxID: out.GatewayTxID,
		RawAmount: out.Amount, Currency: out.Currency, Takes: takes(gw), Reason: "the gateway reports the payment failed", Gateway: gw.PluginName,
	}
	switch out.Status {
	case gatewayPending:
		return pay, nil
	case gatewaySuccess, gatewayFailed:
	default:
		return store.Payment{}, apperr.New(apperr.Internal, "gateway plugin %s: query_payment answered unknown status %q", gw.PluginName, text.Clip(out.Status, 20))
	}
	if out.Amount != "" {
		a, err := money.Parse(out.Amount)
		if err != nil {
			return store.Payment{}, apperr.New(apperr.InvalidArgument, "the gateway reports an unreadable amount %q", text.Clip(out.Amount, 40))
		}
		rep.Amount = &a
	}
	if t, err := time.Parse(time.RFC3339, out.PaidAt); err == nil {
		rep.PaidAt = t
	}
	st, err := s.settle(ctx, src, who, pay.ID, *pay.GatewayInterfaceID, rep)
	if err != nil {
		return store.Payment{}, err
	}
	if err := s.answerLostCharge(ctx, gw, st.Payment); err != nil {
		// The payment is settled all the same; the attempt's row stays
		// unknown, for an admin (docs/operations.md, "Card renewals").
		s.log.ErrorContext(ctx, "saved-method charge settled by a status query, but its attempt not answered", "payment_id", pay.ID, "err", err)
	}
	return st.Payment, nil
}

// BankTransferPlugin is the plugin whose payments an admin confirms.
const BankTransferPlugin = "bank_transfer"

// ConfirmBankTransfer records that a bank transfer arrived (admin): the
// same success path as a callback (row locks, status check, order paid,
// order_paid queued, one transaction), with reference — the statement's
// reference — as the gateway payment and transaction id, and the admin as
// the actor in audit_log. Only payments of a bank_transfer interface can be
// confirmed (else InvalidArgument). Confirming again with the same
// reference is AlreadyExists; with another, InvalidArgument.
func (s *Service) ConfirmBankTransfer(ctx context.Context, paymentID uuid.UUID, reference string) (store.Payment, error) {
	p, err := auth.RequireAdmin(ctx)
	if err != nil {
		return store.Payment{}, err
	}
	reference = strings.TrimSpace(reference)
	if reference == "" {
		return store.Payment{}, apperr.New(apperr.InvalidArgument, "reference is required")
	}
	if len(reference) > 128 {
		return store.Payment{}, apperr.New(apperr.InvalidArgument, "reference must be at most 128 bytes")
	}
	pay, err := store.Q(s.db).GetPayment(ctx, paymentID)
	if err != nil {
		return store.Payment{}, store.NotFound(err, "payment %s not found", paymentID)
	}
	if pay.Method != methodGateway || pay.GatewayInterfaceID == nil {
		return store.Payment{}, apperr.New(apperr.InvalidArgument, "payment %s was paid from the balance, not by bank transfer", paymentID)
	}
	if s.gateways == nil {
		return store.Payment{}, apperr.New(apperr.Unavailable, "payment gateways are not available")
	}
	gw, err := s.gateways.Get(ctx, *pay.GatewayInterfaceID)
	if err != nil {
		if apperr.Is(err, apperr.NotFound) {
			return store.Payment{}, apperr.New(apperr.InvalidArgument, "payment %s is not a bank transfer", paymentID)
		}
		return store.Payment{}, err
	}
	if gw.PluginName != BankTransferPlugin {
		return store.Payment{}, apperr.New(apperr.InvalidArgument, "payment %s is paid through %s, not by bank transfer", paymentID, gw.PluginName)
	}
	st, err := s.settle(ctx, fromConfirm, audit.Of(p), pay.ID, *pay.GatewayInterfaceID, report{
		Status: gatewaySuccess, GatewayPaymentID: reference, GatewayTxID: reference, Gateway: gw.PluginName,
	})
	if err != nil {
		return store.Payment{}, err
	}
	if st.Duplicate {
		return st.Payment, apperr.New(apperr.AlreadyExists, "payment %s was already confirmed with reference %q", paymentID, reference)
	}
	return st.Payment, nil
}

// takes is what settle holds a report of gw without a currency to: the
// currencies gw takes, never nil (nil would skip the check).
func takes(gw Gateway) []string {
	if gw.Currencies == nil {
		return []string{}
	}
	return gw.Currencies
}

// CallbackRefusal is the body interface id's plugin declares for a refused
// callback (info().callback_refusal), nil when it declares none or the
// interface or its plugin cannot be had: the refusal is then a short
// plain-text reason.
func (s *Service) CallbackRefusal(ctx context.Context, id uuid.UUID) *CallbackRefusal {
	if s.gateways == nil {
		return nil
	}
	gw, err := s.gateways.Get(ctx, id)
	if err != nil || gw.Plugin == nil {
		return nil
	}
	return gw.CallbackRefusal
}
