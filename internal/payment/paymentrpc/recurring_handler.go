package paymentrpc

import (
	"context"
	"time"

	"connectrpc.com/connect"

	paymentpb "github.com/rustbill/paymentd/gen/billing/payment"
	"github.com/rustbill/paymentd/internal/money"
	"github.com/rustbill/paymentd/internal/payment"
	"github.com/rustbill/paymentd/internal/rpc"
)

// BillingRules are what GetRecurringRevenue reads of the billing run: its
// clock (nil: the service's) and the days past due it suspends and
// terminates an unpaid service at (0: off).
type BillingRules struct {
	Clock                        func() time.Time
	SuspendAfter, TerminateAfter time.Duration
}

// WithBillingRules gives GetRecurringRevenue the billing run's clock and
// rules; without them it reads the service's clock and no step is taken.
func (h *AdminHandler) WithBillingRules(r BillingRules) *AdminHandler {
	h.billing = r
	return h
}

// GetRecurringRevenue implements PaymentAdminService.GetRecurringRevenue.
func (h *AdminHandler) GetRecurringRevenue(ctx context.Context, req *connect.Request[paymentpb.GetRecurringRevenueRequest]) (*connect.Response[paymentpb.GetRecurringRevenueResponse], error) {
	m := req.Msg
	q := payment.RecurringQuery{
		TrendQuery:   payment.TrendQuery{From: m.GetFrom(), To: m.GetTo(), Zone: m.GetTimeZone()},
		SuspendAfter: h.billing.SuspendAfter, TerminateAfter: h.billing.TerminateAfter,
	}
	if h.billing.Clock != nil {
		q.Now = h.billing.Clock()
	}
	rr, err := h.svc.RecurringRevenue(ctx, q)
	if err != nil {
		return nil, err
	}
	const day = 24 * time.Hour
	out := &paymentpb.GetRecurringRevenueResponse{
		From: rr.From.Format(dateLayout), To: rr.To.Format(dateLayout), TimeZone: rr.Zone, AsOf: rpc.Time(rr.AsOf),
		Days:             make([]string, len(rr.Days)),
		Currencies:       make([]*paymentpb.CurrencyRecurringRevenue, 0, len(rr.Currencies)),
		SuspendAfterDays: uint32(rr.SuspendAfter / day), TerminateAfterDays: uint32(rr.TerminateAfter / day),
	}
	for i, d := range rr.Days {
		out.Days[i] = d.Format(dateLayout)
	}
	for _, c := range rr.Currencies {
		cr := &paymentpb.CurrencyRecurringRevenue{
			Currency: c.Currency, Start: mrrFigure(c.Start), End: mrrFigure(c.End), Movements: mrrMovements(c.Movements),
			Days: make([]*paymentpb.MrrDay, len(c.Days)),
			Ahead: []*paymentpb.RenewalsAhead{
				renewalsAhead(payment.NearHorizon, c.Near), renewalsAhead(payment.FarHorizon, c.Far),
			},
		}
		for i, d := range c.Days {
			cr.Days[i] = &paymentpb.MrrDay{Day: d.Day.Format(dateLayout), Mrr: mrrFigure(d.End), Movements: mrrMovements(d.Movements)}
		}
		out.Currencies = append(out.Currencies, cr)
	}
	return connect.NewResponse(out), nil
}

// mrrFigure is a figure rounded to the cent, as the answer carries it.
func mrrFigure(m payment.Movement) *paymentpb.MrrFigure {
	return &paymentpb.MrrFigure{Services: uint64(max(m.Services, 0)), Amount: m.Amount.String()}
}

func mrrMovements(m payment.Movements) *paymentpb.MrrMovements {
	return &paymentpb.MrrMovements{
		NewBusiness: mrrFigure(m.New), Expansion: mrrFigure(m.Expansion), Contraction: mrrFigure(m.Contraction),
		Churn: mrrFigure(m.Churn), Reactivation: mrrFigure(m.Reactivation),
	}
}

func renewalsAhead(h time.Duration, a payment.Ahead) *paymentpb.RenewalsAhead {
	return &paymentpb.RenewalsAhead{
		Days:     uint32(h / (24 * time.Hour)),
		Renewals: uint64(a.Renewals), RenewalsAmount: money.FormatCents(a.RenewalCents),
		Suspensions: uint64(a.Suspensions), SuspensionsAmount: money.FormatCents(a.SuspensionCents),
		Terminations: uint64(a.Terminations), TerminationsAmount: money.FormatCents(a.TerminationCents),
	}
}
