package payment

import (
	"context"
	"encoding/json"
	"errors"

	"github.com/google/uuid"

	"github.com/rustbill/paymentd/internal/apperr"
	"github.com/rustbill/paymentd/internal/money"
	"github.com/rustbill/paymentd/internal/outbound"
	"github.com/rustbill/paymentd/internal/plugin"
	"github.com/rustbill/paymentd/internal/text"
)

// The inputs and outputs of the gateway contract (docs/plugins.md). Money
// goes to a plugin as a string with two decimals (money.Amount marshals so)
// and comes back as whatever string the gateway sent; it is parsed strictly
// and compared as a decimal, never as a string ("1" equals "1.00").

type createPaymentInput struct {
	PaymentID string       `json:"payment_id"`
	OrderID   string       `json:"order_id"`
	InvoiceID string       `json:"invoice_id"`
	Amount    money.Amount `json:"amount"`
	Currency  string       `json:"currency"`
	Subject   string       `json:"subject"`
	ReturnURL string       `json:"return_url"`
	NotifyURL string       `json:"notify_url"`
	ClientIP  string       `json:"client_ip"`
	// SaveMethod asks a gateway that saves methods to save the card of a
	// recurring order's payment, for CustomerID, whose gateway customer is
	// GatewayCustomerID ("" before the first).
	SaveMethod        bool   `json:"save_method,omitempty"`
	CustomerID        string `json:"customer_id,omitempty"`
	GatewayCustomerID string `json:"gateway_customer_id,omitempty"`
}

type createPaymentOutput struct {
	PaymentURL       string `json:"payment_url"`
	QRCode           string `json:"qr_code"`
	Instructions     string `json:"instructions"`
	GatewayPaymentID string `json:"gateway_payment_id"`
	// GatewayCustomerID: the gateway customer a saving payment was made
	// for, remembered for the customer's next ones.
	GatewayCustomerID string `json:"gateway_customer_id"`
}

type queryPaymentInput struct {
	PaymentID        string       `json:"payment_id"`
	GatewayPaymentID string       `json:"gateway_payment_id"`
	Amount           money.Amount `json:"amount"`
	Currency         string       `json:"currency"`
}

type queryPaymentOutput struct {
	Status           string `json:"status"`
	GatewayPaymentID string `json:"gateway_payment_id"`
	GatewayTxID      string `json:"gateway_tx_id"`
	Amount           string `json:"amount"`
	// Currency is optional: a gateway whose answer names one says it here.
	Currency string `json:"currency"`
	PaidAt   string `json:"paid_at"`
}

type parseCallbackInput struct {
	Method      string `json:"method"`
	ContentType string `json:"content_type"`
	Payload     string `json:"payload"`
	// PayloadBase64 is set when the payload is not UTF-8: its exact bytes.
	PayloadBase64 string            `json:"payload_base64,omitempty"`
	Headers       map[string]string `json:"headers"`
}

type parseCallbackOutput struct {
	Valid     bool   `json:"valid"`
	Reason    string `json:"reason"`
	PaymentID string `json:"payment_id"`
	Amount    string `json:"amount"`
	// Currency is optional, as in queryPaymentOutput.
	Currency         string `json:"currency"`
	Status           string `json:"status"`
	GatewayPaymentID string `json:"gateway_payment_id"`
	GatewayTxID      string `json:"gateway_tx_id"`
	Ack              string `json:"ack"`
	// Final, with status failed: the gateway says the payment can never
	// be paid any more (Stripe: the Checkout Session expired, its bank
	// debit failed), so the pending payment fails through the settlement.
	// A failure without it changes nothing (it may mean something else:
	// Alipay's TRADE_CLOSED is also a trade refunded in full).
	Final bool `json:"final"`
	// Refund is what a notification with status "refund" says of a refund
	// the service asked for.
	Refund *callbackRefund `json:"refund"`
	// Dispute is what a notification with status "dispute" says of a
	// dispute (chargeback) of a payment; GatewayTxID names the payment
	// when PaymentID is empty (Stripe: the PaymentIntent).
	Dispute *callbackDispute `json:"dispute"`
	// SavedMethod: a paid payment saved its payment method (a gateway
	// that saves methods, asked to by create_payment's save_method).
	SavedMethod *savedMethodReport `json:"saved_method"`
}

// callbackDispute is a gateway's notification about a dispute of a
// payment (parse_callback's status "dispute").
type callbackDispute struct {
	DisputeID string `json:"dispute_id"`
	// Status is the gateway's (Stripe: warning_needs_response,
	// needs_response, under_review, won, lost, ...).
	Status   string `json:"status"`
	Amount   string `json:"amount"`
	Currency string `json:"currency"`
	Reason   string `json:"reason"`
	// EvidenceDueBy is the evidence deadline in Unix seconds, as digits
	// ("": none).
	EvidenceDueBy string `json:"evidence_due_by"`
}

