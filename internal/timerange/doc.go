// Package timerange is the one range of times the service accepts: every
// time a request carries (an end, an expiry, a due time, a filter's bound)
// and every time a gateway reports is checked against it (Check, CheckDate,
// Contains), and an end or an expiry an admin sets may lie at most
// MaxAheadYears ahead (CheckAhead). It is a leaf, plain Go over apperr: the
// domain checks the times it is given with it, and internal/rpc reads a
// request's RFC 3339 text into a time and checks it here.
package timerange
