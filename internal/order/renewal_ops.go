package order

import (
	"context"
	"errors"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/rustbill/paymentd/internal/apperr"
	"github.com/rustbill/paymentd/internal/audit"
	"github.com/rustbill/paymentd/internal/auth"
	"github.com/rustbill/paymentd/internal/store"
	"github.com/rustbill/paymentd/internal/timerange"
)

// GetOrderPeriods reads an order and its service periods (first first).
// Customers may read only their own.
func (s *Service) GetOrderPeriods(ctx context.Context, id uuid.UUID) (store.Order, []store.ServicePeriod, error) {
	o, err := s.GetOrder(ctx, id)
	if err != nil {
		return store.Order{}, nil, err
	}
	ps, err := store.Q(s.db).ListServicePeriods(ctx, id)
	return o, ps, err
}

// lockOwnOrder locks order id in tx for p: a customer's own, any for an
// admin; another customer's is NotFound, as for reads.
func lockOwnOrder(ctx context.Context, tx pgx.Tx, p auth.Principal, id uuid.UUID) (store.Order, error) {
	o, err := store.Q(tx).GetOrderForUpdate(ctx, id)
	hidden := apperr.New(apperr.NotFound, "order %s not found", id)
	if err := auth.Owned(p, o.CustomerID, err, hidden, hidden); err != nil {
		return store.Order{}, err
	}
	return o, nil
}

// SetOrderRenewal turns a recurring order's renewal off (cancel at period
// end) or on again. The customer acts on their own orders, an admin on any.
// A one-time order, or one whose service has ended, is FailedPrecondition;
// so is turning renewal back on once the paid end has passed (on the
// billing clock), even before the billing run ends the order.
// Turning it off once the next period's invoice is issued leaves that
// invoice to be paid or to run its course; no later one is issued.
func (s *Service) SetOrderRenewal(ctx context.Context, id uuid.UUID, renews bool) (store.Order, error) {
	p, err := auth.Require(ctx)
	if err != nil {
		return store.Order{}, err
	}
	var out store.Order
	err = store.WithTx(ctx, s.db, func(tx pgx.Tx) error {
		o, err := lockOwnOrder(ctx, tx, p, id)
		if err != nil {
			return err
		}
		if !BillingCycle(o.BillingCycle).Recurring() {
			return apperr.New(apperr.FailedPrecondition, "order %s is one_time: it has no renewal to turn on or off", id)
		}
		if Status(o.Status).IsFinal() || Status(o.Status) == StatusCancelled {
			return apperr.New(apperr.FailedPrecondition, "order %s is %s: its service has ended", id, o.Status)
		}
		if renews && !o.Renews {
			if err := checkRenewsAgain(ctx, tx, o, s.billingNow()); err != nil {
				return err
			}
		}
		out, err = setRenews(ctx, tx, o, renews, audit.Of(p), s.now(), "")
		return err
	})
	if err != nil {
		return store.Order{}, err
	}
	s.log.InfoContext(ctx, "order renewal set", "order_id", id, "renews", renews, "principal", p.String())
	return out, nil
}

// ExtendServicePeriod moves the end of the order's last paid period to end
// (admin): goodwill or a correction, audited with the reason. Later periods
// count from the new end. The end may only move later, and not past the
// start of a period already issued after it.
func (s *Service) ExtendServicePeriod(ctx context.Context, id uuid.UUID, end time.Time, reason string) (store.Order, store.ServicePeriod, error) {
	p, err := auth.Require(ctx)
	if err != nil {
		return store.Order{}, store.ServicePeriod{}, err
	}
	end = store.Timestamp(end)
	// Against the billing clock, which renewals run on.
	if err := timerange.CheckAhead("ends_at", end, s.billingNow()); err != nil {
		return store.Order{}, store.ServicePeriod{}, err
	}
	var out store.Order
	var period store.ServicePeriod
	err = store.WithTx(ctx, s.db, func(tx pgx.Tx) error {
		o, err := lockOwnOrder(ctx, tx, p, id)
		if err != nil {
			return err
		}
		if !Status(o.Status).Live() {
			return apperr.New(apperr.FailedPrecondition, "order %s is %s; only a running service can be extended", id, o.Status)
		}
		// The last served period: a period after it whose invoice was
		// cancelled bills nothing (reissued from the new end if renewal is
		// turned back on).
		last, err := LastServedPeriod(ctx, tx, id)
		if errors.Is(err, store.ErrNotFound) {
			return apperr.New(apperr.FailedPrecondition, "order %s has no service periods (one_time)", id)
		}
		if err != nil {
			return err
		}
		if last.Status != store.PeriodPaid {
			return apperr.New(apperr.FailedPrecondition,
				"order %s's next period is already invoiced (period %d, unpaid): its invoice must be paid or cancelled first", id, last.Seq)
		}
		if !end.After(last.EndsAt) {
			return apperr.New(apperr.InvalidArgument, "ends_at %s is not after the period's end %s", end.Format(time.RFC3339), last.EndsAt.Format(time.RFC3339))
		}
		now := s.now()
		if period, err = extendPeriod(ctx, tx, id, last.Seq, end, now); err != nil {
			return err
		}
		if out, err = store.Q(tx).GetOrder(ctx, id); err != nil {
			return err
		}
		after := orderSnapshot(out)
		after.Note = reason
		return audit.Write(ctx, tx, audit.Of(p), now, ActionOrderExtend, entityOrder, id.String(), orderSnapshot(o), after)
	})
	if err != nil {
		return store.Order{}, store.ServicePeriod{}, err
	}
	s.log.InfoContext(ctx, "service period extended", "order_id", id, "ends_at", end, "principal", p.String())
	return out, period, nil
}

