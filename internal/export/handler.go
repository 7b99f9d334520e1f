package export

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"time"

	"connectrpc.com/connect"

	"github.com/rustbill/paymentd/internal/audit"
	"github.com/rustbill/paymentd/internal/auth"
	"github.com/rustbill/paymentd/internal/logging"
	"github.com/rustbill/paymentd/internal/observe"
	"github.com/rustbill/paymentd/internal/payment"
	"github.com/rustbill/paymentd/internal/store"
)

// The routes' paths (http.ServeMux patterns without the method).
const (
	PaymentsPath = "/export/payments.csv"
	RefundsPath  = "/export/refunds.csv"
	InvoicesPath = "/export/invoices.csv"
)

// Access and Scope are who may export: an admin; with an API key, one of
// scope read or wider (what ListPayments and ListRefunds need).
const (
	Access = auth.AdminOnly
	Scope  = auth.ScopeRead
)

// The defaults of Options ([export] in the configuration).
const (
	DefaultMaxConcurrent = 2
	DefaultWriteTimeout  = 30 * time.Second
)

// RetryAfter is the Retry-After (seconds) of the 429 past MaxConcurrent.
const RetryAfter = 10

// Audit actions: one row per export, when its last row has been read.
const (
	ActionExportPayments = "export.payments"
	ActionExportRefunds  = "export.refunds"
	ActionExportInvoices = "export.invoices"
)

// Options bound the exports; zero values take the defaults.
type Options struct {
	// MaxConcurrent is how many exports stream at once on this instance.
	MaxConcurrent int
	// WriteTimeout is how long the client may take to accept each chunk.
	WriteTimeout time.Duration
	// PageRows is how many rows a page reads (store.ExportPageRows).
	PageRows int
	// Reads picks the database the rows are read from, once per export
	// (a read replica while it is close enough behind, internal/replica);
	// nil: the handler's db. The audit row is always written to db.
	Reads func() store.DB
}

// Handler serves both exports.
type Handler struct {
	db   store.DB
	log  *slog.Logger
	opts Options
	// slots holds a token per export streaming; full, the next is 429.
	slots chan struct{}
}

// NewHandler returns the exports over db.
func NewHandler(db store.DB, log *slog.Logger, opts Options) *Handler {
	if log == nil {
		log = slog.Default()
	}
	opts.MaxConcurrent = cmp.Or(opts.MaxConcurrent, DefaultMaxConcurrent)
	opts.WriteTimeout = cmp.Or(opts.WriteTimeout, DefaultWriteTimeout)
	opts.PageRows = cmp.Or(opts.PageRows, store.ExportPageRows)
	if opts.Reads == nil {
		opts.Reads = func() store.DB { return db }
	}
	return &Handler{db: db, log: log, opts: opts, slots: make(chan struct{}, opts.MaxConcurrent)}
}

