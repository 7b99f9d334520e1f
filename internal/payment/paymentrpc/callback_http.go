package paymentrpc

import (
	"errors"
	"io"
	"log/slog"
	"net/http"
	"strings"

	"github.com/google/uuid"

	"github.com/rustbill/paymentd/internal/apperr"
	"github.com/rustbill/paymentd/internal/logging"
	"github.com/rustbill/paymentd/internal/payment"
	"github.com/rustbill/paymentd/internal/text"
)

// CallbackHandler serves GET and POST /callbacks/{gateway_interface_id}:
// the address real gateways notify (notify_url). It hands the raw query
// string (GET) or body (POST) byte for byte, with the content type and
// the headers (payment.CallbackHeaders: no cookie, no authorization), to
// HandleCallback and
// answers in the terms a gateway understands:
//
//	applied, repeated, or not a success   200, the plugin's ack (epay: "success"), so the gateway stops
//	verified but ignored (other events)   200, the plugin's ack
//	malformed, bad signature, mismatch    400, a short reason, no ack
//	unknown payment or interface          404
//	plugin not loaded, circuit open       503 (the gateway retries)
//	anything else                         500 (the gateway retries)
//
// A refusal's body is the short reason in plain text, or, when the
// interface's plugin declares one (info().callback_refusal: WeChat Pay's
// {"code":"FAIL","message":"失败"}), the body the gateway expects, with
// the same status.
//
// It needs no credential (the signature is the protection) and must sit
// behind the concurrency limit like every request: the server mounts it as
// a route between its limits and its credential layers.
type CallbackHandler struct {
	svc *payment.Service
	log *slog.Logger
}

// NewCallbackHandler returns the /callbacks route over svc.
func NewCallbackHandler(svc *payment.Service, log *slog.Logger) *CallbackHandler {
	if log == nil {
		log = slog.Default()
	}
	return &CallbackHandler{svc: svc, log: log}
}

func (h *CallbackHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	rest, ok := strings.CutPrefix(r.URL.Path, payment.CallbackPath)
	id, err := uuid.Parse(rest)
	if !ok || err != nil || len(rest) != 36 {
		plain(w, http.StatusNotFound, "not found")
		return
	}
	logging.Add(ctx, slog.String("gateway_interface_id", id.String()))
	refuse := func(status int, msg string) {
		if ref := h.svc.CallbackRefusal(ctx, id); ref != nil {
			w.Header().Set("Content-Type", ref.ContentType)
			w.Header().Set("Cache-Control", "no-store")
			w.WriteHeader(status)
			_, _ = io.WriteString(w, ref.Body)
			return
		}
		plain(w, status, msg)
	}
	cb := payment.Callback{GatewayInterfaceID: id, Method: r.Method, Headers: payment.CallbackHeaders(r.Header)}
	switch r.Method {
	case http.MethodGet:
		if len(r.URL.RawQuery) > payment.MaxCallbackBytes {
			refuse(http.StatusRequestEntityTooLarge, "callback too large")
			return
		}
		cb.Payload = r.URL.RawQuery
	case http.MethodPost:
		body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, payment.MaxCallbackBytes))
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			refuse(http.StatusRequestEntityTooLarge, "callback too large")
			return
		}
		if err != nil {
			refuse(http.StatusBadRequest, "cannot read body")
			return
		}
		cb.Payload = string(body)
		cb.ContentType = r.Header.Get("Content-Type")
	default:
		w.Header().Set("Allow", "GET, POST")
		refuse(http.StatusMethodNotAllowed, "method not allowed")
		return
	}

	res, err := h.svc.HandleCallback(ctx, cb)
	if err != nil {
		status, msg := http.StatusInternalServerError, "internal error"
		kind, _ := apperr.KindOf(err)
		switch kind {
		case apperr.InvalidArgument:
			status, msg = http.StatusBadRequest, shortReason(err)
		case apperr.NotFound:
			status, msg = http.StatusNotFound, "not found"
		case apperr.Unavailable:
			status, msg = http.StatusServiceUnavailable, "unavailable"
		}
		level := slog.LevelWarn
		if status >= 500 {
			level = slog.LevelError
		}
		h.log.Log(ctx, level, "gateway callback refused", "gateway_interface_id", id, "method", r.Method, "status", status, "err", err)
		refuse(status, msg)
		return
	}
	if res.Ignored {
		h.log.InfoContext(ctx, "gateway callback answered", "gateway_interface_id", id, "ignored", true)
		plain(w, http.StatusOK, res.Ack)
		return
	}
	logging.Add(ctx, slog.String("payment_id", res.Payment.ID.String()))
	if res.Payment.OrderID != nil {
		logging.Add(ctx, slog.String("order_id", res.Payment.OrderID.String()))
	}
	h.log.InfoContext(ctx, "gateway callback answered", "gateway_interface_id", id, "payment_id", res.Payment.ID,
		"payment_status", res.Payment.Status, "applied", res.Applied, "duplicate", res.Duplicate)
	plain(w, http.StatusOK, res.Ack)
}

// shortReason is the caller-facing message of a domain error, bounded.
func shortReason(err error) string {
	var ae *apperr.Error
	if errors.As(err, &ae) {
		return text.Clip(ae.Message, 200)
	}
	return "bad request"
}

func plain(w http.ResponseWriter, status int, body string) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_, _ = io.WriteString(w, body)
}
