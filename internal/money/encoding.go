package money

import (
	"encoding"
	"encoding/json"
	"fmt"
)

var (
	_ encoding.TextMarshaler   = Amount{}
	_ encoding.TextUnmarshaler = (*Amount)(nil)
	_ encoding.TextAppender    = Amount{}
	_ json.Marshaler           = Amount{}
	_ json.Unmarshaler         = (*Amount)(nil)
	_ json.Marshaler           = NullAmount{}
	_ json.Unmarshaler         = (*NullAmount)(nil)
)

// MarshalText implements encoding.TextMarshaler with String's format.
func (a Amount) MarshalText() ([]byte, error) {
	return a.appendTo(make([]byte, 0, 16)), nil
}

// UnmarshalText implements encoding.TextUnmarshaler with Parse's rules.
func (a *Amount) UnmarshalText(text []byte) error {
	got, err := Parse(string(text))
	if err != nil {
		return err
	}
	*a = got
	return nil
}

// MarshalJSON encodes a as a JSON string: "12.30". A string, not a number, so
// that no JSON reader on the way turns it into a float.
func (a Amount) MarshalJSON() ([]byte, error) {
	b := make([]byte, 0, 18)
	b = append(b, '"')
	b = a.appendTo(b)
	return append(b, '"'), nil
}

// UnmarshalJSON accepts a JSON string holding a plain decimal ("12.30") and,
// for producers that emit numbers, a JSON number whose text is a plain decimal
// (12.3). The number's text is parsed as is, never through float64, so 1.234
// and 1e3 are rejected just as the strings would be. null fails with ErrNull;
// use NullAmount for optional amounts.
func (a *Amount) UnmarshalJSON(data []byte) error {
	if string(data) == "null" {
		return fmt.Errorf("%w: JSON null for money.Amount (use NullAmount)", ErrNull)
	}
	text := string(data)
	if len(data) > 0 && data[0] == '"' {
		if err := json.Unmarshal(data, &text); err != nil {
			return fmt.Errorf("%w: %w", ErrInvalid, err)
		}
	}
	got, err := Parse(text)
	if err != nil {
		return err
	}
	*a = got
	return nil
}

// MarshalJSON encodes an invalid NullAmount as null and a valid one as Amount does.
func (n NullAmount) MarshalJSON() ([]byte, error) {
	if !n.Valid {
		return []byte("null"), nil
	}
	return n.Amount.MarshalJSON()
}

// UnmarshalJSON turns null into an invalid NullAmount and anything else into a
// valid one, with Amount's rules.
func (n *NullAmount) UnmarshalJSON(data []byte) error {
	if string(data) == "null" {
		*n = NullAmount{}
		return nil
	}
	var a Amount
	if err := a.UnmarshalJSON(data); err != nil {
		return err
	}
	*n = NullAmount{Amount: a, Valid: true}
	return nil
}
