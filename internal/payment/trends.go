package payment

import (
	"context"
	"time"
	// The zones an admin may name are the IANA database's, whatever the
	// host has installed (a distroless image has none).
	_ "time/tzdata"

	"github.com/google/uuid"

	"github.com/rustbill/paymentd/internal/apperr"
	"github.com/rustbill/paymentd/internal/auth"
	"github.com/rustbill/paymentd/internal/store"
	"github.com/rustbill/paymentd/internal/timerange"
)

// MaxTrendDays is how many days GetPaymentTrends answers at most: a year
// (and a leap day), what a dashboard's longest view needs.
const MaxTrendDays = 366

// DefaultTrendDays is the length of the range when its first day is not
// given.
const DefaultTrendDays = 30

const dateLayout = "2006-01-02"

// TrendQuery is a range of local days in an IANA zone: From and To are
// YYYY-MM-DD, both included (empty To: today in the zone; empty From:
// DefaultTrendDays ending at To); an empty Zone is UTC.
type TrendQuery struct {
	From, To, Zone string
}

// Trends are the dashboard's charts: what happened day by day in a zone.
type Trends struct {
	// From and To are the first and last day (dates at midnight UTC), Zone
	// the IANA name they are in; AsOf is when the figures were taken.
	From, To time.Time
	Zone     string
	AsOf     time.Time
	// Days are every day from From to To; each series has one entry per day.
	Days       []time.Time
	Currencies []CurrencyTrend
	Gateways   []GatewayTrend
}

// CurrencyTrend is one currency's days: payments created, received and
// failed each day, and the money received and refunded that day.
type CurrencyTrend struct {
	Currency string
	Days     []store.CurrencyDay
}

// Rate is a share of decided payments that succeeded, absent (Known false)
// while none is decided.
type Rate struct {
	Value float64
	Known bool
}

// successRate is succeeded / (succeeded + failed): pending payments are
// undecided, a refunded payment had succeeded.
func successRate(succeeded, failed int64) Rate {
	if decided := succeeded + failed; decided > 0 {
		return Rate{Value: float64(succeeded) / float64(decided), Known: true}
	}
	return Rate{}
}

// GatewayTrend is how the payments created through one gateway interface
// stand now: over the whole range (with the median time from creation to
// success) and per day of creation.
type GatewayTrend struct {
	ID                         uuid.UUID
	Name                       string
	Created, Succeeded, Failed int64
	SuccessRate                Rate
	MedianSecondsToSuccess     float64
	HasMedian                  bool
	Days                       []GatewayDayTrend
}

// GatewayDayTrend is one gateway interface's payments created on one day.
type GatewayDayTrend struct {
	Day                        time.Time
	Created, Succeeded, Failed int64
	SuccessRate                Rate
}

// parseTrendQuery checks q against the clock: a known zone, real dates, a
// range that does not end before it starts and holds at most MaxTrendDays.
func parseTrendQuery(q TrendQuery, now time.Time) (store.TrendRange, error) {
	zone := q.Zone
	if zone == "" {
		zone = "UTC"
	}
	// "Local" would be the server's zone, which PostgreSQL does not know.
	loc, err := time.LoadLocation(zone)
	if err != nil || zone == "Local" {
		return store.TrendRange{}, apperr.New(apperr.InvalidArgument, "time_zone: %q is not an IANA time zone such as Asia/Shanghai", q.Zone)
	}
	day := func(field, raw string) (time.Time, error) {
		t, err := time.Parse(dateLayout, raw)
		if err != nil {
			return t, apperr.New(apperr.InvalidArgument, "%s: %q is not a date such as 2026-05-01", field, raw)
		}
		return t, timerange.CheckDate(field, t)
	}
	y, m, d := now.In(loc).Date()
	to := time.Date(y, m, d, 0, 0, 0, 0, time.UTC)
	if q.To != "" {
		if to, err = day("to", q.To); err != nil {
			return store.TrendRange{}, err
		}
	}
	from := to.AddDate(0, 0, 1-DefaultTrendDays)
	if q.From != "" {
		if from, err = day("from", q.From); err != nil {
			return store.TrendRange{}, err
		}
	}
	switch n := days(from, to); {
	case n < 1:
		return store.TrendRange{}, apperr.New(apperr.InvalidArgument, "from: %s is after to: %s", from.Format(dateLayout), to.Format(dateLayout))
	case n > MaxTrendDays:
		return store.TrendRange{}, apperr.New(apperr.InvalidArgument, "from, to: %d days, at most %d", n, MaxTrendDays)
	}
	return store.TrendRange{Zone: zone, FirstDay: from, LastDay: to}, nil
}

