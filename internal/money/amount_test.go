package money

import (
	"math"
	"sync"
	"testing"

	"github.com/cockroachdb/apd/v3"
	"github.com/stretchr/testify/require"
)

func TestStringAlwaysHasTwoDecimals(t *testing.T) {
	t.Parallel()

	tests := []struct {
		cents int64
		want  string
	}{
		{0, "0.00"},
		{1, "0.01"},
		{-1, "-0.01"},
		{10, "0.10"},
		{99, "0.99"},
		{100, "1.00"},
		{1230, "12.30"},
		{-500, "-5.00"},
		{-505, "-5.05"},
		{999_999_999_999, "9999999999.99"},
		{-999_999_999_999, "-9999999999.99"},
	}
	for _, tt := range tests {
		a, err := FromCents(tt.cents)
		require.NoError(t, err)
		require.Equal(t, tt.want, a.String())
		b, err := a.AppendText([]byte("x="))
		require.NoError(t, err)
		require.Equal(t, "x="+tt.want, string(b))
	}
}

func TestZeroValueIsZero(t *testing.T) {
	t.Parallel()

	var a Amount
	require.Equal(t, "0.00", a.String())
	require.True(t, a.IsZero())
	require.Equal(t, 0, a.Sign())
	require.Equal(t, Zero(), a)
	require.True(t, a == MustParse("0.00"), "== compares values")
	require.True(t, a == MustParse("-0"), "negative zero is zero")
	require.Equal(t, "0.00", MustParse("-0").Neg().String(), "never -0.00")
	require.Equal(t, "0.00", Zero().Neg().String())
}

func TestFromCentsRejectsValuesBeyondNumeric12_2(t *testing.T) {
	t.Parallel()

	for _, c := range []int64{1_000_000_000_000, -1_000_000_000_000, 1 << 62, -1 << 63} {
		_, err := FromCents(c)
		require.ErrorIs(t, err, ErrOutOfRange, c)
	}
	a, err := FromCents(-999_999_999_999)
	require.NoError(t, err)
	require.Equal(t, int64(-999_999_999_999), a.Cents())
}

func TestAddAndSubAreExact(t *testing.T) {
	t.Parallel()

	tests := []struct {
		a, b      string
		sum, diff string
	}{
		{"0.10", "0.20", "0.30", "-0.10"},
		{"0.1", "0.2", "0.30", "-0.10"},
		{"12.30", "-12.30", "0.00", "24.60"},
		{"-5", "-5", "-10.00", "0.00"},
		{"0", "0", "0.00", "0.00"},
		{"9999999999.98", "0.01", "9999999999.99", "9999999999.97"},
		{"-9999999999.98", "-0.01", "-9999999999.99", "-9999999999.97"},
		// A difference may reach either end of the range exactly.
		{"-9999999999.98", "0.01", "-9999999999.97", "-9999999999.99"},
		{"9999999999.98", "-0.01", "9999999999.97", "9999999999.99"},
		{"9999999999.99", "9999999999.99", "", "0.00"},
		{"-9999999999.99", "9999999999.99", "0.00", ""},
	}
	for _, tt := range tests {
		a, b := MustParse(tt.a), MustParse(tt.b)

		sum, err := a.Add(b)
		if tt.sum == "" {
			require.ErrorIs(t, err, ErrOutOfRange, "%s + %s", tt.a, tt.b)
		} else {
			require.NoError(t, err)
			require.Equal(t, tt.sum, sum.String(), "%s + %s", tt.a, tt.b)
		}

		diff, err := a.Sub(b)
		if tt.diff == "" {
			require.ErrorIs(t, err, ErrOutOfRange, "%s - %s", tt.a, tt.b)
		} else {
			require.NoError(t, err)
			require.Equal(t, tt.diff, diff.String(), "%s - %s", tt.a, tt.b)
		}
	}
}

func TestAddAndSubFailJustPastTheRange(t *testing.T) {
	t.Parallel()

	maxA, minA := MustParse("9999999999.99"), MustParse("-9999999999.99")
	cent := MustParse("0.01")

	_, err := maxA.Add(cent)
	require.ErrorIs(t, err, ErrOutOfRange)
	require.EqualError(t, err, "money: out of NUMERIC(12,2) range: 9999999999.99 + 0.01")

	_, err = minA.Sub(cent)
	require.ErrorIs(t, err, ErrOutOfRange)
	require.EqualError(t, err, "money: out of NUMERIC(12,2) range: -9999999999.99 - 0.01")

	_, err = minA.Add(cent.Neg())
	require.ErrorIs(t, err, ErrOutOfRange)

	_, err = maxA.Sub(cent.Neg())
	require.ErrorIs(t, err, ErrOutOfRange)

	got, err := maxA.Add(minA)
	require.NoError(t, err)
	require.True(t, got.IsZero())
}

func TestNegFlipsTheSign(t *testing.T) {
	t.Parallel()

	require.Equal(t, "-12.30", MustParse("12.30").Neg().String())
	require.Equal(t, "12.30", MustParse("-12.30").Neg().String())
	require.Equal(t, "-9999999999.99", MustParse("9999999999.99").Neg().String())
}

