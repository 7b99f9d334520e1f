package rpc

import (
	"time"

	"github.com/rustbill/paymentd/internal/apperr"
	"github.com/rustbill/paymentd/internal/timerange"
)

// RuleTimeFormat is the rule id of a request's time that is no RFC 3339
// time, as a program reads it in the buf.validate.Violations detail (the
// range's own are timerange.RuleRange and RuleAhead).
const RuleTimeFormat = "paymentd.time_format"

// ParseTime reads a request field's RFC 3339 time (fractional seconds and
// any offset allowed) and checks it against the range the service accepts
// (timerange.Check). The answer is in UTC.
func ParseTime(field, s string) (time.Time, error) {
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return time.Time{}, apperr.Field(field, RuleTimeFormat, "%q is not an RFC 3339 time such as 2026-12-31T00:00:00Z", s)
	}
	if err := timerange.Check(field, t); err != nil {
		return time.Time{}, err
	}
	return t.UTC(), nil
}

// OptionalTime is ParseTime for a field where "" means absent: nil.
func OptionalTime(field, s string) (*time.Time, error) {
	if s == "" {
		return nil, nil
	}
	t, err := ParseTime(field, s)
	if err != nil {
		return nil, err
	}
	return &t, nil
}
