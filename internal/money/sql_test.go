package money

import (
	"math/big"
	"testing"

	"github.com/jackc/pgx/v5/pgtype"
	"github.com/stretchr/testify/require"
)

func TestNumericValueIsCentsAtScaleTwo(t *testing.T) {
	t.Parallel()

	n, err := MustParse("-12.3").NumericValue()
	require.NoError(t, err)
	require.Equal(t, pgtype.Numeric{Int: big.NewInt(-1230), Exp: -2, Valid: true}, n)

	n, err = NullAmount{}.NumericValue()
	require.NoError(t, err)
	require.False(t, n.Valid)
}

func TestScanNumericIsExactOrFails(t *testing.T) {
	t.Parallel()

	num := func(i int64, exp int32) pgtype.Numeric {
		return pgtype.Numeric{Int: big.NewInt(i), Exp: exp, Valid: true}
	}
	tests := []struct {
		name string
		in   pgtype.Numeric
		want string
		err  error
	}{
		{"scale two", num(1230, -2), "12.30", nil},
		{"trailing zeros", num(1000, -3), "1.00", nil},
		{"integer with reduced zeros", num(1, 2), "100.00", nil},
		{"nil int is zero", pgtype.Numeric{Valid: true}, "0.00", nil},
		{"negative", num(-5, 0), "-5.00", nil},
		{"max", num(999999999999, -2), "9999999999.99", nil},
		{"min", num(-999999999999, -2), "-9999999999.99", nil},
		{"half cent", num(1005, -3), "", ErrTooManyDecimals},
		{"tiny", num(1, -30), "", ErrTooManyDecimals},
		{"too big", num(1, 10), "", ErrOutOfRange},
		{"too small", num(-1000000000000, -2), "", ErrOutOfRange},
		{"NULL", pgtype.Numeric{}, "", ErrNull},
		{"NaN", pgtype.Numeric{NaN: true, Valid: true}, "", ErrInvalid},
		{"infinity", pgtype.Numeric{InfinityModifier: pgtype.Infinity, Valid: true}, "", ErrInvalid},
		{"negative infinity", pgtype.Numeric{InfinityModifier: pgtype.NegativeInfinity, Valid: true}, "", ErrInvalid},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()

			a := MustParse("7.77")
			err := a.ScanNumeric(tt.in)
			if tt.err != nil {
				require.ErrorIs(t, err, tt.err)
				require.Equal(t, "7.77", a.String(), "a failed scan leaves the value alone")
				return
			}
			require.NoError(t, err)
			require.Equal(t, tt.want, a.String())
		})
	}
}

func TestNullAmountScanNumericTurnsNullIntoInvalid(t *testing.T) {
	t.Parallel()

	n := NullAmount{Amount: MustParse("1"), Valid: true}
	require.NoError(t, n.ScanNumeric(pgtype.Numeric{}))
	require.Equal(t, NullAmount{}, n)

	require.NoError(t, n.ScanNumeric(pgtype.Numeric{Int: big.NewInt(5), Exp: -1, Valid: true}))
	require.Equal(t, NullAmount{Amount: MustParse("0.5"), Valid: true}, n)

	require.ErrorIs(t, n.ScanNumeric(pgtype.Numeric{Int: big.NewInt(5), Exp: -3, Valid: true}), ErrTooManyDecimals)
}

func TestSQLScanAcceptsNumericTextAndRefusesFloats(t *testing.T) {
	t.Parallel()

	tests := []struct {
		in   any
		want string
		err  error
	}{
		{"12.30", "12.30", nil},
		{[]byte("-0.50"), "-0.50", nil},
		{"1.000", "1.00", nil},
		{"0.0000000", "0.00", nil},
		{int64(42), "42.00", nil},
		{int64(-9999999999), "-9999999999.00", nil},
		{int64(10000000000), "", ErrOutOfRange},
		{"1.005", "", ErrTooManyDecimals},
		{"1.0001", "", ErrTooManyDecimals},
		{"10000000000.00", "", ErrOutOfRange},
		{"NaN", "", ErrInvalid},
		{"Infinity", "", ErrInvalid},
		{"1e3", "", ErrInvalid},
		{" 1", "", ErrInvalid},
		{float64(1.5), "", ErrInvalid},
		{true, "", ErrInvalid},
		{nil, "", ErrNull},
	}
	for _, tt := range tests {
		a := MustParse("7.77")
		err := a.Scan(tt.in)
		if tt.err != nil {
			require.ErrorIs(t, err, tt.err, "%#v", tt.in)
			require.Equal(t, "7.77", a.String())
			continue
		}
		require.NoError(t, err, "%#v", tt.in)
		require.Equal(t, tt.want, a.String(), "%#v", tt.in)
	}
}

func TestSQLValueIsTheTwoDecimalString(t *testing.T) {
	t.Parallel()

	v, err := MustParse("12.3").Value()
	require.NoError(t, err)
	require.Equal(t, "12.30", v)

	v, err = NullAmount{Amount: MustParse("-1"), Valid: true}.Value()
	require.NoError(t, err)
	require.Equal(t, "-1.00", v)

	v, err = NullAmount{}.Value()
	require.NoError(t, err)
	require.Nil(t, v)

	var n NullAmount
	require.NoError(t, n.Scan(nil))
	require.False(t, n.Valid)
	require.NoError(t, n.Scan("3.10"))
	require.Equal(t, NullAmount{Amount: MustParse("3.1"), Valid: true}, n)
	require.ErrorIs(t, n.Scan(float64(3.1)), ErrInvalid)
}
