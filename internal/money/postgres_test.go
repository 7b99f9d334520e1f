package money_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	// The tests read like the package's own: money is what they test. They
	// live outside it because testdb (the server to test against) imports
	// the store, which imports money.
	. "github.com/rustbill/paymentd/internal/money"

	"github.com/rustbill/paymentd/internal/testdb"
)

type pgBundle struct {
	ctx   context.Context
	cfg   *pgx.ConnConfig
	where string // host:port/database as user, for messages; never the password
	conn  *pgx.Conn
}

// setupPostgres connects to the test database with pgx. The tests only SELECT or
// use temporary tables, so they leave nothing behind. An unreachable database
// fails the test: these tests are the proof that NUMERIC round-trips, so they
// must not quietly skip.
func setupPostgres(t *testing.T) *pgBundle {
	t.Helper()

	// The server testdb chooses: PAYMENTD_TEST_DATABASE_URL, else
	// 127.0.0.1:5432, else the private cluster in .data/postgres.
	bctx, bcancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer bcancel()
	url, err := testdb.BaseURL(bctx)
	require.NoError(t, err, "no PostgreSQL to test against")
	cfg, err := pgx.ParseConfig(url)
	require.NoError(t, err, "the test database URL does not parse")
	where := fmt.Sprintf("%s:%d/%s as %s", cfg.Host, cfg.Port, cfg.Database, cfg.User)

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)

	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		t.Fatalf("PostgreSQL at %s is unreachable (these tests need it; set PAYMENTD_TEST_DATABASE_URL to point elsewhere): %v", where, err)
	}
	t.Cleanup(func() { _ = conn.Close(context.Background()) })

	return &pgBundle{ctx: ctx, cfg: cfg, where: where, conn: conn}
}

var roundTripValues = []string{
	"0.00", "0.01", "-0.01", "0.10", "1.00", "12.30", "-5.00",
	"1234567890.12", "9999999999.99", "-9999999999.99",
}

func TestPostgresRoundTripsAmountsThroughPgx(t *testing.T) {
	t.Parallel()
	b := setupPostgres(t)

	modes := []pgx.QueryExecMode{
		pgx.QueryExecModeCacheStatement, // binary NUMERIC both ways: NumericValue / ScanNumeric
		pgx.QueryExecModeSimpleProtocol, // text both ways: Value / ScanNumeric from text
	}
	for _, mode := range modes {
		for _, s := range roundTripValues {
			in := MustParse(s)

			var out Amount
			var text string
			err := b.conn.QueryRow(b.ctx, "SELECT $1::numeric(12,2), $1::numeric(12,2)::text", mode, in).Scan(&out, &text)
			require.NoError(t, err, "mode %v, %s", mode, s)
			require.Equal(t, in, out, "mode %v", mode)
			require.Equal(t, s, text, "PostgreSQL sees exactly the amount, mode %v", mode)

			var n NullAmount
			err = b.conn.QueryRow(b.ctx, "SELECT $1::numeric(12,2)", mode, NullAmount{Amount: in, Valid: true}).Scan(&n)
			require.NoError(t, err)
			require.Equal(t, NullAmount{Amount: in, Valid: true}, n)
		}

		var n NullAmount
		err := b.conn.QueryRow(b.ctx, "SELECT $1::numeric(12,2)", mode, NullAmount{}).Scan(&n)
		require.NoError(t, err)
		require.False(t, n.Valid, "mode %v", mode)
	}
}

func TestPostgresScanIntoAmountRefusesToRound(t *testing.T) {
	t.Parallel()
	b := setupPostgres(t)

	tests := []struct {
		sql  string
		want string // "" means an error wrapping err
		err  error
	}{
		{"SELECT '1.005'::numeric", "", ErrTooManyDecimals},
		{"SELECT '10.00'::numeric(12,2) / 3", "", ErrTooManyDecimals},
		{"SELECT '0.001'::numeric", "", ErrTooManyDecimals},
		{"SELECT '1.000'::numeric", "1.00", nil},
		{"SELECT '12.3'::numeric", "12.30", nil},
		{"SELECT '100'::numeric", "100.00", nil},
		{"SELECT '-0.00'::numeric", "0.00", nil},
		{"SELECT '4.50'::numeric(12,2) * 2", "9.00", nil},
		{"SELECT '10000000000'::numeric", "", ErrOutOfRange},
		{"SELECT '-10000000000.00'::numeric", "", ErrOutOfRange},
		{"SELECT 'NaN'::numeric", "", ErrInvalid},
		{"SELECT 'Infinity'::numeric", "", ErrInvalid},
		{"SELECT NULL::numeric", "", ErrNull},
	}
	for _, mode := range []pgx.QueryExecMode{pgx.QueryExecModeCacheStatement, pgx.QueryExecModeSimpleProtocol} {
		for _, tt := range tests {
			var a Amount
			err := b.conn.QueryRow(b.ctx, tt.sql, mode).Scan(&a)
			if tt.err != nil {
				require.ErrorIs(t, err, tt.err, "mode %v: %s", mode, tt.sql)
				continue
			}
			require.NoError(t, err, "mode %v: %s", mode, tt.sql)
			require.Equal(t, tt.want, a.String(), "mode %v: %s", mode, tt.sql)
		}
	}
}

func TestPostgresTemporaryTableStoresAndSumsAmountsExactly(t *testing.T) {
	t.Parallel()
	b := setupPostgres(t)

	_, err := b.conn.Exec(b.ctx, "CREATE TEMPORARY TABLE money_test (amount numeric(12,2) NOT NULL, refunded numeric(12,2))")
	require.NoError(t, err)

	rows := []struct {
		amount   Amount
		refunded NullAmount
	}{
		{MustParse("0.10"), NullAmount{}},
		{MustParse("0.20"), NullAmount{Amount: MustParse("0.05"), Valid: true}},
		{MustParse("9999999999.99"), NullAmount{}},
		{MustParse("-9999999999.99"), NullAmount{Amount: MustParse("-0.01"), Valid: true}},
	}
	want := make([]Amount, 0, len(rows))
	for _, r := range rows {
		_, err := b.conn.Exec(b.ctx, "INSERT INTO money_test (amount, refunded) VALUES ($1, $2)", r.amount, r.refunded)
		require.NoError(t, err)
		want = append(want, r.amount)
	}

	var total Amount
	var refunded NullAmount
	require.NoError(t, b.conn.QueryRow(b.ctx, "SELECT sum(amount), sum(refunded) FROM money_test").Scan(&total, &refunded))
	wantTotal, err := Sum(want...)
	require.NoError(t, err)
	require.Equal(t, wantTotal, total)
	require.Equal(t, "0.30", total.String())
	require.Equal(t, NullAmount{Amount: MustParse("0.04"), Valid: true}, refunded)

	got, err := pgx.CollectRows(mustQuery(t, b, "SELECT amount FROM money_test ORDER BY amount"), pgx.RowTo[Amount])
	require.NoError(t, err)
	require.Equal(t, []Amount{MustParse("-9999999999.99"), MustParse("0.10"), MustParse("0.20"), MustParse("9999999999.99")}, got)

	// The column would silently round 1.005 to 1.01; an Amount can never carry it there.
	_, err = Parse("1.005")
	require.ErrorIs(t, err, ErrTooManyDecimals)
}

func mustQuery(t *testing.T, b *pgBundle, sql string) pgx.Rows {
	t.Helper()
	rows, err := b.conn.Query(b.ctx, sql)
	require.NoError(t, err)
	return rows
}
