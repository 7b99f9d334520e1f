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
	// MovementTotal is every change of MRR ever (MRR now); MovementAfter
	// the changes at or after the range's end. Both on its first day.
	MovementTotal = "total"
	MovementAfter = "after"
	// The changes of one day of the range: a service started (new, or a
	// customer coming back: reactivation) or ended (churn), a plan change
	// raised or lowered a live service's price (expansion, contraction).
	MovementNew          = "new"
	MovementReactivation = "reactivation"
	MovementChurn        = "churn"
	MovementExpansion    = "expansion"
	MovementContraction  = "contraction"
)

// RecurringRevenueMovement is a sum of changes of MRR of one currency
// (sql/queries/recurring_revenue.sql): services and the monthly price in
// twelfths of a cent, signed (an end or a lower price negative), of Kind
// on Day (a date at midnight UTC).
type RecurringRevenueMovement struct {
	Kind     string
	Day      time.Time
	Currency string
	Services int64
	Twelfths int64
}

// RecurringRevenueMovements answers what r's MRR and its movements day by
// day are made of, read from the recurring revenue's rollup and the
// changes not folded into it yet.
func RecurringRevenueMovements(ctx context.Context, db DB, r TrendRange) ([]RecurringRevenueMovement, error) {
	rows, err := dbsqlc.New(db).RecurringRevenueMovements(ctx, dbsqlc.RecurringRevenueMovementsParams{
		Zone: r.Zone, FirstDay: pgDate(r.FirstDay), LastDay: pgDate(r.LastDay),
	})
	if err != nil {
		return nil, MapError(err)
	}
	out := make([]RecurringRevenueMovement, len(rows))
	for i, x := range rows {
		out[i] = RecurringRevenueMovement{Kind: x.Kind, Day: dateOf(x.Day), Currency: x.Currency,
			Services: x.Services, Twelfths: x.Twelfths}
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
func RecurringRevenueIn(ctx context.Context, db DB, r TrendRange,
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
		if out.Movements, err = RecurringRevenueMovements(ctx, tx, r); err != nil {
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
