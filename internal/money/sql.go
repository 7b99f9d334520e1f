package money

import (
	"database/sql"
	"database/sql/driver"
	"fmt"
	"math/big"

	"github.com/cockroachdb/apd/v3"
	"github.com/jackc/pgx/v5/pgtype"
)

// Amount and NullAmount map to PostgreSQL NUMERIC natively in pgx v5 (binary
// protocol, no text round trip) and through database/sql.
var (
	_ pgtype.NumericScanner = (*Amount)(nil)
	_ pgtype.NumericValuer  = Amount{}
	_ sql.Scanner           = (*Amount)(nil)
	_ driver.Valuer         = Amount{}

	_ pgtype.NumericScanner = (*NullAmount)(nil)
	_ pgtype.NumericValuer  = NullAmount{}
	_ sql.Scanner           = (*NullAmount)(nil)
	_ driver.Valuer         = NullAmount{}
)

// NumericValue implements pgtype.NumericValuer: a is sent as cents·10^-2, which
// PostgreSQL stores in NUMERIC(12,2) without rounding.
func (a Amount) NumericValue() (pgtype.Numeric, error) {
	return pgtype.Numeric{Int: big.NewInt(a.cents), Exp: -2, Valid: true}, nil
}

// ScanNumeric implements pgtype.NumericScanner. NULL fails with ErrNull, NaN and
// infinities with ErrInvalid, a non-zero digit beyond the second decimal (a
// computed 1.005) with ErrTooManyDecimals, and values beyond NUMERIC(12,2) with
// ErrOutOfRange: nothing is rounded. On error a is left unchanged.
func (a *Amount) ScanNumeric(v pgtype.Numeric) error {
	if !v.Valid {
		return fmt.Errorf("%w: cannot scan NULL into money.Amount (use NullAmount)", ErrNull)
	}
	if v.NaN {
		return newInputError("NaN", ErrInvalid)
	}
	if v.InfinityModifier != pgtype.Finite {
		return newInputError(v.InfinityModifier.String(), ErrInvalid)
	}
	if v.Int == nil {
		*a = Amount{}
		return nil
	}
	var coeff apd.BigInt
	coeff.SetMathBigInt(v.Int)
	got, err := FromDecimal(apd.NewWithBigInt(&coeff, v.Exp))
	if err != nil {
		return err
	}
	*a = got
	return nil
}

// Value implements driver.Valuer: the two-decimal string, which PostgreSQL
// casts to NUMERIC exactly.
func (a Amount) Value() (driver.Value, error) {
	return a.String(), nil
}

// Scan implements sql.Scanner. database/sql drivers, pgx's stdlib among them,
// hand NUMERIC over as text; that text may carry trailing zeros beyond the second
// decimal ("1.000"), which are accepted, while any other deviation from a plain
// decimal is refused as in ScanNumeric. An int64 is taken as whole units. A float
// is refused: it may already have lost the cent. NULL fails with ErrNull. On
// error a is left unchanged.
func (a *Amount) Scan(src any) error {
	var (
		c   int64
		err error
	)
	switch v := src.(type) {
	case nil:
		return fmt.Errorf("%w: cannot scan NULL into money.Amount (use NullAmount)", ErrNull)
	case string:
		c, err = parseCents(v, true)
	case []byte:
		c, err = parseCents(string(v), true)
	case int64:
		if v > maxCents/100 || v < -maxCents/100 {
			return fmt.Errorf("%w: %d", ErrOutOfRange, v)
		}
		c = v * 100
	default:
		return fmt.Errorf("%w: cannot scan %T into money.Amount", ErrInvalid, src)
	}
	if err != nil {
		return err
	}
	*a = Amount{cents: c}
	return nil
}

// NullAmount is an Amount that may be NULL, for nullable NUMERIC(12,2) columns
// and optional JSON fields. Valid is false for NULL / null.
type NullAmount struct {
	Amount Amount
	Valid  bool
}

// NumericValue implements pgtype.NumericValuer; an invalid NullAmount is NULL.
func (n NullAmount) NumericValue() (pgtype.Numeric, error) {
	if !n.Valid {
		return pgtype.Numeric{}, nil
	}
	return n.Amount.NumericValue()
}

// ScanNumeric implements pgtype.NumericScanner with the rules of
// Amount.ScanNumeric, except that NULL sets Valid to false.
func (n *NullAmount) ScanNumeric(v pgtype.Numeric) error {
	if !v.Valid {
		*n = NullAmount{}
		return nil
	}
	var a Amount
	if err := a.ScanNumeric(v); err != nil {
		return err
	}
	*n = NullAmount{Amount: a, Valid: true}
	return nil
}

// Value implements driver.Valuer; an invalid NullAmount is NULL.
func (n NullAmount) Value() (driver.Value, error) {
	if !n.Valid {
		return nil, nil
	}
	return n.Amount.Value()
}

// Scan implements sql.Scanner with the rules of Amount.Scan, except that NULL
// sets Valid to false.
func (n *NullAmount) Scan(src any) error {
	if src == nil {
		*n = NullAmount{}
		return nil
	}
	var a Amount
	if err := a.Scan(src); err != nil {
		return err
	}
	*n = NullAmount{Amount: a, Valid: true}
	return nil
}
