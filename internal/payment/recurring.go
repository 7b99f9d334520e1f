package payment

import (
	"context"
	"slices"
	"strings"
	"time"

	"github.com/cockroachdb/apd/v3"

	"github.com/rustbill/paymentd/internal/auth"
	"github.com/rustbill/paymentd/internal/money"
	"github.com/rustbill/paymentd/internal/order"
	"github.com/rustbill/paymentd/internal/store"
)

// The horizons of the renewals, suspensions and terminations ahead.
const (
	NearHorizon = 7 * 24 * time.Hour
	FarHorizon  = 30 * 24 * time.Hour
)

// Twelfths is an amount in twelfths of a cent: what a month of a renewal
// price is, exactly. Every cycle lasts 1, 3, 6 or 12 months, so a price of
// c cents per cycle of m months is 12c/m twelfths a month, a whole number;
// sums of them are exact, and the rounding to the cent happens once, when
// a figure is answered (Cents, String).
type Twelfths int64

// String is t in units of its currency, rounded half up (away from zero)
// to the cent, with two fractional digits: "8.33" for 100.00 a year.
func (t Twelfths) String() string {
	c, err := money.MulDiv(int64(t), 1, 12, apd.RoundHalfUp)
	if err != nil {
		panic(err) // any int64 divided by 12 fits
	}
	return money.FormatCents(c)
}

// Movement is a number of services and the monthly revenue they moved.
type Movement struct {
	Services int64
	Amount   Twelfths
}

func (m *Movement) add(services int64, amount Twelfths) {
	m.Services += services
	m.Amount += amount
}

// Movements are the ways MRR moves (docs/decisions.md, "recurring
// revenue"): Start + New + Expansion - Contraction - Churn + Reactivation
// = End, exactly, in services and in twelfths.
type Movements struct {
	New, Expansion, Contraction, Churn, Reactivation Movement
}

// Net is what the movements add to MRR: New + Expansion - Contraction -
// Churn + Reactivation.
func (m Movements) Net() Movement {
	return Movement{
		Services: m.New.Services + m.Expansion.Services - m.Contraction.Services - m.Churn.Services + m.Reactivation.Services,
		Amount:   m.New.Amount + m.Expansion.Amount - m.Contraction.Amount - m.Churn.Amount + m.Reactivation.Amount,
	}
}

// CurrencyMRRDay is one local day of one currency: MRR at the day's end
// and what moved it that day.
type CurrencyMRRDay struct {
	Day time.Time
	End Movement
	Movements
}

// Ahead is what the renewal cycle does in one horizon: the renewals
// falling due (renewal prices, cents), and the suspensions and
// terminations the billing run reaches (amounts due, cents).
type Ahead struct {
	Renewals, Suspensions, Terminations             int64
	RenewalCents, SuspensionCents, TerminationCents int64
}

// CurrencyMRR is one currency's recurring revenue over a range.
type CurrencyMRR struct {
	Currency   string
	Start, End Movement
	Movements
	Days      []CurrencyMRRDay
	Near, Far Ahead
}

// RecurringRevenue is GetRecurringRevenue's answer.
type RecurringRevenue struct {
	From, To   time.Time
	Zone       string
	AsOf       time.Time
	Days       []time.Time
	Currencies []CurrencyMRR
	// SuspendAfter and TerminateAfter are the billing run's steps; 0: off.
	SuspendAfter, TerminateAfter time.Duration
}

// RecurringQuery is a range of local days (as GetPaymentTrends takes it)
// and the billing run's clock and rules: Now is the billing clock's time
// (zero: the service's clock), SuspendAfter and TerminateAfter its
// [billing] suspend_after_days and terminate_after_days (0: off).
type RecurringQuery struct {
	TrendQuery
	Now                          time.Time
	SuspendAfter, TerminateAfter time.Duration
}

