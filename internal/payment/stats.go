package payment

import (
	"context"
	"slices"
	"strings"
	"time"

	"github.com/rustbill/paymentd/internal/apperr"
	"github.com/rustbill/paymentd/internal/auth"
	"github.com/rustbill/paymentd/internal/store"
)

// MaxStatsWindow is how far back GetPaymentStats may look: a longer window
// reads more of the payments table than a dashboard should ask for.
const MaxStatsWindow = 366 * 24 * time.Hour

// Stats are the figures of the admin console's dashboard: the payments
// created in a window, and those pending now.
type Stats struct {
	// Since is the start of the window; AsOf when the figures were taken.
	Since, AsOf time.Time
	// The payments created in the window, and of them by status now.
	Total, Pending, Success, Failed, Refunded int64
	// SuccessRate is (Success+Refunded) / (Success+Refunded+Failed): a
	// refunded payment succeeded before the money went back. HasRate is
	// false while no payment of the window is decided.
	SuccessRate float64
	HasRate     bool
	// PendingNow counts every pending payment, whenever created.
	PendingNow int64
	// Succeeded sums the window's succeeded payments (success or
	// refunded) per currency, by currency code.
	Succeeded []CurrencyTotal
	// RefundsPending counts every refund pending now, whenever made: the
	// gateway completes it later (a bank transfer sent back by hand) or its
	// outcome is unknown, and an admin records what happened
	// (ResolveRefund). OldestPendingRefund is when the oldest of them was
	// requested; nil when none is pending.
	RefundsPending      int64
	OldestPendingRefund *time.Time
	// ToReturn is the captured money not returned yet, per currency, by
	// code, whenever it was captured: failed payments whose gateway took
	// the money after all (RefundPayment returns it).
	ToReturn []store.ToReturn
}

// CurrencyTotal is what the succeeded payments of one currency add up to,
// in cents (a sum may exceed NUMERIC(12,2)).
type CurrencyTotal struct {
	Currency      string
	Payments      int64
	AmountCents   int64
	RefundedCents int64
}

// StartOfUTCDay is midnight UTC of t's day.
func StartOfUTCDay(t time.Time) time.Time {
	y, m, d := t.UTC().Date()
	return time.Date(y, m, d, 0, 0, 0, 0, time.UTC)
}

// PaymentStats computes the dashboard's figures for the payments created at
// or after since (nil: the start of the current UTC day), and the refunds
// pending and the money to return now (admin). A since in the future or more than MaxStatsWindow
// back is InvalidArgument.
func (s *Service) PaymentStats(ctx context.Context, since *time.Time) (Stats, error) {
	if _, err := auth.RequireAdmin(ctx); err != nil {
		return Stats{}, err
	}
	now := s.clock().UTC()
	from := StartOfUTCDay(now)
	if since != nil {
		from = since.UTC()
		switch {
		case from.After(now):
			return Stats{}, apperr.New(apperr.InvalidArgument, "since: %s is in the future", from.Format(time.RFC3339))
		case now.Sub(from) > MaxStatsWindow:
			return Stats{}, apperr.New(apperr.InvalidArgument, "since: at most %d days back", int(MaxStatsWindow/(24*time.Hour)))
		}
	}
	// One database for the four figures: the replica when it is in use.
	db := s.reads()
	groups, err := store.PaymentStatsSince(ctx, db, from)
	if err != nil {
		return Stats{}, err
	}
	pending, err := store.Q(db).CountPendingPayments(ctx)
	if err != nil {
		return Stats{}, err
	}
	refunds, err := store.PendingRefundSummary(ctx, db)
	if err != nil {
		return Stats{}, err
	}
	toReturn, err := store.MoneyToReturn(ctx, db)
	if err != nil {
		return Stats{}, err
	}
	st := Stats{Since: from, AsOf: now, PendingNow: pending, RefundsPending: refunds.Count, ToReturn: toReturn}
	if refunds.Oldest != nil {
		oldest := refunds.Oldest.UTC()
		st.OldestPendingRefund = &oldest
	}
	byCurrency := map[string]int{}
	for _, g := range groups {
		st.Total += g.Payments
		switch Status(g.Status) {
		case StatusPending:
			st.Pending += g.Payments
			continue
		case StatusFailed:
			st.Failed += g.Payments
			continue
		case StatusSuccess:
			st.Success += g.Payments
		case StatusRefunded:
			st.Refunded += g.Payments
		default:
			continue
		}
		i, ok := byCurrency[g.Currency]
		if !ok {
			i = len(st.Succeeded)
			byCurrency[g.Currency] = i
			st.Succeeded = append(st.Succeeded, CurrencyTotal{Currency: g.Currency})
		}
		t := &st.Succeeded[i]
		t.Payments += g.Payments
		t.AmountCents += g.AmountCents
		t.RefundedCents += g.RefundedCents
	}
	slices.SortFunc(st.Succeeded, func(a, b CurrencyTotal) int { return strings.Compare(a.Currency, b.Currency) })
	if decided := st.Success + st.Refunded + st.Failed; decided > 0 {
		st.SuccessRate, st.HasRate = float64(st.Success+st.Refunded)/float64(decided), true
	}
	return st, nil
}
