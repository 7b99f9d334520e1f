package store_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/rustbill/paymentd/internal/store"
)

// mrrChange is a row of mrr_changes as the test wrote it.
type mrrChange struct {
	at       time.Time
	currency string
	kind     string
	services int64
	twelfths int64
}

// mrrMovementKey names a row of RecurringRevenueMovements' answer.
type mrrMovementKey struct {
	kind, day, currency string
}

// mrrOracle is what RecurringRevenueMovements must answer for changes
// over the local days first .. last of loc, worked out change by change:
// a change counts from the start of its UTC quarter hour (trend_quarter),
// on the local day whose midnight is at or before that, 'after' from the
// end of the range on, and every change in 'total'.
func mrrOracle(changes []mrrChange, loc *time.Location, first, last time.Time) map[mrrMovementKey][2]int64 {
	out := map[mrrMovementKey][2]int64{}
	add := func(k mrrMovementKey, c mrrChange) {
		v := out[k]
		out[k] = [2]int64{v[0] + c.services, v[1] + c.twelfths}
	}
	midnight := func(d time.Time) time.Time {
		return time.Date(d.Year(), d.Month(), d.Day(), 0, 0, 0, 0, loc)
	}
	lo, hi := midnight(first), midnight(last.AddDate(0, 0, 1))
	firstDay := first.Format(time.DateOnly)
	for _, c := range changes {
		add(mrrMovementKey{store.MovementTotal, firstDay, c.currency}, c)
		q := c.at.UTC().Truncate(15 * time.Minute)
		switch {
		case q.Before(lo):
		case !q.Before(hi):
			add(mrrMovementKey{store.MovementAfter, firstDay, c.currency}, c)
		default:
			d := first
			for !q.Before(midnight(d.AddDate(0, 0, 1))) {
				d = d.AddDate(0, 0, 1)
			}
			add(mrrMovementKey{c.kind, d.Format(time.DateOnly), c.currency}, c)
		}
	}
	for k, v := range out {
		if v == [2]int64{} && k.kind != store.MovementTotal {
			delete(out, k)
		}
	}
	return out
}

// The movements of a range, read from the UTC days' prefix sums
// (migration 00016) and the changes not folded yet, are what the changes
// say local day by local day, in zones whose midnights fall at any
// quarter hour of a UTC day (+05:45, -03:30), on either side of it (+14,
// -10), and move with daylight saving (a 23-hour day whose two midnights
// share a UTC date, Lord Howe's half-hour shift), over ranges of one day
// to a year and a bit, starting and ending anywhere in the changes.
func TestRecurringRevenueMovementsAreTheChangesByLocalDay(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := migratedPool(t)
	rng := rand.New(rand.NewPCG(38, 16))
	base := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	span := 2 * 365 * 24 * time.Hour
	kinds := []string{store.MovementNew, store.MovementReactivation, store.MovementChurn, store.MovementExpansion, store.MovementContraction}
	var changes []mrrChange
	write := func(n int) {
		for range n {
			at := base.Add(time.Duration(rng.Int64N(int64(span))))
			switch rng.IntN(4) { // on, just before and just after a quarter hour, and a midnight
			case 0:
				at = at.Truncate(15 * time.Minute)
			case 1:
				at = at.Truncate(15 * time.Minute).Add(-time.Microsecond)
			case 2:
				at = at.Truncate(24 * time.Hour).Add(time.Duration(rng.IntN(3)-1) * time.Microsecond)
			}
			c := mrrChange{at: at, currency: []string{"CNY", "USD"}[rng.IntN(2)], kind: kinds[rng.IntN(len(kinds))],
				services: int64(rng.IntN(3) - 1), twelfths: rng.Int64N(100_000) - 50_000}
			_, err := pool.Exec(ctx, `INSERT INTO mrr_changes (source, ref, at, currency, kind, services, twelfths)
				VALUES ('start', $1, $2, $3, $4, $5, $6)`, uuid.New(), c.at, c.currency, c.kind, c.services, c.twelfths)
			require.NoError(t, err)
			changes = append(changes, c)
		}
	}
	fold := func() {
		var moved int64
		require.NoError(t, pool.QueryRow(ctx, `SELECT mrr_fold()`).Scan(&moved))
		require.Positive(t, moved)
	}
	// Three folds, the later ones touching days the earlier built, and
	// changes left unfolded.
	write(1500)
	fold()
	write(500)
	fold()
	write(300)
	fold()
	write(200)

	zones := []string{"UTC", "Asia/Shanghai", "Asia/Kathmandu", "America/St_Johns", "Pacific/Kiritimati",
		"Pacific/Honolulu", "Europe/London", "America/New_York", "Australia/Lord_Howe"}
	ranges := [][2]time.Time{
		{time.Date(2025, 3, 30, 0, 0, 0, 0, time.UTC), time.Date(2025, 3, 30, 0, 0, 0, 0, time.UTC)}, // London's 23-hour day
		{time.Date(2025, 10, 26, 0, 0, 0, 0, time.UTC), time.Date(2025, 11, 2, 0, 0, 0, 0, time.UTC)},
		{time.Date(2024, 12, 1, 0, 0, 0, 0, time.UTC), time.Date(2025, 12, 1, 0, 0, 0, 0, time.UTC)}, // from before the first change
		{time.Date(2026, 6, 1, 0, 0, 0, 0, time.UTC), time.Date(2027, 2, 1, 0, 0, 0, 0, time.UTC)},   // past the last
	}
	for range 8 {
		first := base.AddDate(0, 0, rng.IntN(700))
		ranges = append(ranges, [2]time.Time{first, first.AddDate(0, 0, rng.IntN(367))})
	}
	for _, zone := range zones {
		loc, err := time.LoadLocation(zone)
		require.NoError(t, err)
		for _, r := range ranges {
			name := fmt.Sprintf("%s %s..%s", zone, r[0].Format(time.DateOnly), r[1].Format(time.DateOnly))
			got, err := store.RecurringRevenueMovements(ctx, pool, store.TrendRange{Zone: zone, FirstDay: r[0], LastDay: r[1]})
			require.NoError(t, err, name)
			answer := map[mrrMovementKey][2]int64{}
			for _, m := range got {
				k := mrrMovementKey{m.Kind, m.Day.Format(time.DateOnly), m.Currency}
				require.NotContains(t, answer, k, name)
				if m.Services != 0 || m.Twelfths != 0 || m.Kind == store.MovementTotal {
					answer[k] = [2]int64{m.Services, m.Twelfths}
				}
			}
			require.Equal(t, mrrOracle(changes, loc, r[0], r[1]), answer, name)
		}
	}
}
