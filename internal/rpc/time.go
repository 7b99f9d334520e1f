package rpc

import (
	"time"

	"github.com/rustbill/paymentd/internal/apperr"
)

// The range of times the service accepts from a client: EarliestTime
// included, LatestTime excluded, compared after conversion to UTC. Every
// time a request carries (an end, an expiry, a due time, a filter's bound)
// and every time a gateway reports is checked against it, so what the
// service stores it can also encode: PostgreSQL's timestamptz holds years
// 4713 BC to 294276 AD, but encoding/json (the audit log's before and
// after) and RFC 3339 stop at 9999-12-31T23:59:59Z in UTC, and an
// offset moves a time written as year 9999 into year 10000
// ("9999-12-31T23:59:59-23:59" is 10000-01-01T23:58:59Z). LatestTime
// leaves a year below that limit for the service's own arithmetic on a
// stored time (a yearly period's next end, a day added to a range's last
// day). Nothing the service records predates EarliestTime.
var (
	EarliestTime = time.Date(1970, 1, 1, 0, 0, 0, 0, time.UTC)
	LatestTime   = time.Date(9999, 1, 1, 0, 0, 0, 0, time.UTC)
)

// MaxAheadYears bounds an end or an expiry an admin sets (a key's
// expires_at, a period's ends_at, an invoice's due_at): more than this
// many years after now is a slip of the keyboard (2125 for 2025), never
// meant, and refused by CheckAhead.
const MaxAheadYears = 10

// Rule ids of the violations the checks below answer, as a program reads
// them in the buf.validate.Violations detail.
const (
	RuleTimeFormat = "paymentd.time_format"
	RuleTimeRange  = "paymentd.time_range"
	RuleTimeAhead  = "paymentd.time_ahead"
)

// ParseTime reads a request field's RFC 3339 time (fractional seconds and
// any offset allowed) and checks it with CheckTime. The answer is in UTC.
func ParseTime(field, s string) (time.Time, error) {
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return time.Time{}, apperr.Field(field, RuleTimeFormat, "%q is not an RFC 3339 time such as 2026-12-31T00:00:00Z", s)
	}
	if err := CheckTime(field, t); err != nil {
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

// CheckTime refuses a time outside [EarliestTime, LatestTime) in UTC, as
// InvalidArgument naming field.
func CheckTime(field string, t time.Time) error {
	if InRange(t) {
		return nil
	}
	sent := t.Format(time.RFC3339Nano)
	if _, offset := t.Zone(); offset != 0 {
		sent += " (" + t.UTC().Format(time.RFC3339Nano) + " in UTC)"
	}
	return apperr.Field(field, RuleTimeRange, "%s is outside the accepted range %s to %s (UTC, end excluded)",
		sent, EarliestTime.Format(time.RFC3339), LatestTime.Format(time.RFC3339))
}

// InRange reports whether t lies in [EarliestTime, LatestTime).
func InRange(t time.Time) bool {
	return !t.Before(EarliestTime) && t.Before(LatestTime)
}

// CheckDate is CheckTime for a calendar date (a day of a range in some
// time zone): the date itself must lie in the range, 1970-01-01 to
// 9998-12-31, whatever the zone's offset makes of its midnight (the range's
// margin absorbs that).
func CheckDate(field string, d time.Time) error {
	y, m, day := d.Date()
	if InRange(time.Date(y, m, day, 0, 0, 0, 0, time.UTC)) {
		return nil
	}
	return apperr.Field(field, RuleTimeRange, "%s is outside the accepted range %s to %s",
		d.Format(time.DateOnly), EarliestTime.Format(time.DateOnly), LatestTime.AddDate(0, 0, -1).Format(time.DateOnly))
}

// CheckAhead refuses an end or an expiry more than MaxAheadYears after
// now, as InvalidArgument naming field. now is the caller's clock (the
// billing clock for a period's end), so the bound moves with it.
func CheckAhead(field string, t, now time.Time) error {
	limit := now.UTC().AddDate(MaxAheadYears, 0, 0)
	if !t.After(limit) {
		return nil
	}
	return apperr.Field(field, RuleTimeAhead, "%s is more than %d years ahead (after %s)",
		t.UTC().Format(time.RFC3339), MaxAheadYears, limit.Format(time.RFC3339))
}
