package store

import (
	"context"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/rustbill/paymentd/internal/store/dbsqlc"
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

// GetServicePeriodByInvoiceForUpdate locks the period invoice id bills;
// ErrNotFound when it bills none (an invoice that is not a renewal).
func GetServicePeriodByInvoiceForUpdate(ctx context.Context, tx pgx.Tx, invoiceID uuid.UUID) (ServicePeriod, error) {
	p, err := dbsqlc.New(tx).GetServicePeriodByInvoiceForUpdate(ctx, &invoiceID)
	return p, MapError(err)
}

// LatestServicePeriod is the order's last period; ErrNotFound when it has
// none (one-time, or not active yet).
func LatestServicePeriod(ctx context.Context, db DB, orderID uuid.UUID) (ServicePeriod, error) {
	p, err := dbsqlc.New(db).LatestServicePeriod(ctx, orderID)
	return p, MapError(err)
}

// LatestPaidServicePeriod is the order's last paid period: its end is the
// paid end of the service.
func LatestPaidServicePeriod(ctx context.Context, db DB, orderID uuid.UUID) (ServicePeriod, error) {
	p, err := dbsqlc.New(db).LatestPaidServicePeriod(ctx, orderID)
	return p, MapError(err)
}

// ListServicePeriods is the order's periods, first first.
func ListServicePeriods(ctx context.Context, db DB, orderID uuid.UUID) ([]ServicePeriod, error) {
	ps, err := dbsqlc.New(db).ListServicePeriods(ctx, orderID)
	return ps, MapError(err)
}

// MarkServicePeriodPaid marks the unpaid period (order, seq) paid and ends
// the one before it renewed; ErrNotFound when it is not unpaid.
func MarkServicePeriodPaid(ctx context.Context, tx pgx.Tx, orderID uuid.UUID, seq int32, paidAt, at time.Time) (ServicePeriod, error) {
	r, err := dbsqlc.New(tx).MarkServicePeriodPaid(ctx, dbsqlc.MarkServicePeriodPaidParams{
		OrderID: orderID, Seq: seq, PaidAt: &paidAt, UpdatedAt: at,
	})
	return ServicePeriod(r), MapError(err)
}

// MarkServicePeriodFollowed records that the period's successor was issued.
func MarkServicePeriodFollowed(ctx context.Context, tx pgx.Tx, orderID uuid.UUID, seq int32, at time.Time) error {
	return MapError(dbsqlc.New(tx).MarkServicePeriodFollowed(ctx, dbsqlc.MarkServicePeriodFollowedParams{OrderID: orderID, Seq: seq, UpdatedAt: at}))
}

// CloseServicePeriods ends every period of the order that has not ended,
// with outcome (an unpaid one is cancelled and ends unpaid).
func CloseServicePeriods(ctx context.Context, tx pgx.Tx, orderID uuid.UUID, outcome string, at time.Time) ([]ServicePeriod, error) {
	ps, err := dbsqlc.New(tx).CloseServicePeriods(ctx, dbsqlc.CloseServicePeriodsParams{OrderID: orderID, Outcome: &outcome, UpdatedAt: at})
	return ps, MapError(err)
}

// ExtendServicePeriod moves the end of period (order, seq) to end, which
// becomes the anchor of the later periods.
func ExtendServicePeriod(ctx context.Context, tx pgx.Tx, orderID uuid.UUID, seq int32, end, at time.Time) (ServicePeriod, error) {
	p, err := dbsqlc.New(tx).ExtendServicePeriod(ctx, dbsqlc.ExtendServicePeriodParams{OrderID: orderID, Seq: seq, EndsAt: end, UpdatedAt: at})
	return p, MapError(err)
}

// SetInstanceExpiry sets the expiry of the order's live instance, if it
// has one.
func SetInstanceExpiry(ctx context.Context, tx pgx.Tx, orderID uuid.UUID, expires, at time.Time) error {
	return MapError(dbsqlc.New(tx).SetInstanceExpiry(ctx, dbsqlc.SetInstanceExpiryParams{OrderID: orderID, ExpiresAt: &expires, UpdatedAt: at}))
}

// ListRenewalsDue is the renewal scan: orders in one of the live statuses
// (order.LiveStatuses) whose last paid period ends by endsBefore and has
// no successor yet.
func ListRenewalsDue(ctx context.Context, db DB, endsBefore time.Time, live []string, limit int) ([]uuid.UUID, error) {
	ids, err := dbsqlc.New(db).ListRenewalsDue(ctx, dbsqlc.ListRenewalsDueParams{EndsBefore: endsBefore, LiveStatuses: live, MaxRows: int32(limit)})
	return ids, MapError(err)
}

// ListServicesEnding is the scan of services (orders in one of the live
// statuses) whose paid period has ended and that do not renew.
func ListServicesEnding(ctx context.Context, db DB, now time.Time, live []string, limit int) ([]uuid.UUID, error) {
	ids, err := dbsqlc.New(db).ListServicesEnding(ctx, dbsqlc.ListServicesEndingParams{Now: now, LiveStatuses: live, MaxRows: int32(limit)})
	return ids, MapError(err)
}

// ListUnpaidPeriodsDue is the scan of orders in one of statuses with an
// unpaid period due by dueBefore.
func ListUnpaidPeriodsDue(ctx context.Context, db DB, dueBefore time.Time, statuses []string, limit int) ([]uuid.UUID, error) {
	ids, err := dbsqlc.New(db).ListUnpaidPeriodsDue(ctx, dbsqlc.ListUnpaidPeriodsDueParams{DueBefore: dueBefore, Statuses: statuses, MaxRows: int32(limit)})
	return ids, MapError(err)
}

// SetOrderRenews turns the order's renewal on or off.
func SetOrderRenews(ctx context.Context, db DB, id uuid.UUID, renews bool, at time.Time) (Order, error) {
	o, err := dbsqlc.New(db).SetOrderRenews(ctx, dbsqlc.SetOrderRenewsParams{ID: id, Renews: renews, UpdatedAt: at})
	return o, MapError(err)
}

// ListUnpaidPeriodsCoveredByBalance is the scan of live orders with an
// unpaid renewal invoice due by dueBefore that the customer's balance now
// covers (balance.Covers, written set-wise in the query).
func ListUnpaidPeriodsCoveredByBalance(ctx context.Context, db DB, dueBefore time.Time, live []string, limit int) ([]uuid.UUID, error) {
	ids, err := dbsqlc.New(db).ListUnpaidPeriodsCoveredByBalance(ctx, dbsqlc.ListUnpaidPeriodsCoveredByBalanceParams{DueBefore: dueBefore, LiveStatuses: live, MaxRows: int32(limit)})
	return ids, MapError(err)
}

// SetOrderPaidUntil records the end of the order's last paid period.
func SetOrderPaidUntil(ctx context.Context, tx pgx.Tx, orderID uuid.UUID, until, at time.Time) error {
	return MapError(dbsqlc.New(tx).SetOrderPaidUntil(ctx, dbsqlc.SetOrderPaidUntilParams{ID: orderID, PaidUntil: &until, UpdatedAt: at}))
}

// SetPaidEnd records that the order's service is paid until until: its
// paid_until and its instance's expiry follow.
func SetPaidEnd(ctx context.Context, tx pgx.Tx, orderID uuid.UUID, until, at time.Time) error {
	if err := SetOrderPaidUntil(ctx, tx, orderID, until, at); err != nil {
		return err
	}
	return SetInstanceExpiry(ctx, tx, orderID, until, at)
}

// CancelUnpaidServicePeriod cancels the unpaid period invoiceID bills (its
// invoice was cancelled): the period before is the last again and the
// order stops renewing. ErrNotFound when the invoice bills no unpaid
// period.
func CancelUnpaidServicePeriod(ctx context.Context, tx pgx.Tx, invoiceID uuid.UUID, at time.Time) (ServicePeriod, error) {
	r, err := dbsqlc.New(tx).CancelUnpaidServicePeriod(ctx, dbsqlc.CancelUnpaidServicePeriodParams{InvoiceID: &invoiceID, UpdatedAt: at})
	return ServicePeriod(r), MapError(err)
}

// RenewalsDue is one currency's renewals falling due.
type RenewalsDue = dbsqlc.RenewalsDueByCurrencyRow

// UnpaidRenewal is an order with its unpaid renewal invoice.
type UnpaidRenewal = dbsqlc.ListUnpaidRenewalsRow

// RenewalsDueByCurrency is what renews, of the live orders, with a paid
// end in [now, until).
func RenewalsDueByCurrency(ctx context.Context, db DB, now, until time.Time, live []string) ([]RenewalsDue, error) {
	rows, err := dbsqlc.New(db).RenewalsDueByCurrency(ctx, dbsqlc.RenewalsDueByCurrencyParams{Now: &now, Until: &until, LiveStatuses: live})
	return rows, MapError(err)
}

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

// ListUnpaidPeriodsForNotices is the reminder scan: unpaid periods due by
// dueBefore of live orders, with their notices, a page of limit after the
// first skip.
func ListUnpaidPeriodsForNotices(ctx context.Context, db DB, dueBefore time.Time, live []string, limit, skip int) ([]PeriodNotices, error) {
	rows, err := dbsqlc.New(db).ListUnpaidPeriodsForNotices(ctx, dbsqlc.ListUnpaidPeriodsForNoticesParams{DueBefore: dueBefore, LiveStatuses: live, MaxRows: int32(limit), Skip: int32(skip)})
	return rows, MapError(err)
}

// AddServicePeriodNotices records notices as queued for period (order, seq).
func AddServicePeriodNotices(ctx context.Context, tx pgx.Tx, orderID uuid.UUID, seq int32, notices []string, at time.Time) error {
	return MapError(dbsqlc.New(tx).AddServicePeriodNotices(ctx, dbsqlc.AddServicePeriodNoticesParams{OrderID: orderID, Seq: seq, Notices: notices, UpdatedAt: at}))
}

// LockOpenRenewalInvoices locks the issued or overdue invoices billing the
// unpaid periods of order id, oldest period first: what an order that ends
// cancels (order.Transition). The caller holds the order's lock.
func LockOpenRenewalInvoices(ctx context.Context, tx pgx.Tx, orderID uuid.UUID) ([]Invoice, error) {
	rows, err := dbsqlc.New(tx).LockOpenRenewalInvoices(ctx, orderID)
	return rows, MapError(err)
}

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

// CountPartlyPaidPastTermination is ListPartlyPaidPastTermination's count.
func CountPartlyPaidPastTermination(ctx context.Context, db DB, dueBefore time.Time, live []string) (int64, error) {
	n, err := dbsqlc.New(db).CountPartlyPaidPastTermination(ctx, dbsqlc.CountPartlyPaidPastTerminationParams{DueBefore: dueBefore, LiveStatuses: live})
	return n, MapError(err)
}