// callbackRefund is a gateway's notification about a refund
// (parse_callback's status "refund").
type callbackRefund struct {
	RefundID string `json:"refund_id"`
	// Status is refundSucceeded, refundFailed or refundPending.
	Status          string `json:"status"`
	GatewayRefundID string `json:"gateway_refund_id"`
	// Amount and Currency are the refund's as the gateway holds it.
	Amount   string `json:"amount"`
	Currency string `json:"currency"`
	Message  string `json:"message"`
}

type refundInput struct {
	PaymentID        string       `json:"payment_id"`
	RefundID         string       `json:"refund_id"`
	GatewayPaymentID string       `json:"gateway_payment_id"`
	GatewayTxID      string       `json:"gateway_tx_id"`
	Amount           money.Amount `json:"amount"`
	PaymentAmount    money.Amount `json:"payment_amount"`
	Currency         string       `json:"currency"`
	Reason           string       `json:"reason"`
}

type refundOutput struct {
	Status          string `json:"status"`
	GatewayRefundID string `json:"gateway_refund_id"`
	Message         string `json:"message"`
}

// Statuses in plugin answers.
const (
	gatewaySuccess = "success"
	gatewayFailed  = "failed"
	gatewayPending = "pending"
	// gatewayIgnored: parse_callback verified a notification that concerns
	// no payment's status (a gateway's other event types).
	gatewayIgnored = "ignored"
	// gatewayRefund: parse_callback verified a notification about a
	// refund (parseCallbackOutput.Refund).
	gatewayRefund = "refund"
	// gatewayDispute: parse_callback verified a notification about a
	// dispute of a payment (parseCallbackOutput.Dispute).
	gatewayDispute = "dispute"

	refundSucceeded = "succeeded"
	refundFailed    = "failed"
	refundPending   = "pending"
	refundUnknownAt = "unknown"
)

// gateway looks up a gateway interface for an operation on an existing
// payment: the interface must be known and its plugin loaded (a disabled
// interface still settles and refunds the payments made through it).
func (s *Service) gateway(ctx context.Context, id uuid.UUID) (Gateway, error) {
	if s.gateways == nil {
		return Gateway{}, apperr.New(apperr.Unavailable, "payment gateways are not available")
	}
	gw, err := s.gateways.Get(ctx, id)
	if err != nil {
		return Gateway{}, err
	}
	if gw.Plugin == nil {
		return Gateway{}, apperr.New(apperr.Unavailable, "the plugin of gateway interface %s is not loaded", id)
	}
	return gw, nil
}

// callPlugin runs fn of gw's plugin with input marshalled to JSON and
// decodes its answer into out. A failure is Internal ("gateway plugin … failed",
// the cause logged, never shown), an open circuit Unavailable naming the host.
func callPlugin(ctx context.Context, gw Gateway, fn string, input, out any) error {
	raw, err := rawCall(ctx, gw, fn, input)
	if err != nil {
		return pluginError(gw, fn, err)
	}
	return decodeAnswer(gw, fn, raw, out)
}

func rawCall(ctx context.Context, gw Gateway, fn string, input any) (string, error) {
	in, err := json.Marshal(input)
	if err != nil {
		return "", err
	}
	return gw.Plugin.Call(ctx, fn, gw.ConfigJSON, string(in))
}

func decodeAnswer(gw Gateway, fn, raw string, out any) error {
	if err := json.Unmarshal([]byte(raw), out); err != nil {
		return apperr.Wrap(apperr.Internal, err, "gateway plugin %s: %s returned a malformed answer", gw.PluginName, fn).Show()
	}
	return nil
}

// pluginError maps a failed plugin call: an open circuit breaker is Unavailable
// ("gateway <host> unavailable"); anything else is Internal, answering "gateway
// plugin <name>: <function> failed" (the API contract's "gateway plugin
// execution failed", which tells a caller more than "internal error" and nothing
// of the cause, which is only logged).
func pluginError(gw Gateway, fn string, err error) error {
	if host, ok := circuitOpen(err); ok {
		return apperr.Wrap(apperr.Unavailable, err, "gateway %s unavailable", host)
	}
	return apperr.Wrap(apperr.Internal, err, "gateway plugin %s: %s failed", gw.PluginName, fn).Show()
}

// circuitOpen reports whether err is (or wraps) an open circuit breaker, and
// the host it names.
func circuitOpen(err error) (string, bool) {
	var coe *outbound.CircuitOpenError
	if errors.As(err, &coe) {
		return coe.Host, true
	}
	if errors.Is(err, outbound.ErrCircuitOpen) {
		return "host", true
	}
	return "", false
}

// pluginKind is the kind of a failed plugin call, "" when err is not a
// *plugin.CallError.
func pluginKind(err error) plugin.ErrorKind {
	var ce *plugin.CallError
	if errors.As(err, &ce) {
		return ce.Kind
	}
	return ""
}

// pluginMessage is the plugin's own message of a failed call (for admins
// and logs; never for customers), bounded.
func pluginMessage(err error) string {
	var ce *plugin.CallError
	if errors.As(err, &ce) {
		return text.Clip(ce.Message, 300)
	}
	return text.Clip(err.Error(), 300)
}
