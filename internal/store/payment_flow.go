package store

import (
	"context"
	"errors"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/rustbill/paymentd/internal/money"
	"github.com/rustbill/paymentd/internal/store/dbsqlc"
)

// NewGatewayPayment is a pending gateway payment to record once the gateway
// plugin has created its side of it.
type NewGatewayPayment struct {
	// ID is the id the plugin was given (the gateway's order number).
	ID                 uuid.UUID
	OrderID            *uuid.UUID
	InvoiceID          *uuid.UUID
	CustomerID         uuid.UUID
	GatewayInterfaceID uuid.UUID
	Amount             money.Amount
	Currency           string
	PaymentURL         string
	QRCode             string
	Instructions       string
	ReturnURL          string
	NextReconcileAt    time.Time
	CreatedAt          time.Time
}

// InsertGatewayPayment records a pending gateway payment. A second pending
// payment for the same (order, invoice, interface) fails with ErrConflict on
// constraint payments_one_pending_key.
func InsertGatewayPayment(ctx context.Context, db DB, p NewGatewayPayment) (Payment, error) {
	row, err := dbsqlc.New(db).InsertGatewayPayment(ctx, dbsqlc.InsertGatewayPaymentParams{
		ID:                 p.ID,
		OrderID:            p.OrderID,
		InvoiceID:          p.InvoiceID,
		CustomerID:         p.CustomerID,
		GatewayInterfaceID: &p.GatewayInterfaceID,
		Amount:             p.Amount,
		Currency:           p.Currency,
		PaymentUrl:         p.PaymentURL,
		QrCode:             p.QRCode,
		Instructions:       p.Instructions,
		ReturnUrl:          p.ReturnURL,
		NextReconcileAt:    &p.NextReconcileAt,
		CreatedAt:          p.CreatedAt,
	})
	return row, MapError(err)
}

// GetPendingGatewayPayment returns the pending payment of (order, invoice,
// interface); nil order or invoice match NULL. ErrNotFound when there is none.
func GetPendingGatewayPayment(ctx context.Context, db DB, orderID, invoiceID *uuid.UUID, interfaceID uuid.UUID) (Payment, error) {
	row, err := dbsqlc.New(db).GetPendingGatewayPayment(ctx, dbsqlc.GetPendingGatewayPaymentParams{
		OrderID: orderID, InvoiceID: invoiceID, GatewayInterfaceID: &interfaceID,
	})
	return row, MapError(err)
}

// GetPaymentForUpdate reads one payment and locks its row until db's
// transaction ends; ErrNotFound when there is none.
func GetPaymentForUpdate(ctx context.Context, db DB, id uuid.UUID) (Payment, error) {
	row, err := dbsqlc.New(db).GetPaymentForUpdate(ctx, id)
	return row, MapError(err)
}

// PaymentSuccess is what a settled payment records.
type PaymentSuccess struct {
	GatewayPaymentID string
	GatewayTxID      string
	PaidAt           time.Time
	At               time.Time
}

// MarkPaymentSucceeded moves a payment pending → success. ErrNotFound when
// it is no longer pending (the optimistic lock); ErrConflict on
// payments_gateway_payment_id_key when another payment of the interface
// carries the gateway payment id.
func MarkPaymentSucceeded(ctx context.Context, db DB, id uuid.UUID, s PaymentSuccess) (Payment, error) {
	return MarkPaymentSucceededLater(ctx, db, id, s).Get(ctx)
}

// MarkPaymentSucceededLater is MarkPaymentSucceeded waiting, in a pipelined
// transaction, to go with the next statement: the settlement sends it with
// the order's move (WithPipelinedTx).
func MarkPaymentSucceededLater(ctx context.Context, db DB, id uuid.UUID, s PaymentSuccess) *Later[Payment] {
	return laterRow(ctx, db, func(q *dbsqlc.Queries) (Payment, error) {
		return q.MarkPaymentSucceeded(ctx, dbsqlc.MarkPaymentSucceededParams{
			ID: id, GatewayPaymentID: s.GatewayPaymentID, GatewayTxID: s.GatewayTxID,
			PaidAt: &s.PaidAt, UpdatedAt: s.At,
		})
	})
}