// RecurringRevenue computes the dashboard's recurring revenue (admin): MRR
// per currency at the start and the end of the range and its movements
// day by day, from the orders and their service periods, and the
// renewals, suspensions and terminations of the next 7 and 30 days. The
// range is checked as PaymentTrends checks it.
func (s *Service) RecurringRevenue(ctx context.Context, q RecurringQuery) (RecurringRevenue, error) {
	if _, err := auth.RequireAdmin(ctx); err != nil {
		return RecurringRevenue{}, err
	}
	now := q.Now
	if now.IsZero() {
		now = s.clock()
	}
	now = store.Timestamp(now)
	r, err := parseTrendQuery(q.TrendQuery, now)
	if err != nil {
		return RecurringRevenue{}, err
	}
	live := order.LiveStatuses()
	steps := store.RenewalStepsAheadParams{
		Suspends: q.SuspendAfter > 0, SuspendFrom: string(order.StatusActive),
		SuspendNear: now.Add(NearHorizon - q.SuspendAfter), SuspendFar: now.Add(FarHorizon - q.SuspendAfter),
		Terminates:    q.TerminateAfter > 0,
		TerminateNear: now.Add(NearHorizon - q.TerminateAfter), TerminateFar: now.Add(FarHorizon - q.TerminateAfter),
		LiveStatuses: live,
	}
	got, err := store.RecurringRevenueIn(ctx, s.reads(), r,
		store.RenewalsAheadParams{Now: now, Near: now.Add(NearHorizon), Far: now.Add(FarHorizon)}, steps)
	if err != nil {
		return RecurringRevenue{}, err
	}
	out := RecurringRevenue{From: r.FirstDay, To: r.LastDay, Zone: r.Zone, AsOf: now,
		SuspendAfter: q.SuspendAfter, TerminateAfter: q.TerminateAfter}
	for d := r.FirstDay; !d.After(r.LastDay); d = d.AddDate(0, 0, 1) {
		out.Days = append(out.Days, d)
	}
	byCurrency := map[string]*CurrencyMRR{}
	currency := func(code string) *CurrencyMRR {
		c, ok := byCurrency[code]
		if !ok {
			c = &CurrencyMRR{Currency: code, Days: make([]CurrencyMRRDay, len(out.Days))}
			for i, d := range out.Days {
				c.Days[i].Day = d
			}
			byCurrency[code] = c
		}
		return c
	}
	// MRR at the end of the range: every change ever, less those after
	// the range. MRR at its start is that, less what moved it during the
	// range. The sums come signed: an end or a lower price is negative.
	for _, m := range got.Movements {
		c := currency(m.Currency)
		switch m.Kind {
		case store.MovementTotal:
			c.End.add(m.Services, Twelfths(m.Twelfths))
			continue
		case store.MovementAfter:
			c.End.add(-m.Services, -Twelfths(m.Twelfths))
			continue
		}
		i := days(r.FirstDay, m.Day) - 1
		if i < 0 || i >= len(c.Days) {
			continue // bucketed into the range by the query
		}
		var total, day *Movement
		sign := int64(1)
		switch m.Kind {
		case store.MovementNew:
			total, day = &c.New, &c.Days[i].New
		case store.MovementReactivation:
			total, day = &c.Reactivation, &c.Days[i].Reactivation
		case store.MovementChurn:
			total, day, sign = &c.Churn, &c.Days[i].Churn, -1
		case store.MovementExpansion:
			total, day = &c.Expansion, &c.Days[i].Expansion
		case store.MovementContraction:
			total, day, sign = &c.Contraction, &c.Days[i].Contraction, -1
		default:
			continue
		}
		total.add(sign*m.Services, Twelfths(sign*m.Twelfths))
		day.add(sign*m.Services, Twelfths(sign*m.Twelfths))
	}
	// Expansion and contraction count no services: a change moves MRR,
	// not the number of services.
	for _, c := range byCurrency {
		c.Start = c.End
		c.Start.add(-c.Net().Services, -c.Net().Amount)
		at := c.Start
		for i := range c.Days {
			d := &c.Days[i]
			net := d.Net()
			at.add(net.Services, net.Amount)
			d.End = at
		}
	}
	for _, a := range got.Renewals {
		c := currency(a.Currency)
		c.Near.Renewals, c.Near.RenewalCents = a.NearCount, a.NearCents
		c.Far.Renewals, c.Far.RenewalCents = a.FarCount, a.FarCents
	}
	for _, a := range got.Steps {
		c := currency(a.Currency)
		c.Near.Suspensions, c.Near.SuspensionCents = a.SuspendNearCount, a.SuspendNearCents
		c.Far.Suspensions, c.Far.SuspensionCents = a.SuspendFarCount, a.SuspendFarCents
		c.Near.Terminations, c.Near.TerminationCents = a.TerminateNearCount, a.TerminateNearCents
		c.Far.Terminations, c.Far.TerminationCents = a.TerminateFarCount, a.TerminateFarCents
	}
	for _, c := range byCurrency {
		out.Currencies = append(out.Currencies, *c)
	}
	slices.SortFunc(out.Currencies, func(a, b CurrencyMRR) int { return strings.Compare(a.Currency, b.Currency) })
	return out, nil
}