// Payments serves GET PaymentsPath.
func (h *Handler) Payments() http.Handler {
	return h.serve("payments", ActionExportPayments, func(q *query) (func(context.Context, store.DB, *rowWriter) error, error) {
		w := q.window()
		f := store.ExportPaymentFilter{
			CreatedFrom: w.from, CreatedTo: w.to,
			CustomerID: q.id("customer_id"), OrderID: q.id("order_id"), InvoiceID: q.id("invoice_id"),
			GatewayInterfaceID: q.id("gateway_interface_id"),
			Status: q.oneOf("status", string(payment.StatusPending), string(payment.StatusSuccess),
				string(payment.StatusFailed), string(payment.StatusRefunded)),
			ToReturn: q.flag("to_return"),
		}
		return func(ctx context.Context, db store.DB, out *rowWriter) error {
			out.loc = w.loc
			if err := out.write(paymentHeader...); err != nil {
				return err
			}
			return store.EachExportPayment(ctx, db, f, h.opts.PageRows, func(p store.ExportPayment) error {
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
	return h.serve("refunds", ActionExportRefunds, func(q *query) (func(context.Context, store.DB, *rowWriter) error, error) {
		w := q.window()
		f := store.ExportRefundFilter{
			CreatedFrom: w.from, CreatedTo: w.to,
			PaymentID: q.id("payment_id"), CustomerID: q.id("customer_id"),
			Status: q.oneOf("status", store.RefundPending, store.RefundSucceeded, store.RefundFailed),
		}
		return func(ctx context.Context, db store.DB, out *rowWriter) error {
			out.loc = w.loc
			if err := out.write(refundHeader...); err != nil {
				return err
			}
			return store.EachExportRefund(ctx, db, f, h.opts.PageRows, func(r store.ExportRefund) error {
				return out.write(r.ID.String(), out.time(r.CreatedAt), out.time(r.UpdatedAt), r.Status, r.Destination,
					r.Amount.String(), r.Currency, r.PaymentID.String(), r.CustomerID.String(), optID(r.RequestedBy),
					r.GatewayRefundID, r.Reason, store.RefundError(r.Status, r.Error), r.Error)
			})
		}, q.err()
	}, "from", "to", "tz", "status", "payment_id", "customer_id")
}

// Invoices serves GET InvoicesPath: one row per invoice, or with lines=1
// one row per line, the invoice's columns repeated on each.
func (h *Handler) Invoices() http.Handler {
	return h.serve("invoices", ActionExportInvoices, func(q *query) (func(context.Context, store.DB, *rowWriter) error, error) {
		w := q.window()
		f := store.ExportInvoiceFilter{
			CreatedFrom: w.from, CreatedTo: w.to,
			CustomerID: q.id("customer_id"), OrderID: q.id("order_id"),
			Status: q.oneOf("status", "draft", "issued", "paid", "overdue", "cancelled"),
		}
		withLines := q.flag("lines")
		return func(ctx context.Context, db store.DB, out *rowWriter) error {
			out.loc = w.loc
			header := invoiceHeader
			if withLines {
				header = append(slices.Clip(invoiceHeader), invoiceLineHeader...)
			}
			if err := out.write(header...); err != nil {
				return err
			}
			// A credit line's amounts are negative: numbers, not text.
			out.amounts = map[int]bool{len(invoiceHeader) + 5: true, len(invoiceHeader) + 6: true}
			return store.EachExportInvoice(ctx, db, f, h.opts.PageRows, withLines, func(i store.ExportInvoice, lines []store.InvoiceLine) error {
				number := ""
				if i.Number != nil {
					number = *i.Number
				}
				cols := []string{i.ID.String(), number, out.time(i.CreatedAt), out.time(i.UpdatedAt), out.optTime(i.IssuedAt),
					out.optTime(i.DueAt), out.optTime(i.PaidAt), i.Status, i.Amount.String(), i.PaidAmount.String(), i.Currency,
					i.CustomerID.String(), optID(i.OrderID), i.Description}
				if !withLines {
					return out.write(cols...)
				}
				for _, l := range lines {
					if err := out.write(append(slices.Clip(cols), strconv.Itoa(int(l.Position)), l.Description,
						out.optTime(l.PeriodStart), out.optTime(l.PeriodEnd), strconv.Itoa(int(l.Quantity)),
						l.UnitAmount.String(), l.Amount.String())...); err != nil {
						return err
					}
				}
				return nil
			})
		}, q.err()
	}, "from", "to", "tz", "status", "customer_id", "order_id", "lines")
}

// The header rows: the columns of every row, in order.
var (
	paymentHeader = []string{"id", "created_at", "updated_at", "paid_at", "failed_at", "status", "method",
		"amount", "refunded_amount", "captured_amount", "currency", "customer_id", "order_id", "invoice_id",
		"gateway_interface_id", "gateway_payment_id", "gateway_tx_id", "failure_reason"}
	refundHeader = []string{"id", "created_at", "updated_at", "status", "destination", "amount", "currency",
		"payment_id", "customer_id", "requested_by", "gateway_refund_id", "reason", "error", "message"}
	invoiceHeader = []string{"id", "number", "created_at", "updated_at", "issued_at", "due_at", "paid_at", "status",
		"amount", "paid_amount", "currency", "customer_id", "order_id", "description"}
	// invoiceLineHeader follows invoiceHeader with lines=1.
	invoiceLineHeader = []string{"line", "line_description", "line_period_start", "line_period_end",
		"line_quantity", "line_unit_amount", "line_amount"}
)

// serve is one export: authorize, read the parameters (parse returns the
// writer of the rows, or the parameters' problems), take a slot, then
// stream, each chunk under the write timeout.
func (h *Handler) serve(name, action string, parse func(*query) (func(context.Context, store.DB, *rowWriter) error, error), known ...string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx := r.Context()
		if err := auth.CheckRoute(ctx, Access, Scope); err != nil {
			refuse(w, authStatus(err), connectMessage(err))
			return
		}
		p, _ := auth.FromContext(ctx) // CheckRoute found it
		// Every line of the request names the caller, as an RPC's do.
		logging.Add(ctx, observe.PrincipalAttrs(p)...)
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			refuse(w, http.StatusMethodNotAllowed, "use GET")
			return
		}
		params := r.URL.Query()
		rows, err := parse(newQuery(params, known...))
		if err != nil {
			refuse(w, http.StatusBadRequest, err.Error())
			return
		}
		out := &startWriter{w: w, rc: http.NewResponseController(w), timeout: h.opts.WriteTimeout,
			filename: fmt.Sprintf("%s-%s.csv", name, params.Get("from"))}
		if r.Method == http.MethodHead {
			// The headers a GET would send, without reading a row.
			_, _ = out.Write(nil)
			return
		}
		select {
		case h.slots <- struct{}{}:
			defer func() { <-h.slots }()
		default:
			h.log.WarnContext(ctx, "export refused: too many at once", "export", name, "max_concurrent", h.opts.MaxConcurrent)
			w.Header().Set("Retry-After", strconv.Itoa(RetryAfter))
			refuse(w, http.StatusTooManyRequests, fmt.Sprintf(
				"%d exports are running on this server, the most it streams at once; retry in %d seconds", h.opts.MaxConcurrent, RetryAfter))
			return
		}

		rw := newRowWriter(out, nil)
		// Every page from the database chosen now: an export that began on
		// the replica finishes there.
		err = rows(ctx, h.opts.Reads(), rw)
		if err == nil {
			// The audit row before the file's last bytes: a complete
			// download always has one.
			err = h.audit(ctx, p, action, name, params, rw.records-1, "complete")
		}
		if err == nil {
			err = rw.flush()
		}
		line := []any{"export", name, "rows", rw.records - 1, "bytes", out.written}
		switch {
		case err == nil:
			h.log.InfoContext(ctx, "export streamed", line...)
		case !out.started:
			// Nothing was sent: the database refused before the first row.
			h.log.WarnContext(ctx, "export failed before its first row", append(line, "err", err)...)
			if errors.Is(err, store.ErrPoolBusy) {
				refuse(w, http.StatusServiceUnavailable, "database busy, retry")
				return
			}
			refuse(w, http.StatusInternalServerError, "the export failed; retry")
		default:
			// The status is sent: cut the response off without its final
			// chunk, so the client sees a broken download, not a short file.
			// What it may have received is recorded all the same.
			if aerr := h.audit(context.WithoutCancel(ctx), p, action, name, params, rw.records-1, "cut_off"); aerr != nil {
				h.log.ErrorContext(ctx, "export's audit row not written", append(line, "err", aerr)...)
			}
			h.log.WarnContext(ctx, "export cut off", append(line, "err", err)...)
			panic(http.ErrAbortHandler)
		}
	})
}

// exportAudit is an export's audit row: the parameters as given (checked;
// no secret), the rows read and whether the client got the whole file.
type exportAudit struct {
	Params  map[string]string `json:"params"`
	Rows    int64             `json:"rows"`
	Outcome string            `json:"outcome"`
}

// audit writes the export's audit row, entity ("export", name), by p.
func (h *Handler) audit(ctx context.Context, p auth.Principal, action, name string, params url.Values, rows int64, outcome string) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	given := make(map[string]string, len(params))
	for k := range params {
		given[k] = params.Get(k)
	}
	return audit.Write(ctx, h.db, audit.Of(p), time.Time{}, action, "export", name, nil,
		exportAudit{Params: given, Rows: rows, Outcome: outcome})
}

// startWriter sends the CSV headers with the first bytes of the file, so
// that a failure before them can still answer with an error status, and
// gives each write to the client timeout: a client that does not take a
// chunk in time fails the write, and the export is cut off.
type startWriter struct {
	w        http.ResponseWriter
	rc       *http.ResponseController
	timeout  time.Duration
	filename string
	started  bool
	written  int64
}

func (s *startWriter) Write(b []byte) (int, error) {
	// The deadline covers this chunk and, after the last one, the end of
	// the response (net/http clears it before the connection's next
	// request).
	if err := s.rc.SetWriteDeadline(time.Now().Add(s.timeout)); err != nil {
		return 0, fmt.Errorf("export: no write deadline on this connection: %w", err)
	}
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
