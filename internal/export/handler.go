package export

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"

	"connectrpc.com/connect"

	"github.com/rustbill/paymentd/internal/auth"
	"github.com/rustbill/paymentd/internal/payment"
	"github.com/rustbill/paymentd/internal/store"
)

// The routes' paths (http.ServeMux patterns without the method).
const (
	PaymentsPath = "/export/payments.csv"
	RefundsPath  = "/export/refunds.csv"
)

// Access and Scope are who may export: an admin; with an API key, one of
// scope read or wider (what ListPayments and ListRefunds need).
const (
	Access = auth.AdminOnly
	Scope  = auth.ScopeRead
)

// Handler serves both exports.
type Handler struct {
	db  store.DB
	log *slog.Logger
}

// NewHandler returns the exports over db.
func NewHandler(db store.DB, log *slog.Logger) *Handler {
	if log == nil {
		log = slog.Default()
	}
	return &Handler{db: db, log: log}
}

// Payments serves GET PaymentsPath.
func (h *Handler) Payments() http.Handler {
	return h.serve("payments", func(q *query) (func(context.Context, *rowWriter) error, error) {
		w := q.window()
		f := store.ExportPaymentFilter{
			CreatedFrom: w.from, CreatedTo: w.to,
			CustomerID: q.id("customer_id"), OrderID: q.id("order_id"), InvoiceID: q.id("invoice_id"),
			GatewayInterfaceID: q.id("gateway_interface_id"),
			Status: q.oneOf("status", string(payment.StatusPending), string(payment.StatusSuccess),
				string(payment.StatusFailed), string(payment.StatusRefunded)),
			ToReturn: q.flag("to_return"),
		}
		return func(ctx context.Context, out *rowWriter) error {
			out.loc = w.loc
			if err := out.write(paymentHeader...); err != nil {
				return err
			}
			return store.EachExportPayment(ctx, h.db, f, func(p store.ExportPayment) error {
				return out.write(p.ID.String(), out.time(p.CreatedAt), out.time(p.UpdatedAt), out.optTime(p.PaidAt),
					out.optTime(p.FailedAt), p.Status, p.Method, p.Amount.String(), p.RefundedAmount.String(),
					p.CapturedAmount.String(), p.Currency, p.CustomerID.String(), optID(p.OrderID), optID(p.InvoiceID),
					optID(p.GatewayInterfaceID), p.GatewayPaymentID, p.GatewayTxID, p.FailureReason)
			})
		}, q.err()
	}, "from", "to", "tz", "status", "customer_id", "order_id", "invoice_id", "gateway_interface_id", "to_return")
}

// Refunds serves GET RefundsPath.
func (h *Handler) Refunds() http.Handler {
	return h.serve("refunds", func(q *query) (func(context.Context, *rowWriter) error, error) {
		w := q.window()
		f := store.ExportRefundFilter{
			CreatedFrom: w.from, CreatedTo: w.to,
			PaymentID: q.id("payment_id"), CustomerID: q.id("customer_id"),
			Status: q.oneOf("status", store.RefundPending, store.RefundSucceeded, store.RefundFailed),
		}
		return func(ctx context.Context, out *rowWriter) error {
			out.loc = w.loc
			if err := out.write(refundHeader...); err != nil {
				return err
			}
			return store.EachExportRefund(ctx, h.db, f, func(r store.ExportRefund) error {
				return out.write(r.ID.String(), out.time(r.CreatedAt), out.time(r.UpdatedAt), r.Status, r.Destination,
					r.Amount.String(), r.Currency, r.PaymentID.String(), r.CustomerID.String(), optID(r.RequestedBy),
					r.GatewayRefundID, r.Reason, r.Error)
			})
		}, q.err()
	}, "from", "to", "tz", "status", "payment_id", "customer_id")
}

