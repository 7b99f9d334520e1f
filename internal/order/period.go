package order

import "time"

// Months is how many calendar months one cycle lasts; 0 for one-time,
// which has no periods.
func (c BillingCycle) Months() int {
	switch c {
	case CycleMonthly:
		return 1
	case CycleQuarterly:
		return 3
	case CycleSemiAnnual:
		return 6
	case CycleAnnual:
		return 12
	}
	return 0
}

// Recurring reports whether orders of the cycle have service periods.
func (c BillingCycle) Recurring() bool { return c.Months() > 0 }

// AddMonths is anchor plus n calendar months in loc, the anchor's day of
// the month and time of day kept; a month too short for that day ends the
// period on its last day. Every period end of an order is computed from the
// anchor, never from the previous end, so a short month does not move the
// later ones: from Jan 31, 1 month is Feb 28 (29 in a leap year), 2 months
// Mar 31, 3 months Apr 30.
//
// The wall-clock time is kept across daylight saving changes: a period
// that starts at 00:30 local time ends at 00:30 local time. A wall-clock
// time that does not exist on the end day (skipped by a change) is the
// instant time.Date gives for it, which is after the skipped hour.
func AddMonths(anchor time.Time, n int, loc *time.Location) time.Time {
	if loc == nil {
		loc = time.UTC
	}
	a := anchor.In(loc)
	y, m := a.Year(), int(a.Month())-1+n
	y, m = y+floorDiv(m, 12), m-12*floorDiv(m, 12)
	month := time.Month(m + 1)
	day := min(a.Day(), daysIn(y, month))
	return time.Date(y, month, day, a.Hour(), a.Minute(), a.Second(), a.Nanosecond(), loc)
}

// daysIn is the number of days of month m of year y.
func daysIn(y int, m time.Month) int {
	return time.Date(y, m+1, 0, 0, 0, 0, 0, time.UTC).Day()
}

func floorDiv(a, b int) int {
	q := a / b
	if (a%b != 0) && ((a < 0) != (b < 0)) {
		q--
	}
	return q
}
