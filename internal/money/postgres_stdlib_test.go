// The database/sql path (pgx/v5/stdlib), as goose and other database/sql
// users of Amount take it.

package money_test

import (
	"database/sql"
	"testing"

	"github.com/jackc/pgx/v5/stdlib"
	"github.com/stretchr/testify/require"

	// The tests read like the package's own: money is what they test. They
	// live outside it because testdb (the server to test against) imports
	// the store, which imports money.
	. "github.com/rustbill/paymentd/internal/money"
)

// openDatabaseSQL opens a database/sql handle on the same database as b, through
// pgx's stdlib driver.
func openDatabaseSQL(t *testing.T, b *pgBundle) *sql.DB {
	t.Helper()

	db := stdlib.OpenDB(*b.cfg)
	t.Cleanup(func() { _ = db.Close() })
	if err := db.PingContext(b.ctx); err != nil {
		t.Fatalf("PostgreSQL at %s is unreachable through database/sql: %v", b.where, err)
	}
	return db
}

func TestPostgresRoundTripsAmountsThroughDatabaseSQL(t *testing.T) {
	t.Parallel()
	b := setupPostgres(t)
	db := openDatabaseSQL(t, b)

	for _, s := range roundTripValues {
		in := MustParse(s)

		var out Amount
		var text string
		err := db.QueryRowContext(b.ctx, "SELECT $1::numeric(12,2), $1::numeric(12,2)::text", in).Scan(&out, &text)
		require.NoError(t, err, s)
		require.Equal(t, in, out)
		require.Equal(t, s, text)
	}

	var n NullAmount
	require.NoError(t, db.QueryRowContext(b.ctx, "SELECT $1::numeric(12,2)", NullAmount{}).Scan(&n))
	require.False(t, n.Valid)
	require.NoError(t, db.QueryRowContext(b.ctx, "SELECT '7.5'::numeric(12,2)").Scan(&n))
	require.Equal(t, NullAmount{Amount: MustParse("7.50"), Valid: true}, n)

	var a Amount
	err := db.QueryRowContext(b.ctx, "SELECT '1.005'::numeric").Scan(&a)
	require.ErrorIs(t, err, ErrTooManyDecimals)
	err = db.QueryRowContext(b.ctx, "SELECT NULL::numeric").Scan(&a)
	require.ErrorIs(t, err, ErrNull)
	require.NoError(t, db.QueryRowContext(b.ctx, "SELECT '1.000'::numeric").Scan(&a))
	require.Equal(t, "1.00", a.String())
}
