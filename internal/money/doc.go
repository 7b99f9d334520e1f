// Package money holds the amounts of the payment core: PostgreSQL NUMERIC(12,2)
// values, exact to the cent, on the wire as strings with exactly two decimals.
//
// # Why not float64
//
// 0.1 + 0.2 is not 0.3 in binary floating point, and a payment system that adds
// refunds, compares them with the paid amount and writes balances cannot afford
// "almost". No float appears anywhere in this package: strings are parsed digit by
// digit, database values arrive as big integers with a decimal exponent, and
// arithmetic is integer arithmetic on cents. A float handed to Scan is refused,
// not converted.
//
// # Why exactly two decimals
//
// Every money column is NUMERIC(12,2) (docs/api.md, "Money and records").
// PostgreSQL rounds a value with more decimals when it is stored, so accepting
// "1.005" in Go would let the database invent a cent. Parse therefore rejects a
// third fractional digit (ErrTooManyDecimals) instead of rounding, and scanning
// a computed NUMERIC such as 1.005 fails the same way; trailing zeros from the
// database ("1.000") are harmless and accepted there. String always prints two
// decimals ("12.30", "0.00", "-5.00") and never "-0.00".
//
// # Why the range check
//
// NUMERIC(12,2) holds at most 10 integer digits: |v| <= 9999999999.99. Anything
// larger fails with ErrOutOfRange here, at parse time or when Add, Sub or Sum
// would leave the range, rather than as a numeric field overflow deep inside a
// transaction.
//
// # Representation
//
// The range fits comfortably in an int64 count of cents (|cents| <= 999 999 999
// 999 < 2^63), and so does any sum of two amounts, which makes integer arithmetic
// exact and cheap. Amount therefore holds its cents in an int64 rather than an
// apd.Decimal: that makes it a true value type. It is safe to copy and to share
// between goroutines (there is no hidden pointer to alias), == and map keys
// compare values, and the zero value is 0.00. apd is the bridge to decimal
// arithmetic beyond addition (Decimal, FromDecimal) and the exact route from a
// NUMERIC of any scale to cents.
//
// # Grammar
//
// Parse accepts only plain decimals, the same text PostgreSQL prints for a
// NUMERIC and a subset of the JSON number grammar:
//
//	amount  = [ "-" ] integer [ "." digit [ digit ] ]
//	integer = "0" | nonzero { digit }            ; at most 10 digits
//
// Leading zeros ("01.50") are rejected so that every amount has one spelling of
// its integer part and the JSON string and number forms agree. "-0" and "-0.00"
// are zero. Rejected: "", " 1", "1 ", "+1", ".5", "1.", "1e3", "NaN", "Inf",
// "1,00", "0x10", non-ASCII digits. Errors wrap ErrInvalid, ErrTooManyDecimals or
// ErrOutOfRange and quote the (truncated) input.
//
// # Boundaries
//
//	text / JSON  --Parse, UnmarshalText, UnmarshalJSON-->  Amount  --String, MarshalJSON-->  "12.30"
//	NUMERIC      --ScanNumeric (pgx), Scan (database/sql)-->  Amount  --NumericValue, Value-->  NUMERIC
//
// JSON: an Amount marshals as a string ("12.30"). Unmarshal accepts that string
// and also a bare JSON number whose text is a plain decimal as above (12.3, not
// 1.234 or 1e3): the number's text is parsed, never a float64. JSON null is an
// error for Amount (ErrNull) and means "no value" for NullAmount. SQL NULL is
// likewise an error for Amount; nullable columns use NullAmount.
package money
