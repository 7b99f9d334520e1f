package money

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestParseAcceptsPlainDecimals(t *testing.T) {
	t.Parallel()

	tests := []struct {
		in    string
		cents int64
		out   string
	}{
		{"0", 0, "0.00"},
		{"0.0", 0, "0.00"},
		{"0.00", 0, "0.00"},
		{"-0", 0, "0.00"},
		{"-0.00", 0, "0.00"},
		{"1", 100, "1.00"},
		{"1.5", 150, "1.50"},
		{"1.50", 150, "1.50"},
		{"12.30", 1230, "12.30"},
		{"0.01", 1, "0.01"},
		{"-0.01", -1, "-0.01"},
		{"0.1", 10, "0.10"},
		{"-5", -500, "-5.00"},
		{"-5.5", -550, "-5.50"},
		{"100", 10000, "100.00"},
		{"1000000", 100000000, "1000000.00"},
		{"9999999999", 999999999900, "9999999999.00"},
		{"9999999999.99", 999999999999, "9999999999.99"},
		{"-9999999999.99", -999999999999, "-9999999999.99"},
		{"1234567890.12", 123456789012, "1234567890.12"},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			t.Parallel()

			a, err := Parse(tt.in)
			require.NoError(t, err)
			require.Equal(t, tt.cents, a.Cents())
			require.Equal(t, tt.out, a.String())
		})
	}
}

func TestParseRejectsAnythingButAPlainDecimal(t *testing.T) {
	t.Parallel()

	tests := []struct {
		name string
		in   string
		want error
	}{
		{"empty", "", ErrInvalid},
		{"minus only", "-", ErrInvalid},
		{"leading space", " 1", ErrInvalid},
		{"trailing space", "1 ", ErrInvalid},
		{"trailing newline", "1\n", ErrInvalid},
		{"tab", "\t1", ErrInvalid},
		{"plus sign", "+1", ErrInvalid},
		{"double minus", "--1", ErrInvalid},
		{"minus after digits", "1-", ErrInvalid},
		{"no integer part", ".5", ErrInvalid},
		{"negative no integer part", "-.5", ErrInvalid},
		{"no fraction after point", "1.", ErrInvalid},
		{"point only", ".", ErrInvalid},
		{"two points", "1.2.3", ErrInvalid},
		{"exponent", "1e3", ErrInvalid},
		{"upper exponent", "1E3", ErrInvalid},
		{"exponent with fraction", "1.5e1", ErrInvalid},
		{"NaN", "NaN", ErrInvalid},
		{"nan", "nan", ErrInvalid},
		{"Inf", "Inf", ErrInvalid},
		{"Infinity", "Infinity", ErrInvalid},
		{"negative Infinity", "-Infinity", ErrInvalid},
		{"decimal comma", "1,00", ErrInvalid},
		{"thousands separator", "1,000.00", ErrInvalid},
		{"underscore", "1_000", ErrInvalid},
		{"hex", "0x10", ErrInvalid},
		{"leading zero", "01", ErrInvalid},
		{"leading zero with fraction", "01.50", ErrInvalid},
		{"double zero", "00", ErrInvalid},
		{"negative leading zero", "-01.00", ErrInvalid},
		{"arabic-indic digit", "\u0661", ErrInvalid},
		{"fullwidth digit", "\uff11.00", ErrInvalid},
		{"currency symbol", "$1.00", ErrInvalid},
		{"currency code", "1.00 EUR", ErrInvalid},
		{"NUL byte", "1\x00", ErrInvalid},
		{"invalid utf8", "1\xff", ErrInvalid},
		{"three decimals", "1.234", ErrTooManyDecimals},
		{"three decimals trailing zero", "1.230", ErrTooManyDecimals},
		{"three zero decimals", "0.000", ErrTooManyDecimals},
		{"half cent", "0.005", ErrTooManyDecimals},
		{"many decimals", "1." + strings.Repeat("1", 100), ErrTooManyDecimals},
		{"eleven integer digits", "10000000000", ErrOutOfRange},
		{"just above max", "10000000000.00", ErrOutOfRange},
		{"just below min", "-10000000000.00", ErrOutOfRange},
		{"huge", strings.Repeat("9", 1000), ErrOutOfRange},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()

			a, err := Parse(tt.in)
			require.ErrorIs(t, err, tt.want)
			require.Equal(t, Amount{}, a)
			for _, other := range []error{ErrInvalid, ErrTooManyDecimals, ErrOutOfRange} {
				if other != tt.want {
					require.NotErrorIs(t, err, other)
				}
			}
		})
	}
}

func TestParseErrorQuotesTruncatedInput(t *testing.T) {
	t.Parallel()

	_, err := Parse("1e3")
	require.EqualError(t, err, `money: not a plain decimal: "1e3"`)

	_, err = Parse(" 1")
	require.EqualError(t, err, `money: not a plain decimal: " 1"`)

	long := strings.Repeat("x", 10_000)
	_, err = Parse(long)
	require.ErrorIs(t, err, ErrInvalid)
	require.Less(t, len(err.Error()), 100)
	require.Contains(t, err.Error(), "…")

	// A multi-byte rune straddling the cut is dropped whole, not split.
	_, err = Parse(strings.Repeat("a", maxQuoted-1) + "é" + "tail")
	require.Equal(t, `money: not a plain decimal: "`+strings.Repeat("a", maxQuoted-1)+`…"`, err.Error())
}

func TestParseNonNegativeRejectsNegativesButNotNegativeZero(t *testing.T) {
	t.Parallel()

	for _, in := range []string{"0", "-0", "-0.00", "0.01", "9999999999.99"} {
		a, err := ParseNonNegative(in)
		require.NoError(t, err, in)
		require.GreaterOrEqual(t, a.Sign(), 0, in)
	}

	_, err := ParseNonNegative("-0.01")
	require.ErrorIs(t, err, ErrNegative)
	require.EqualError(t, err, `money: negative amount: "-0.01"`)

	_, err = ParseNonNegative("-1e3")
	require.ErrorIs(t, err, ErrInvalid, "syntax is checked before the sign")
	require.NotErrorIs(t, err, ErrNegative)
}

func TestParsePositiveRequiresMoreThanZero(t *testing.T) {
	t.Parallel()

	a, err := ParsePositive("0.01")
	require.NoError(t, err)
	require.Equal(t, int64(1), a.Cents())

	for _, in := range []string{"0", "-0", "0.00", "-0.00"} {
		_, err := ParsePositive(in)
		require.ErrorIs(t, err, ErrNotPositive, in)
		require.NotErrorIs(t, err, ErrNegative, in)
	}

	_, err = ParsePositive("-1")
	require.ErrorIs(t, err, ErrNotPositive)
	require.ErrorIs(t, err, ErrNegative)
	require.EqualError(t, err, `money: amount must be greater than zero: "-1"`)

	_, err = ParsePositive("1.001")
	require.ErrorIs(t, err, ErrTooManyDecimals)
}

func TestMustParsePanicsOnInvalidInput(t *testing.T) {
	t.Parallel()

	require.Equal(t, "12.30", MustParse("12.3").String())
	require.PanicsWithError(t, `money: not a plain decimal: "abc"`, func() { MustParse("abc") })
}
