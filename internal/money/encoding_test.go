package money

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestTextRoundTripUsesParseRules(t *testing.T) {
	t.Parallel()

	b, err := MustParse("-5").MarshalText()
	require.NoError(t, err)
	require.Equal(t, "-5.00", string(b))

	var a Amount
	require.NoError(t, a.UnmarshalText([]byte("12.3")))
	require.Equal(t, "12.30", a.String())

	require.ErrorIs(t, a.UnmarshalText([]byte("1.234")), ErrTooManyDecimals)
	require.ErrorIs(t, a.UnmarshalText([]byte(" 1")), ErrInvalid)
	require.Equal(t, "12.30", a.String(), "a failed unmarshal leaves the value alone")
}

func TestJSONMarshalsAsATwoDecimalString(t *testing.T) {
	t.Parallel()

	type payload struct {
		Amount   Amount     `json:"amount"`
		Refunded NullAmount `json:"refunded"`
		Credit   NullAmount `json:"credit"`
	}
	b, err := json.Marshal(payload{
		Amount:   MustParse("12.3"),
		Refunded: NullAmount{Amount: MustParse("-0.5"), Valid: true},
	})
	require.NoError(t, err)
	require.JSONEq(t, `{"amount":"12.30","refunded":"-0.50","credit":null}`, string(b))
	require.Contains(t, string(b), `"amount":"12.30"`)

	// As a map key, through encoding.TextMarshaler.
	b, err = json.Marshal(map[Amount]int{MustParse("1"): 2})
	require.NoError(t, err)
	require.Equal(t, `{"1.00":2}`, string(b))
}

func TestJSONUnmarshalAcceptsStringsAndPlainNumbers(t *testing.T) {
	t.Parallel()

	tests := []struct {
		in   string
		want string
	}{
		{`"12.30"`, "12.30"},
		{`"12.3"`, "12.30"},
		{`"-0"`, "0.00"},
		{`"\u0031.00"`, "1.00"}, // JSON escapes are decoded first
		{`12.3`, "12.30"},
		{`-5`, "-5.00"},
		{`0.01`, "0.01"},
		{`9999999999.99`, "9999999999.99"},
	}
	for _, tt := range tests {
		var a Amount
		require.NoError(t, json.Unmarshal([]byte(tt.in), &a), tt.in)
		require.Equal(t, tt.want, a.String(), tt.in)
	}
}

func TestJSONUnmarshalRejectsWhatParseRejects(t *testing.T) {
	t.Parallel()

	tests := []struct {
		in   string
		want error
	}{
		{`1.234`, ErrTooManyDecimals},
		{`"1.234"`, ErrTooManyDecimals},
		{`1.230`, ErrTooManyDecimals},
		{`1e3`, ErrInvalid},
		{`1E-2`, ErrInvalid},
		{`"1e3"`, ErrInvalid},
		{`"NaN"`, ErrInvalid},
		{`" 1"`, ErrInvalid},
		{`""`, ErrInvalid},
		{`true`, ErrInvalid},
		{`{}`, ErrInvalid},
		{`["1"]`, ErrInvalid},
		{`10000000000`, ErrOutOfRange},
		{`"-10000000000.00"`, ErrOutOfRange},
		{`null`, ErrNull},
	}
	for _, tt := range tests {
		var a Amount
		err := a.UnmarshalJSON([]byte(tt.in))
		require.ErrorIs(t, err, tt.want, tt.in)

		var p struct{ A Amount }
		err = json.Unmarshal([]byte(`{"A":`+tt.in+`}`), &p)
		require.ErrorIs(t, err, tt.want, tt.in)
	}
}

func TestNullAmountJSONMapsNullToInvalid(t *testing.T) {
	t.Parallel()

	var n NullAmount
	require.NoError(t, json.Unmarshal([]byte(`"1.50"`), &n))
	require.Equal(t, NullAmount{Amount: MustParse("1.5"), Valid: true}, n)

	require.NoError(t, json.Unmarshal([]byte(`null`), &n))
	require.Equal(t, NullAmount{}, n)

	require.ErrorIs(t, json.Unmarshal([]byte(`"1.505"`), &n), ErrTooManyDecimals)

	b, err := json.Marshal(NullAmount{})
	require.NoError(t, err)
	require.Equal(t, "null", string(b))
}
