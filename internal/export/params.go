package export

import (
	"errors"
	"fmt"
	"net/url"
	"slices"
	"sort"
	"strings"
	"time"
	_ "time/tzdata" // IANA zones even on a host without /usr/share/zoneinfo

	"github.com/google/uuid"

	"github.com/rustbill/paymentd/internal/apperr"
	"github.com/rustbill/paymentd/internal/timerange"
)

// badParam is a query parameter the export refuses: 400 with this message.
type badParam struct{ msg string }

func (e *badParam) Error() string { return e.msg }

func bad(format string, args ...any) error { return &badParam{msg: fmt.Sprintf(format, args...)} }

// window is the export's common parameters: the created_at range [from,
// to) and the zone its times are written in.
type window struct {
	from, to time.Time
	loc      *time.Location
}

// query reads a request's parameters, each at most once and each one the
// export knows: a misspelt filter is refused rather than ignored, which
// would export rows the caller did not ask for.
type query struct {
	v    url.Values
	errs []string
}

func newQuery(v url.Values, known ...string) *query {
	q := &query{v: v}
	var unknown []string
	for name, vals := range v {
		switch {
		case !slices.Contains(known, name):
			unknown = append(unknown, name)
		case len(vals) > 1:
			q.fail("%s is given %d times; give it once", name, len(vals))
		}
	}
	sort.Strings(unknown)
	for _, name := range unknown {
		q.fail("unknown parameter %q (known: %s)", name, strings.Join(known, ", "))
	}
	return q
}

func (q *query) fail(format string, args ...any) {
	q.errs = append(q.errs, fmt.Sprintf(format, args...))
}

// err is every problem found, in one message.
func (q *query) err() error {
	if len(q.errs) == 0 {
		return nil
	}
	return bad("%s", strings.Join(q.errs, "; "))
}

// window reads from, to and tz. from and to are dates (YYYY-MM-DD, whole
// days in tz: to's day is included) or RFC 3339 times (to excluded); both
// are required, and to must come after from.
func (q *query) window() window {
	var w window
	name := q.v.Get("tz")
	if name == "" {
		name = "UTC"
	}
	loc, err := time.LoadLocation(name)
	if err != nil || name == "Local" {
		q.fail("tz: %q is not an IANA time zone name such as UTC or Europe/Berlin", name)
		return w
	}
	w.loc = loc
	var okFrom, okTo bool
	w.from, okFrom = q.moment("from", loc, false)
	w.to, okTo = q.moment("to", loc, true)
	if okFrom && okTo && !w.to.After(w.from) {
		q.fail("to (%s) must come after from (%s)", q.v.Get("to"), q.v.Get("from"))
	}
	return w
}

func (q *query) moment(name string, loc *time.Location, end bool) (time.Time, bool) {
	s := q.v.Get(name)
	if s == "" {
		q.fail("%s is required: a date (2026-05-01) or an RFC 3339 time (2026-05-01T00:00:00Z)", name)
		return time.Time{}, false
	}
	if d, err := time.ParseInLocation(time.DateOnly, s, loc); err == nil {
		if !q.inRange(timerange.CheckDate(name, d)) {
			return time.Time{}, false
		}
		if end {
			d = d.AddDate(0, 0, 1) // the whole day of to
		}
		return d, true
	}
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		q.fail("%s: %q is neither a date (2026-05-01) nor an RFC 3339 time (2026-05-01T00:00:00Z)", name, s)
		return time.Time{}, false
	}
	if !q.inRange(timerange.Check(name, t)) {
		return time.Time{}, false
	}
	return t, true
}

// inRange records the refusal of a from or to outside the times the
// service accepts (timerange.Check), in the export's words; false then.
func (q *query) inRange(err error) bool {
	var ae *apperr.Error
	if !errors.As(err, &ae) {
		return true
	}
	q.fail("%s", strings.TrimPrefix(ae.Message, "validation error: "))
	return false
}

// id reads an optional UUID; nil when absent.
func (q *query) id(name string) *uuid.UUID {
	s := q.v.Get(name)
	if s == "" {
		return nil
	}
	id, err := uuid.Parse(s)
	if err != nil {
		q.fail("%s: %q is not a UUID", name, s)
		return nil
	}
	return &id
}

// oneOf reads an optional value out of allowed; nil when absent.
func (q *query) oneOf(name string, allowed ...string) *string {
	s := q.v.Get(name)
	if s == "" {
		return nil
	}
	if !slices.Contains(allowed, s) {
		q.fail("%s: %q is not one of %s", name, s, strings.Join(allowed, ", "))
		return nil
	}
	return &s
}

// flag reads an optional boolean: true or 1, false or 0.
func (q *query) flag(name string) bool {
	switch s := q.v.Get(name); s {
	case "", "false", "0":
		return false
	case "true", "1":
		return true
	default:
		q.fail("%s: %q is not true, false, 1 or 0", name, s)
		return false
	}
}
