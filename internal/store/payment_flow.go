package store

import (
	"context"
	"errors"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/rustbill/paymentd/internal/store/dbsqlc"
)

// The parameters of the queries run through Q.
type (
	CapturePaymentParams           = dbsqlc.CapturePaymentParams
	GetPendingGatewayPaymentParams = dbsqlc.GetPendingGatewayPaymentParams
	InsertGatewayPaymentParams     = dbsqlc.InsertGatewayPaymentParams
	PaymentWithGatewayIDParams     = dbsqlc.PaymentWithGatewayIDParams
)

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