// PendingOf selects the pending payments FailPendingPayments fails: the
// payment ID, or those of OrderID, or those of InvoiceID (at least one set;
// several narrow the choice). OrderOnly leaves out the payments of the
// order's invoices.
type PendingOf struct {
	ID, OrderID, InvoiceID *uuid.UUID
	OrderOnly              bool
}

func pendingParams(of PendingOf, reason string, at time.Time) dbsqlc.FailPendingPaymentsParams {
	return dbsqlc.FailPendingPaymentsParams{
		ID: of.ID, OrderID: of.OrderID, InvoiceID: of.InvoiceID, OrderOnly: of.OrderOnly,
		FailureReason: reason, UpdatedAt: at,
	}
}

// FailPendingPayments is the one pending → failed rule: it fails the
// pending payments of with reason and returns them. Call it with the row
// they belong to locked.
func FailPendingPayments(ctx context.Context, db DB, of PendingOf, reason string, at time.Time) ([]Payment, error) {
	if of.ID == nil && of.OrderID == nil && of.InvoiceID == nil {
		return nil, errors.New("store: FailPendingPayments needs a payment, an order or an invoice")
	}
	rows, err := dbsqlc.New(db).FailPendingPayments(ctx, pendingParams(of, reason, at))
	return rows, MapError(err)
}

// MarkPaymentFailed moves one payment pending → failed with reason
// (FailPendingPayments). ErrNotFound when it is no longer pending.
func MarkPaymentFailed(ctx context.Context, db DB, id uuid.UUID, reason string, at time.Time) (Payment, error) {
	rows, err := FailPendingPayments(ctx, db, PendingOf{ID: &id}, reason, at)
	if err != nil {
		return Payment{}, err
	}
	if len(rows) == 0 {
		return Payment{}, ErrNotFound
	}
	return rows[0], nil
}

// Capture is money a gateway captured for a payment that can no longer
// apply.
type Capture struct {
	GatewayPaymentID string
	GatewayTxID      string
	// FailureReason is recorded when the payment was still pending.
	FailureReason string
	// CapturedAt is when the gateway took the money.
	CapturedAt time.Time
	At         time.Time
}

// CapturePayment records captured money on a pending or failed payment,
// which is failed afterwards. ErrNotFound when it is neither or its money
// is already captured; ErrConflict on payments_gateway_payment_id_key.
func CapturePayment(ctx context.Context, db DB, id uuid.UUID, c Capture) (Payment, error) {
	row, err := dbsqlc.New(db).CapturePayment(ctx, dbsqlc.CapturePaymentParams{
		ID: id, FailureReason: c.FailureReason, UpdatedAt: c.At, CapturedAt: &c.CapturedAt,
		GatewayPaymentID: c.GatewayPaymentID, GatewayTxID: c.GatewayTxID,
	})
	return row, MapError(err)
}

// PaymentWithGatewayID returns another payment of the interface (not
// exceptID) that carries gatewayPaymentID; ErrNotFound when there is none.
func PaymentWithGatewayID(ctx context.Context, db DB, interfaceID uuid.UUID, gatewayPaymentID string, exceptID uuid.UUID) (uuid.UUID, error) {
	id, err := dbsqlc.New(db).PaymentWithGatewayID(ctx, dbsqlc.PaymentWithGatewayIDParams{
		GatewayInterfaceID: &interfaceID, GatewayPaymentID: gatewayPaymentID, ID: exceptID,
	})
	return id, MapError(err)
}

// ReconcileClaim is how many due payments to claim and how to reschedule
// them.
type ReconcileClaim struct {
	Now         time.Time
	BatchSize   int32
	BaseBackoff time.Duration
	// MaxBackoff caps the wait between two checks of a pending payment,
	// LateMaxBackoff of a failed one.
	MaxBackoff     time.Duration
	LateMaxBackoff time.Duration
	// LateCapture is how long after it failed a gateway payment is still
	// asked about ([payments].late_capture_days; 0: never).
	LateCapture time.Duration
}

