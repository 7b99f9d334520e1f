package store

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/rustbill/paymentd/internal/store/dbsqlc"
)

// The recurring revenue's queries run through Q (sql/queries/recurring_revenue.sql).
type (
	RenewalsAheadParams     = dbsqlc.RenewalsAheadParams
	RenewalsAhead           = dbsqlc.RenewalsAheadRow
	RenewalStepsAheadParams = dbsqlc.RenewalStepsAheadParams
	RenewalStepsAhead       = dbsqlc.RenewalStepsAheadRow
)

// The kinds of RecurringRevenueMovement.
const (
	MovementLive         = "live"
	MovementStartedAfter = "started_after"
	MovementEndedAfter   = "ended_after"
	MovementNew          = "new"
	MovementReactivation = "reactivation"
	MovementChurn        = "churn"
	// MovementExpansion and MovementContraction: plan changes applied on
	// a day of the range that raised or lowered a live service's price;
	// their billing_cycle is "annual" and their cents the change of the
	// monthly price in twelfths of a cent (an annual price's twelfths are
	// its cents), so that a change of cycle nets in one row.
	MovementExpansion   = "expansion"
	MovementContraction = "contraction"
)

// RecurringRevenueMovement is the recurring services of one currency and
// billing cycle that are live now (Kind live), that started or ended after
// the range (the corrections started_after and ended_after, on its first
// day), or that started (new, reactivation) or ended (churn) on Day (a
// date at midnight UTC): how many, and the sum of their renewal prices in
// cents of one period (sql/queries/recurring_revenue.sql).
type RecurringRevenueMovement struct {
	Kind         string
	Day          time.Time
	Currency     string
	BillingCycle string
	Services     int64
	Cents        int64
}

// RecurringRevenueMovements answers what r's MRR and its movements day by
// day are made of, read from the orders and their service periods;
// liveStatuses is order.LiveStatuses().
func RecurringRevenueMovements(ctx context.Context, db DB, r TrendRange, liveStatuses []string) ([]RecurringRevenueMovement, error) {
	rows, err := dbsqlc.New(db).RecurringRevenueMovements(ctx, dbsqlc.RecurringRevenueMovementsParams{
		Zone: r.Zone, FirstDay: pgDate(r.FirstDay), LastDay: pgDate(r.LastDay), LiveStatuses: liveStatuses,
	})
	if err != nil {
		return nil, MapError(err)
	}
	out := make([]RecurringRevenueMovement, len(rows))
	for i, x := range rows {
		out[i] = RecurringRevenueMovement{Kind: x.Kind, Day: dateOf(x.Day), Currency: x.Currency,
			BillingCycle: x.BillingCycle, Services: x.Services, Cents: x.Cents}
	}
	return out, nil
}

// RecurringRevenueAnswers are the three answers of one GetRecurringRevenue,
// read from one snapshot.
type RecurringRevenueAnswers struct {
	Movements []RecurringRevenueMovement
	Renewals  []RenewalsAhead
	Steps     []RenewalStepsAhead
}

// RecurringRevenueIn reads the movements of r, the renewals ahead and the
// billing run's steps ahead in one transaction begun as the trends' is, so
// an order moving meanwhile is counted in all three answers or in none.
func RecurringRevenueIn(ctx context.Context, db DB, r TrendRange, liveStatuses []string,
	renewals RenewalsAheadParams, steps RenewalStepsAheadParams) (RecurringRevenueAnswers, error) {
	var out RecurringRevenueAnswers
	err := WithTx(ctx, db, func(tx pgx.Tx) error {
		if err := Q(tx).LedgerSnapshot(ctx); err != nil {
			return err
		}
		if err := Q(tx).RecurringRevenueWithoutJIT(ctx); err != nil {
			return err
		}
		var err error
		if out.Movements, err = RecurringRevenueMovements(ctx, tx, r, liveStatuses); err != nil {
			return err
		}
		if out.Renewals, err = Q(tx).RenewalsAhead(ctx, renewals); err != nil {
			return err
		}
		out.Steps, err = Q(tx).RenewalStepsAhead(ctx, steps)
		return err
	})
	return out, err
}
