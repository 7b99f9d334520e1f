package store

import (
	"context"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/rustbill/paymentd/internal/store/dbsqlc"
)

// The parameters of the queries run through Q.
type (
	AddServicePeriodNoticesParams           = dbsqlc.AddServicePeriodNoticesParams
	CloseServicePeriodsParams               = dbsqlc.CloseServicePeriodsParams
	CountPartlyPaidPastTerminationParams    = dbsqlc.CountPartlyPaidPastTerminationParams
	ExtendServicePeriodParams               = dbsqlc.ExtendServicePeriodParams
	ListRenewalsDueParams                   = dbsqlc.ListRenewalsDueParams
	ListServicesEndingParams                = dbsqlc.ListServicesEndingParams
	ListUnpaidPeriodsCoveredByBalanceParams = dbsqlc.ListUnpaidPeriodsCoveredByBalanceParams
	ListUnpaidPeriodsDueParams              = dbsqlc.ListUnpaidPeriodsDueParams
	ListUnpaidPeriodsForNoticesParams       = dbsqlc.ListUnpaidPeriodsForNoticesParams
	RenewalsDueByCurrencyParams             = dbsqlc.RenewalsDueByCurrencyParams
	SetInstanceExpiryParams                 = dbsqlc.SetInstanceExpiryParams
	SetOrderPaidUntilParams                 = dbsqlc.SetOrderPaidUntilParams
	SetOrderRenewsParams                    = dbsqlc.SetOrderRenewsParams
)

// ServicePeriod is a service_periods row.
type ServicePeriod = dbsqlc.ServicePeriod

// The service period statuses and outcomes (service_periods.status,
// outcome).
const (
	PeriodUnpaid    = "unpaid"
	PeriodPaid      = "paid"
	PeriodCancelled = "cancelled"

	OutcomeRenewed  = "renewed"
	OutcomeEnded    = "ended"
	OutcomeUnpaid   = "unpaid"
	OutcomeRefunded = "refunded"
)

// NewServicePeriod is what InsertServicePeriod writes.
type NewServicePeriod struct {
	OrderID          uuid.UUID
	Seq              int32
	StartsAt, EndsAt time.Time
	AnchorAt         time.Time
	AnchorMonths     int32
	InvoiceID        *uuid.UUID
	// PaidAt set makes the period paid (the first, paid by the order).
	PaidAt    *time.Time
	CreatedAt time.Time
}

// InsertServicePeriod writes a new period; a second row for the same
// (order, seq), start or invoice is ErrConflict.
func InsertServicePeriod(ctx context.Context, db DB, p NewServicePeriod) (ServicePeriod, error) {
	status := PeriodUnpaid
	if p.PaidAt != nil {
		status = PeriodPaid
	}
	row, err := dbsqlc.New(db).InsertServicePeriod(ctx, dbsqlc.InsertServicePeriodParams{
		OrderID: p.OrderID, Seq: p.Seq, StartsAt: p.StartsAt, EndsAt: p.EndsAt, AnchorAt: p.AnchorAt,
		AnchorMonths: p.AnchorMonths, InvoiceID: p.InvoiceID, Status: status, PaidAt: p.PaidAt, CreatedAt: p.CreatedAt,
	})
	return row, MapError(err)
}

// InsertRenewalPeriods writes the unpaid periods ps, each billed by its
// invoice (InvoiceID set, PaidAt nil), in one statement; a second row for a
// period is ErrConflict, for all of them.
func InsertRenewalPeriods(ctx context.Context, tx pgx.Tx, created time.Time, ps []NewServicePeriod) error {
	arg := dbsqlc.InsertRenewalPeriodsParams{CreatedAt: created}
	for _, p := range ps {
		if p.InvoiceID == nil || p.PaidAt != nil {
			return fmt.Errorf("store: renewal period %s/%d is not unpaid with an invoice", p.OrderID, p.Seq)
		}
		arg.OrderIds = append(arg.OrderIds, p.OrderID)
		arg.Seqs = append(arg.Seqs, p.Seq)
		arg.StartsAts = append(arg.StartsAts, p.StartsAt)
		arg.EndsAts = append(arg.EndsAts, p.EndsAt)
		arg.AnchorAts = append(arg.AnchorAts, p.AnchorAt)
		arg.AnchorMonths = append(arg.AnchorMonths, p.AnchorMonths)
		arg.InvoiceIds = append(arg.InvoiceIds, *p.InvoiceID)
	}
	return MapError(dbsqlc.New(tx).InsertRenewalPeriods(ctx, arg))
}

