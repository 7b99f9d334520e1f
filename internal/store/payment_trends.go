package store

import (
	"context"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/rustbill/paymentd/internal/store/dbsqlc"
)

// TrendRange is a range of local days in an IANA zone, both ends included:
// dates at midnight UTC (only their year, month and day count).
type TrendRange struct {
	Zone     string
	FirstDay time.Time
	LastDay  time.Time
}

func pgDate(t time.Time) pgtype.Date { return pgtype.Date{Time: t, Valid: true} }

func dateOf(d pgtype.Date) time.Time {
	y, m, day := d.Time.Date()
	return time.Date(y, m, day, 0, 0, 0, 0, time.UTC)
}

// CurrencyDay is what happened to one currency's payments on one local day:
// created, received (paid_at) and failed that day, amounts in cents.
type CurrencyDay struct {
	Day           time.Time
	Currency      string
	Created       int64
	Succeeded     int64
	Failed        int64
	ReceivedCents int64
	RefundedCents int64
}

// PaymentTrendsByCurrency answers every day of r for every currency seen
// in it, ordered by currency then day.
func PaymentTrendsByCurrency(ctx context.Context, db DB, r TrendRange) ([]CurrencyDay, error) {
	rows, err := dbsqlc.New(db).PaymentTrendsByCurrency(ctx, dbsqlc.PaymentTrendsByCurrencyParams{
		Zone: r.Zone, FirstDay: pgDate(r.FirstDay), LastDay: pgDate(r.LastDay),
	})
	if err != nil {
		return nil, MapError(err)
	}
	out := make([]CurrencyDay, len(rows))
	for i, x := range rows {
		out[i] = CurrencyDay{Day: dateOf(x.Day), Currency: x.Currency, Created: x.Created, Succeeded: x.Succeeded,
			Failed: x.Failed, ReceivedCents: x.ReceivedCents, RefundedCents: x.RefundedCents}
	}
	return out, nil
}

// GatewayDay is how the payments created through one gateway interface on
// one local day stand now.
type GatewayDay struct {
	Gateway   uuid.UUID
	Name      string
	Day       time.Time
	Created   int64
	Succeeded int64
	Failed    int64
}

// PaymentTrendsByGatewayDay answers every day of r for every gateway
// interface with payments created in it, ordered by gateway name, id, then
// day.
func PaymentTrendsByGatewayDay(ctx context.Context, db DB, r TrendRange) ([]GatewayDay, error) {
	rows, err := dbsqlc.New(db).PaymentTrendsByGatewayDay(ctx, dbsqlc.PaymentTrendsByGatewayDayParams{
		Zone: r.Zone, FirstDay: pgDate(r.FirstDay), LastDay: pgDate(r.LastDay),
	})
	if err != nil {
		return nil, MapError(err)
	}
	out := make([]GatewayDay, len(rows))
	for i, x := range rows {
		out[i] = GatewayDay{Gateway: x.GatewayInterfaceID, Name: x.DisplayName, Day: dateOf(x.Day), Created: x.Created,
			Succeeded: x.Succeeded, Failed: x.Failed}
	}
	return out, nil
}

// SecondsBin is how many of a gateway interface's payments (created in a
// range, succeeded) took about Seconds from creation to success: one bin of
// the rollup's histogram, counted as the seconds it stands for.
type SecondsBin struct {
	Gateway uuid.UUID
	Seconds float64
	N       int64
}

// PaymentTrendSeconds answers the histogram of r's times to success per
// gateway interface, ordered by gateway id then seconds.
func PaymentTrendSeconds(ctx context.Context, db DB, r TrendRange) ([]SecondsBin, error) {
	rows, err := dbsqlc.New(db).PaymentTrendSeconds(ctx, dbsqlc.PaymentTrendSecondsParams{
		Zone: r.Zone, FirstDay: pgDate(r.FirstDay), LastDay: pgDate(r.LastDay),
	})
	if err != nil {
		return nil, MapError(err)
	}
	out := make([]SecondsBin, len(rows))
	for i, x := range rows {
		out[i] = SecondsBin{Gateway: x.GatewayInterfaceID, Seconds: x.Seconds, N: x.N}
	}
	return out, nil
}

// PaymentTrends are the three answers of one range, read from one snapshot.
type PaymentTrends struct {
	Currencies  []CurrencyDay
	GatewayDays []GatewayDay
	Seconds     []SecondsBin
}

// PaymentTrendsIn reads the trends of r in one REPEATABLE READ, READ ONLY
// transaction, so a payment settling meanwhile (or a fold of the rollup)
// is counted in all three answers or in none.
func PaymentTrendsIn(ctx context.Context, db DB, r TrendRange) (PaymentTrends, error) {
	var out PaymentTrends
	err := WithTx(ctx, db, func(tx pgx.Tx) error {
		// The ledger check's first statement, for the same reason.
		if err := Q(tx).LedgerSnapshot(ctx); err != nil {
			return err
		}
		var err error
		if out.Currencies, err = PaymentTrendsByCurrency(ctx, tx, r); err != nil {
			return err
		}
		if out.GatewayDays, err = PaymentTrendsByGatewayDay(ctx, tx, r); err != nil {
			return err
		}
		out.Seconds, err = PaymentTrendSeconds(ctx, tx, r)
		return err
	})
	return out, err
}