// days counts the days from from to to, both included (dates at midnight
// UTC, so every day lasts 24 hours).
func days(from, to time.Time) int {
	return int(to.Sub(from)/(24*time.Hour)) + 1
}

// PaymentTrends computes the dashboard's trends for q (admin). A bad zone
// or date, a reversed range and one longer than MaxTrendDays are
// InvalidArgument.
func (s *Service) PaymentTrends(ctx context.Context, q TrendQuery) (Trends, error) {
	if _, err := auth.RequireAdmin(ctx); err != nil {
		return Trends{}, err
	}
	now := s.clock().UTC()
	r, err := parseTrendQuery(q, now)
	if err != nil {
		return Trends{}, err
	}
	got, err := store.PaymentTrendsIn(ctx, s.reads(), r)
	if err != nil {
		return Trends{}, err
	}
	tr := Trends{From: r.FirstDay, To: r.LastDay, Zone: r.Zone, AsOf: now}
	for d := r.FirstDay; !d.After(r.LastDay); d = d.AddDate(0, 0, 1) {
		tr.Days = append(tr.Days, d)
	}
	// The grids come ordered by currency (gateway) then day, one row per
	// day of the range.
	for _, row := range got.Currencies {
		if n := len(tr.Currencies); n == 0 || tr.Currencies[n-1].Currency != row.Currency {
			tr.Currencies = append(tr.Currencies, CurrencyTrend{Currency: row.Currency})
		}
		c := &tr.Currencies[len(tr.Currencies)-1]
		c.Days = append(c.Days, row)
	}
	// The gateway days come ordered by name, id, then day; a gateway's
	// totals over the range are the sums of its days.
	for _, row := range got.GatewayDays {
		if n := len(tr.Gateways); n == 0 || tr.Gateways[n-1].ID != row.Gateway {
			tr.Gateways = append(tr.Gateways, GatewayTrend{ID: row.Gateway, Name: row.Name})
		}
		g := &tr.Gateways[len(tr.Gateways)-1]
		g.Created += row.Created
		g.Succeeded += row.Succeeded
		g.Failed += row.Failed
		g.Days = append(g.Days, GatewayDayTrend{
			Day: row.Day, Created: row.Created, Succeeded: row.Succeeded, Failed: row.Failed,
			SuccessRate: successRate(row.Succeeded, row.Failed),
		})
	}
	seconds := map[uuid.UUID][]store.SecondsBin{}
	for _, b := range got.Seconds {
		seconds[b.Gateway] = append(seconds[b.Gateway], b)
	}
	for i := range tr.Gateways {
		g := &tr.Gateways[i]
		g.SuccessRate = successRate(g.Succeeded, g.Failed)
		g.MedianSecondsToSuccess, g.HasMedian = median(seconds[g.ID])
	}
	return tr, nil
}

// median is the median of the times a histogram counts (bins in ascending
// order of Seconds, each standing for N times of that many seconds), as
// PostgreSQL's percentile_cont(0.5) answers it over those times: the middle
// one, or halfway between the two middle ones. False when it counts none.
func median(bins []store.SecondsBin) (float64, bool) {
	var n int64
	for _, b := range bins {
		n += b.N
	}
	if n <= 0 {
		return 0, false
	}
	// The 0-based ranks of the middle time or the two middle ones.
	lo, hi := (n-1)/2, n/2
	at := func(rank int64) float64 {
		for _, b := range bins {
			if rank < b.N {
				return b.Seconds
			}
			rank -= b.N
		}
		return bins[len(bins)-1].Seconds
	}
	return (at(lo) + at(hi)) / 2, true
}