// ClaimDuePayments claims up to c.BatchSize gateway payments due at c.Now
// (pending ones, and failed ones within c.LateCapture of their failure),
// skipping rows another transaction holds, and reschedules them in the
// same statement (attempts + 1, next at Now + min(BaseBackoff ·
// 2^attempts, MaxBackoff or LateMaxBackoff), a failed one's at most at the
// end of its window). Due payments there is nothing more to ask about are
// unscheduled first. Run it in its own short transaction.
func ClaimDuePayments(ctx context.Context, db DB, c ReconcileClaim) ([]Payment, error) {
	q := dbsqlc.New(db)
	if _, err := q.ExpireReconciliations(ctx, dbsqlc.ExpireReconciliationsParams{Now: c.Now, LateCapture: c.LateCapture}); err != nil {
		return nil, MapError(err)
	}
	rows, err := q.ClaimDuePayments(ctx, dbsqlc.ClaimDuePaymentsParams{
		Now: c.Now, BatchSize: c.BatchSize, BaseBackoff: c.BaseBackoff, MaxBackoff: c.MaxBackoff,
		LateMaxBackoff: max(c.LateMaxBackoff, c.MaxBackoff), LateCapture: c.LateCapture,
	})
	return rows, MapError(err)
}

// PaymentAuditExists reports whether the payment has an audit row of action
// whose after->>'fingerprint' is fingerprint.
func PaymentAuditExists(ctx context.Context, db DB, paymentID uuid.UUID, action, fingerprint string) (bool, error) {
	ok, err := dbsqlc.New(db).PaymentAuditExists(ctx, dbsqlc.PaymentAuditExistsParams{
		PaymentID: paymentID.String(), Action: action, Fingerprint: fingerprint,
	})
	return ok, MapError(err)
}

// SettlementRows are the rows a settlement decides on, locked.
type SettlementRows struct {
	// Order and Invoice are the payment's, nil when it has none.
	Order   *Order
	Invoice *Invoice
	// InvoiceOrder is the invoice's order when the payment names no order
	// itself (nil otherwise): whether the invoice can still be paid
	// depends on it too.
	InvoiceOrder *Order
	Payment      Payment
	// GatewayIDTakenBy is the other payment of interfaceID that already
	// carries the reported gateway payment id (PaymentWithGatewayID), nil
	// when none does or the id is empty.
	GatewayIDTakenBy *uuid.UUID
}

// LockForSettlement locks, in one round trip, a payment's order (or, for a
// payment of an invoice alone, the invoice's order, which paying the
// invoice may renew), then its invoice, then the payment (the lock order of every writer of these rows:
// customer → order → invoice → payment), and looks whether another payment
// of interfaceID carries gatewayPaymentID. ErrNotFound when the payment
// does not exist.
func LockForSettlement(ctx context.Context, tx pgx.Tx, paymentID, interfaceID uuid.UUID, gatewayPaymentID string) (SettlementRows, error) {
	var out SettlementRows
	var ord, invOrd Order
	var inv Invoice
	var ordErr, invOrdErr, invErr, payErr, takenErr error
	var taken uuid.UUID
	err := inOneBatch(ctx, tx, func(q *dbsqlc.Queries) {
		ord, ordErr = q.GetOrderOfPaymentForUpdate(ctx, paymentID)
		invOrd, invOrdErr = q.LockOrderOfInvoiceOfPayment(ctx, paymentID)
		inv, invErr = q.GetInvoiceOfPaymentForUpdate(ctx, paymentID)
		out.Payment, payErr = q.GetPaymentForUpdate(ctx, paymentID)
		taken, takenErr = q.PaymentWithGatewayID(ctx, dbsqlc.PaymentWithGatewayIDParams{
			GatewayInterfaceID: &interfaceID, GatewayPaymentID: gatewayPaymentID, ID: paymentID,
		})
	})
	for _, err := range []error{ordErr, invOrdErr, invErr, payErr, takenErr, err} {
		if err != nil && !errors.Is(err, pgx.ErrNoRows) {
			return SettlementRows{}, MapError(err)
		}
	}
	if payErr != nil {
		return SettlementRows{}, MapError(payErr) // ErrNotFound
	}
	if ordErr == nil {
		out.Order = &ord
	}
	if invErr == nil {
		out.Invoice = &inv
	}
	if invOrdErr == nil {
		out.InvoiceOrder = &invOrd
	}
	if takenErr == nil {
		out.GatewayIDTakenBy = &taken
	}
	return out, nil
}