// The header rows: the columns of every row, in order.
var (
	paymentHeader = []string{"id", "created_at", "updated_at", "paid_at", "failed_at", "status", "method",
		"amount", "refunded_amount", "captured_amount", "currency", "customer_id", "order_id", "invoice_id",
		"gateway_interface_id", "gateway_payment_id", "gateway_tx_id", "failure_reason"}
	refundHeader = []string{"id", "created_at", "updated_at", "status", "destination", "amount", "currency",
		"payment_id", "customer_id", "requested_by", "gateway_refund_id", "reason", "error"}
)

// serve is one export: authorize, read the parameters (parse returns the
// writer of the rows, or the parameters' problems), then stream.
func (h *Handler) serve(name string, parse func(*query) (func(context.Context, *rowWriter) error, error), known ...string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx := r.Context()
		if err := auth.CheckRoute(ctx, Access, Scope); err != nil {
			refuse(w, authStatus(err), connectMessage(err))
			return
		}
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			refuse(w, http.StatusMethodNotAllowed, "use GET")
			return
		}
		rows, err := parse(newQuery(r.URL.Query(), known...))
		if err != nil {
			refuse(w, http.StatusBadRequest, err.Error())
			return
		}
		out := &startWriter{w: w, filename: fmt.Sprintf("%s-%s.csv", name, r.URL.Query().Get("from"))}
		if r.Method == http.MethodHead {
			// The headers a GET would send, without reading a row.
			_, _ = out.Write(nil)
			return
		}
		rw := newRowWriter(out, nil)
		err = rows(ctx, rw)
		if err == nil {
			err = rw.flush()
		}
		switch {
		case err == nil:
			h.log.InfoContext(ctx, "export streamed", "export", name, "rows", rw.records-1, "bytes", out.written)
		case !out.started:
			// Nothing was sent: the database refused before the first row.
			h.log.WarnContext(ctx, "export failed before its first row", "export", name, "err", err)
			if errors.Is(err, store.ErrPoolBusy) {
				refuse(w, http.StatusServiceUnavailable, "database busy, retry")
				return
			}
			refuse(w, http.StatusInternalServerError, "the export failed; retry")
		default:
			// The status is sent: cut the response off without its final
			// chunk, so the client sees a broken download, not a short file.
			h.log.WarnContext(ctx, "export cut off", "export", name, "err", err)
			panic(http.ErrAbortHandler)
		}
	})
}

// startWriter sends the CSV headers with the first bytes of the file, so
// that a failure before them can still answer with an error status.
type startWriter struct {
	w        http.ResponseWriter
	filename string
	started  bool
	written  int64
}

func (s *startWriter) Write(b []byte) (int, error) {
	if !s.started {
		s.started = true
		hd := s.w.Header()
		hd.Set("Content-Type", "text/csv; charset=utf-8")
		hd.Set("Content-Disposition", fmt.Sprintf("attachment; filename=%q", s.filename))
		hd.Set("Cache-Control", "no-store")
		hd.Set("X-Content-Type-Options", "nosniff")
		s.w.WriteHeader(http.StatusOK)
	}
	n, err := s.w.Write(b)
	s.written += int64(n)
	return n, err
}

// refuse answers an error before anything was streamed, as plain text.
func refuse(w http.ResponseWriter, status int, msg string) {
	w.Header().Set("Cache-Control", "no-store")
	http.Error(w, msg, status)
}

// authStatus is the HTTP status of auth.CheckRoute's error.
func authStatus(err error) int {
	switch connect.CodeOf(err) {
	case connect.CodeUnauthenticated:
		return http.StatusUnauthorized
	case connect.CodePermissionDenied:
		return http.StatusForbidden
	case connect.CodeUnavailable:
		return http.StatusServiceUnavailable
	}
	return http.StatusInternalServerError
}

func connectMessage(err error) string {
	var ce *connect.Error
	if errors.As(err, &ce) {
		return ce.Message()
	}
	return "not allowed"
}