// SuspendOrder suspends an active order by hand (admin), with the reason in
// the audit log; the provider suspends the service (service_suspended).
// Paying a renewal invoice does not resume it: only ResumeOrder does.
func (s *Service) SuspendOrder(ctx context.Context, id uuid.UUID, reason string) (store.Order, error) {
	return s.manualMove(ctx, id, StatusActive, Move{To: StatusSuspended, SuspendReason: SuspendReasonAdmin, Note: reason})
}

// ResumeOrder resumes a suspended order by hand (admin), with the reason in
// the audit log; the provider resumes the service (service_resumed). An
// order suspended for an unpaid renewal invoice is refused
// (FailedPrecondition): the billing run would suspend it again; paying
// the invoice resumes it.
func (s *Service) ResumeOrder(ctx context.Context, id uuid.UUID, reason string) (store.Order, error) {
	return s.manualMove(ctx, id, StatusSuspended, Move{To: StatusActive, Note: reason})
}

func (s *Service) manualMove(ctx context.Context, id uuid.UUID, from Status, m Move) (store.Order, error) {
	p, err := auth.Require(ctx)
	if err != nil {
		return store.Order{}, err
	}
	var out store.Order
	err = store.WithTx(ctx, s.db, func(tx pgx.Tx) error {
		o, err := lockOwnOrder(ctx, tx, p, id)
		if err != nil {
			return err
		}
		if Status(o.Status) != from {
			return apperr.New(apperr.FailedPrecondition, "order %s is %s; it must be %s to become %s", id, o.Status, from, m.To)
		}
		if m.To == StatusActive && o.SuspendReason == SuspendReasonOverdue {
			last, err := store.Q(tx).LatestServicePeriod(ctx, id)
			if err == nil && last.Status == store.PeriodUnpaid {
				return apperr.New(apperr.FailedPrecondition,
					"order %s is suspended for its unpaid renewal invoice, and the billing run would suspend it again: paying the invoice resumes it (cancelling the invoice ends the service at its paid end)", id)
			}
		}
		m.By, m.At = audit.Of(p), s.now()
		moved, err := Transition(ctx, tx, o, m)
		out = moved.Order
		return err
	})
	if err != nil {
		return store.Order{}, err
	}
	s.log.InfoContext(ctx, "order "+string(m.To)+" by hand", "order_id", id, "reason", m.Note, "principal", p.String())
	return out, nil
}

// RenewalOverview is GetRenewalOverview's answer.
type RenewalOverview struct {
	Due                          []store.RenewalsDue
	Overdue, Suspended           []store.UnpaidRenewal
	OverdueCount, SuspendedCount int64
	// PartlyPaidPastTermination are the live orders whose renewal invoice
	// is partly paid and past the termination day: the billing run does not
	// end them (cancelling the invoice would strand the money), an admin
	// decides.
	PartlyPaidPastTermination      []store.UnpaidRenewal
	PartlyPaidPastTerminationCount int64
	// CardCharges are the saved-card charges of the invoices listed, by
	// invoice, first first (issue 39, 1).
	CardCharges map[uuid.UUID][]store.SavedChargeAttempt
}

// overviewRows is how many orders each list of the overview shows.
const overviewRows = 100

// RenewalOverview is the renewal cycle as of now (admin): what renews with
// a paid end in the next window, the active orders with a renewal invoice
// past due, the orders suspended for non-payment, and, when the billing
// run ends services (terminateAfter > 0), the partly paid renewal invoices
// past that day that it leaves for an admin.
func (s *Service) RenewalOverview(ctx context.Context, now time.Time, window, terminateAfter time.Duration) (RenewalOverview, error) {
	if _, err := auth.RequireAdmin(ctx); err != nil {
		return RenewalOverview{}, err
	}
	var out RenewalOverview
	var err error
	if out.Due, err = store.Q(s.db).RenewalsDueByCurrency(ctx, store.RenewalsDueByCurrencyParams{
		Now: now, Until: now.Add(window), LiveStatuses: LiveStatuses(),
	}); err != nil {
		return RenewalOverview{}, err
	}
	if out.Overdue, out.OverdueCount, err = store.ListUnpaidRenewals(ctx, s.db, now, string(StatusActive), "", overviewRows); err != nil {
		return RenewalOverview{}, err
	}
	if out.Suspended, out.SuspendedCount, err = store.ListUnpaidRenewals(ctx, s.db, now, string(StatusSuspended), SuspendReasonOverdue, overviewRows); err != nil {
		return RenewalOverview{}, err
	}
	if terminateAfter > 0 {
		if out.PartlyPaidPastTermination, out.PartlyPaidPastTerminationCount, err = store.ListPartlyPaidPastTermination(ctx, s.db, now.Add(-terminateAfter), LiveStatuses(), overviewRows); err != nil {
			return RenewalOverview{}, err
		}
	}
	var ids []uuid.UUID
	for _, list := range [][]store.UnpaidRenewal{out.Overdue, out.Suspended, out.PartlyPaidPastTermination} {
		for _, r := range list {
			ids = append(ids, r.InvoiceID)
		}
	}
	if len(ids) == 0 {
		return out, nil
	}
	attempts, err := store.Q(s.db).ListSavedChargeAttemptsOf(ctx, ids)
	if err != nil {
		return RenewalOverview{}, err
	}
	out.CardCharges = map[uuid.UUID][]store.SavedChargeAttempt{}
	for _, a := range attempts {
		out.CardCharges[a.InvoiceID] = append(out.CardCharges[a.InvoiceID], a)
	}
	return out, nil
}