// MarkServicePeriodsFollowed records that the periods ps (order and seq)
// have their successors issued; it goes with the next statement that
// answers, on a pipelined transaction.
func MarkServicePeriodsFollowed(ctx context.Context, tx pgx.Tx, at time.Time, ps []ServicePeriod) error {
	arg := dbsqlc.MarkServicePeriodsFollowedParams{UpdatedAt: at}
	for _, p := range ps {
		arg.OrderIds = append(arg.OrderIds, p.OrderID)
		arg.Seqs = append(arg.Seqs, p.Seq)
	}
	return MapError(dbsqlc.New(later(tx)).MarkServicePeriodsFollowed(ctx, arg))
}

// ReissueServicePeriod bills the cancelled period (p.OrderID, p.Seq) again
// in its own row, as p says (a new invoice; PaidAt set makes it paid, a
// free one): renewal was turned back on after its invoice was cancelled.
// ErrNotFound when that period is not cancelled.
func ReissueServicePeriod(ctx context.Context, tx pgx.Tx, p NewServicePeriod) (ServicePeriod, error) {
	status := PeriodUnpaid
	if p.PaidAt != nil {
		status = PeriodPaid
	}
	r, err := dbsqlc.New(tx).ReissueServicePeriod(ctx, dbsqlc.ReissueServicePeriodParams{
		OrderID: p.OrderID, Seq: p.Seq, StartsAt: p.StartsAt, EndsAt: p.EndsAt, AnchorAt: p.AnchorAt,
		AnchorMonths: p.AnchorMonths, InvoiceID: p.InvoiceID, Status: status, PaidAt: p.PaidAt, UpdatedAt: p.CreatedAt,
	})
	return ServicePeriod(r), MapError(err)
}

// MarkServicePeriodPaid marks the unpaid period (order, seq) paid and ends
// the one before it renewed; ErrNotFound when it is not unpaid.
func MarkServicePeriodPaid(ctx context.Context, tx pgx.Tx, orderID uuid.UUID, seq int32, paidAt, at time.Time) (ServicePeriod, error) {
	r, err := dbsqlc.New(tx).MarkServicePeriodPaid(ctx, dbsqlc.MarkServicePeriodPaidParams{
		OrderID: orderID, Seq: seq, PaidAt: &paidAt, UpdatedAt: at,
	})
	return ServicePeriod(r), MapError(err)
}

// SetPaidEnd records that the order's service is paid until until: its
// paid_until and its instance's expiry follow.
func SetPaidEnd(ctx context.Context, tx pgx.Tx, orderID uuid.UUID, until, at time.Time) error {
	_, err := SetPaidEndOf(ctx, tx, orderID, until, at)
	return err
}

// SetPaidEndOf is SetPaidEnd answering the order as the update left it
// (locked by it). ErrNotFound when there is no such order.
func SetPaidEndOf(ctx context.Context, tx pgx.Tx, orderID uuid.UUID, until, at time.Time) (Order, error) {
	q := Q(tx)
	o, err := q.SetOrderPaidUntil(ctx, dbsqlc.SetOrderPaidUntilParams{
		ID: orderID, PaidUntil: &until, UpdatedAt: at,
	})
	if err != nil {
		return Order{}, err
	}
	return o, q.SetInstanceExpiry(ctx, dbsqlc.SetInstanceExpiryParams{OrderID: orderID, ExpiresAt: &until, UpdatedAt: at})
}

