package timerange

import (
	"time"

	"github.com/rustbill/paymentd/internal/apperr"
)

// The range of times the service accepts from a client: Earliest
// included, Latest excluded, compared after conversion to UTC. What the
// service stores it can then also encode: PostgreSQL's timestamptz holds
// years 4713 BC to 294276 AD, but encoding/json (the audit log's before and
// after) and RFC 3339 stop at 9999-12-31T23:59:59Z in UTC, and an offset
// moves a time written as year 9999 into year 10000
// ("9999-12-31T23:59:59-23:59" is 10000-01-01T23:58:59Z). Latest leaves a
// year below that limit for the service's own arithmetic on a stored time
// (a yearly period's next end, a day added to a range's last day). Nothing
// the service records predates Earliest.
var (
	Earliest = time.Date(1970, 1, 1, 0, 0, 0, 0, time.UTC)
	Latest   = time.Date(9999, 1, 1, 0, 0, 0, 0, time.UTC)
)

// MaxAheadYears bounds an end or an expiry an admin sets (a key's
// expires_at, a period's ends_at, an invoice's due_at): more than this
// many years after now is a slip of the keyboard (2125 for 2025), never
// meant, and refused by CheckAhead.
const MaxAheadYears = 10

// Rule ids of the violations the checks below answer, as a program reads
// them in the buf.validate.Violations detail the transport attaches.
const (
	RuleRange = "paymentd.time_range"
	RuleAhead = "paymentd.time_ahead"
)

// Check refuses a time outside [Earliest, Latest) in UTC, as
// InvalidArgument naming field.
func Check(field string, t time.Time) error {
	if Contains(t) {
		return nil
	}
	sent := t.Format(time.RFC3339Nano)
	if _, offset := t.Zone(); offset != 0 {
		sent += " (" + t.UTC().Format(time.RFC3339Nano) + " in UTC)"
	}
	return apperr.Field(field, RuleRange, "%s is outside the accepted range %s to %s (UTC, end excluded)",
		sent, Earliest.Format(time.RFC3339), Latest.Format(time.RFC3339))
}

// Contains reports whether t lies in [Earliest, Latest).
func Contains(t time.Time) bool {
	return !t.Before(Earliest) && t.Before(Latest)
}

// CheckDate is Check for a calendar date (a day of a range in some time
// zone): the date itself must lie in the range, 1970-01-01 to 9998-12-31,
// whatever the zone's offset makes of its midnight (the range's margin
// absorbs that).
func CheckDate(field string, d time.Time) error {
	y, m, day := d.Date()
	if Contains(time.Date(y, m, day, 0, 0, 0, 0, time.UTC)) {
		return nil
	}
	return apperr.Field(field, RuleRange, "%s is outside the accepted range %s to %s",
		d.Format(time.DateOnly), Earliest.Format(time.DateOnly), Latest.AddDate(0, 0, -1).Format(time.DateOnly))
}

// CheckAhead refuses an end or an expiry more than MaxAheadYears after
// now, as InvalidArgument naming field. now is the caller's clock (the
// billing clock for a period's end), so the bound moves with it.
func CheckAhead(field string, t, now time.Time) error {
	limit := now.UTC().AddDate(MaxAheadYears, 0, 0)
	if !t.After(limit) {
		return nil
	}
	return apperr.Field(field, RuleAhead, "%s is more than %d years ahead (after %s)",
		t.UTC().Format(time.RFC3339), MaxAheadYears, limit.Format(time.RFC3339))
}
