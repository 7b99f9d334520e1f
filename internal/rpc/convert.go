package rpc

import (
	"time"

	"github.com/google/uuid"

	"github.com/rustbill/paymentd/internal/apperr"
	"github.com/rustbill/paymentd/internal/money"
)

// ParseID parses a UUID field the validator has already checked; checking
// again keeps a handler safe if a rule is ever loosened.
func ParseID(s, field string) (uuid.UUID, error) {
	id, err := uuid.Parse(s)
	if err != nil {
		return uuid.Nil, apperr.New(apperr.InvalidArgument, "%s must be a UUID", field)
	}
	return id, nil
}

// OptionalID parses an optional UUID field; nil stays nil.
func OptionalID(s *string, field string) (*uuid.UUID, error) {
	if s == nil {
		return nil, nil
	}
	id, err := ParseID(*s, field)
	if err != nil {
		return nil, err
	}
	return &id, nil
}

// IDOrNil parses a UUID field where "" means absent (a proto3 string
// without presence); "" is nil.
func IDOrNil(s, field string) (*uuid.UUID, error) {
	if s == "" {
		return nil, nil
	}
	id, err := ParseID(s, field)
	if err != nil {
		return nil, err
	}
	return &id, nil
}

// IDString is the wire form of an optional id: "" when absent.
func IDString(id *uuid.UUID) string {
	if id == nil {
		return ""
	}
	return id.String()
}

// Time is the wire form of a timestamp: RFC 3339 in UTC, "" when zero.
func Time(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format(time.RFC3339Nano)
}

// TimePtr is Time for an optional timestamp ("" when nil, e.g. paid_at
// while unpaid).
func TimePtr(t *time.Time) string {
	if t == nil {
		return ""
	}
	return Time(*t)
}

// NullMoney is the wire form of an optional amount: two decimals, "" when
// NULL (an order's renewal_price when it is one_time).
func NullMoney(n money.NullAmount) string {
	if !n.Valid {
		return ""
	}
	return n.Amount.String()
}