func TestCmpOrdersByValue(t *testing.T) {
	t.Parallel()

	tests := []struct {
		a, b string
		want int
	}{
		{"0", "0.00", 0},
		{"0", "-0", 0},
		{"1.5", "1.50", 0},
		{"0.01", "0", 1},
		{"0", "0.01", -1},
		{"-0.01", "0", -1},
		{"-1", "-2", 1},
		{"10", "9.99", 1},
		{"9999999999.99", "-9999999999.99", 1},
		{"-9999999999.99", "9999999999.99", -1},
	}
	for _, tt := range tests {
		a, b := MustParse(tt.a), MustParse(tt.b)
		require.Equal(t, tt.want, a.Cmp(b), "cmp(%s, %s)", tt.a, tt.b)
		require.Equal(t, -tt.want, b.Cmp(a), "cmp(%s, %s)", tt.b, tt.a)
		require.Equal(t, tt.want == 0, a.Equal(b))
		require.Equal(t, tt.want == 0, a == b)
	}
}

func TestSignAndIsZero(t *testing.T) {
	t.Parallel()

	require.Equal(t, 1, MustParse("0.01").Sign())
	require.Equal(t, -1, MustParse("-0.01").Sign())
	require.Equal(t, 0, MustParse("-0.00").Sign())
	require.True(t, MustParse("0.00").IsZero())
	require.False(t, MustParse("0.01").IsZero())
}

func TestSumChecksOnlyTheTotal(t *testing.T) {
	t.Parallel()

	tests := []struct {
		name string
		xs   []string
		want string // "" means ErrOutOfRange
	}{
		{"none", nil, "0.00"},
		{"one", []string{"1.23"}, "1.23"},
		{"dimes", []string{"0.1", "0.1", "0.1", "0.1", "0.1", "0.1", "0.1", "0.1", "0.1", "0.1"}, "1.00"},
		{"refunds", []string{"100.00", "-30.50", "-69.50"}, "0.00"},
		{"up to max", []string{"9999999999.98", "0.01"}, "9999999999.99"},
		{"past max", []string{"9999999999.99", "0.01"}, ""},
		{"past min", []string{"-9999999999.99", "-0.01"}, ""},
		{"down to min", []string{"-9999999999.98", "-0.01"}, "-9999999999.99"},
		{"back into range", []string{"9999999999.99", "9999999999.99", "-9999999999.99"}, "9999999999.99"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()

			xs := make([]Amount, len(tt.xs))
			for i, s := range tt.xs {
				xs[i] = MustParse(s)
			}
			got, err := Sum(xs...)
			if tt.want == "" {
				require.ErrorIs(t, err, ErrOutOfRange)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tt.want, got.String())
		})
	}
}

func TestDecimalRoundTripsThroughApd(t *testing.T) {
	t.Parallel()

	for _, s := range []string{"0.00", "12.30", "-5.00", "9999999999.99", "-9999999999.99", "0.01"} {
		a := MustParse(s)
		d := a.Decimal()
		require.Equal(t, int32(-2), d.Exponent)
		require.Equal(t, s, d.String())

		back, err := FromDecimal(&d)
		require.NoError(t, err)
		require.Equal(t, a, back)

		// The copy is independent: changing it leaves a alone.
		d.Neg(&d)
		d.Exponent = 5
		require.Equal(t, s, a.String())
	}
}

func TestFromDecimalNeverRounds(t *testing.T) {
	t.Parallel()

	tests := []struct {
		in   string
		want string // "" means an error
		err  error
	}{
		{"1.005", "", ErrTooManyDecimals},
		{"0.001", "", ErrTooManyDecimals},
		{"1E-1000", "", ErrTooManyDecimals},
		{"1.000", "1.00", nil},
		{"1.10000000000000000000000000000000000000000000000000", "1.10", nil},
		{"-0.0000", "0.00", nil},
		{"0E+1000", "0.00", nil},
		{"12.3", "12.30", nil},
		{"1E+2", "100.00", nil},
		{"1E+9", "1000000000.00", nil},
		{"1E+10", "", ErrOutOfRange},
		{"9999999999.99", "9999999999.99", nil},
		{"-9999999999.990", "-9999999999.99", nil},
		{"10000000000.00", "", ErrOutOfRange},
		{"100000000000000000000000000000000000000000000.00", "", ErrOutOfRange},
		{"NaN", "", ErrInvalid},
		{"Infinity", "", ErrInvalid},
		{"-Infinity", "", ErrInvalid},
	}
	for _, tt := range tests {
		d, _, err := apd.NewFromString(tt.in)
		require.NoError(t, err, tt.in)

		got, err := FromDecimal(d)
		if tt.err != nil {
			require.ErrorIs(t, err, tt.err, tt.in)
			continue
		}
		require.NoError(t, err, tt.in)
		require.Equal(t, tt.want, got.String(), tt.in)
	}

	// Exponents beyond what apd parses, but a hand-built Decimal can hold.
	_, err := FromDecimal(apd.New(123, math.MinInt32))
	require.ErrorIs(t, err, ErrTooManyDecimals)
	_, err = FromDecimal(apd.New(-123, math.MaxInt32))
	require.ErrorIs(t, err, ErrOutOfRange)
	got, err := FromDecimal(apd.New(0, math.MaxInt32))
	require.NoError(t, err)
	require.True(t, got.IsZero())

	_, err = FromDecimal(nil)
	require.ErrorIs(t, err, ErrInvalid)
}

func TestAmountIsSafeToShareBetweenGoroutines(t *testing.T) {
	t.Parallel()

	shared := MustParse("12.30")
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 1000 {
				sum, err := shared.Add(shared)
				if err != nil || sum.String() != "24.60" || shared.String() != "12.30" {
					panic("shared amount changed")
				}
				d := shared.Decimal()
				d.Neg(&d)
			}
		}()
	}
	wg.Wait()
	require.Equal(t, "12.30", shared.String())
}