// CancelUnpaidServicePeriod cancels the unpaid period invoiceID bills (its
// invoice was cancelled): the period before is the last again (the order's
// renewal is turned off by its caller, internal/order's periods.go).
// ErrNotFound when the invoice bills no unpaid period.
func CancelUnpaidServicePeriod(ctx context.Context, tx pgx.Tx, invoiceID uuid.UUID, at time.Time) (ServicePeriod, error) {
	r, err := dbsqlc.New(tx).CancelUnpaidServicePeriod(ctx, dbsqlc.CancelUnpaidServicePeriodParams{InvoiceID: &invoiceID, UpdatedAt: at})
	return ServicePeriod(r), MapError(err)
}

// RenewalsDue is one currency's renewals falling due.
type RenewalsDue = dbsqlc.RenewalsDueByCurrencyRow

// UnpaidRenewal is an order with its unpaid renewal invoice.
type UnpaidRenewal = dbsqlc.ListUnpaidRenewalsRow

// ListUnpaidRenewals lists up to limit orders in status (with
// suspendReason: "" unless suspended) whose renewal invoice was due before
// now, oldest due first, and counts them all.
func ListUnpaidRenewals(ctx context.Context, db DB, now time.Time, status, suspendReason string, limit int) ([]UnpaidRenewal, int64, error) {
	q := dbsqlc.New(db)
	rows, err := q.ListUnpaidRenewals(ctx, dbsqlc.ListUnpaidRenewalsParams{Now: now, Status: status, SuspendReason: suspendReason, MaxRows: int32(limit)})
	if err != nil {
		return nil, 0, MapError(err)
	}
	n, err := q.CountUnpaidRenewals(ctx, dbsqlc.CountUnpaidRenewalsParams{Now: now, Status: status, SuspendReason: suspendReason})
	return rows, n, MapError(err)
}

// PeriodNotices is an unpaid period with the notices queued about it.
type PeriodNotices = dbsqlc.ListUnpaidPeriodsForNoticesRow

// ListPartlyPaidPastTermination lists up to limit live orders whose
// renewal invoice is partly paid and due by dueBefore (now less the
// termination days), the oldest due first, and how many there are: the
// billing run leaves them for an admin.
func ListPartlyPaidPastTermination(ctx context.Context, db DB, dueBefore time.Time, live []string, limit int) ([]UnpaidRenewal, int64, error) {
	q := dbsqlc.New(db)
	rows, err := q.ListPartlyPaidPastTermination(ctx, dbsqlc.ListPartlyPaidPastTerminationParams{DueBefore: dueBefore, LiveStatuses: live, MaxRows: int32(limit)})
	if err != nil {
		return nil, 0, MapError(err)
	}
	out := make([]UnpaidRenewal, len(rows))
	for i, r := range rows {
		out[i] = UnpaidRenewal(r)
	}
	n, err := q.CountPartlyPaidPastTermination(ctx, dbsqlc.CountPartlyPaidPastTerminationParams{DueBefore: dueBefore, LiveStatuses: live})
	return out, n, MapError(err)
}

// RenewalFacts are what the billing run reads of a batch of orders, locked
// by the caller, before it renews them: each order's pending plan change
// and its latest period (absent: none).
type RenewalFacts struct {
	Pending map[uuid.UUID]PlanChange
	Latest  map[uuid.UUID]ServicePeriod
}

// ReadRenewalFacts reads the RenewalFacts of the orders given in one round
// trip (PendingPlanChanges, LatestServicePeriods).
func ReadRenewalFacts(ctx context.Context, tx pgx.Tx, orderIDs []uuid.UUID) (RenewalFacts, error) {
	var pending []PlanChange
	var latest []ServicePeriod
	var pErr, lErr error
	err := inOneBatch(ctx, tx, func(q *dbsqlc.Queries) {
		pending, pErr = q.PendingPlanChanges(ctx, orderIDs)
		latest, lErr = q.LatestServicePeriods(ctx, orderIDs)
	})
	if err := firstError(pErr, lErr, err); err != nil {
		return RenewalFacts{}, MapError(err)
	}
	return RenewalFacts{
		Pending: ByKey(pending, func(ch PlanChange) uuid.UUID { return ch.OrderID }),
		Latest:  ByKey(latest, func(p ServicePeriod) uuid.UUID { return p.OrderID }),
	}, nil
}
