package fakekit

import (
	"net/url"
	"slices"
	"sort"
	"strings"
)

// ParseCents reads a gateway amount — at most maxWhole integer digits,
// optionally '.' and one or two decimals ("1", "1.5", "1.00") — as cents,
// exactly; false for anything else (a sign, an exponent, spaces, a third
// decimal).
func ParseCents(s string, maxWhole int) (int64, bool) {
	whole, frac, hasDot := strings.Cut(s, ".")
	if len(whole) < 1 || len(whole) > maxWhole || !digits(whole) {
		return 0, false
	}
	if hasDot && (len(frac) < 1 || len(frac) > 2 || !digits(frac)) {
		return 0, false
	}
	var c int64
	for _, d := range whole {
		c = c*10 + int64(d-'0')
	}
	frac += "00"
	return c*100 + int64(frac[0]-'0')*10 + int64(frac[1]-'0'), true
}

func digits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// CloneValues is a deep copy of v (nil stays nil), for handing recorded
// parameters to a test that may change them.
func CloneValues(v url.Values) url.Values {
	if v == nil {
		return nil
	}
	c := make(url.Values, len(v))
	for k, vs := range v {
		c[k] = append([]string(nil), vs...)
	}
	return c
}

// AppendQuery appends an encoded query to u, after '&' when u already has
// a query, as a gateway sends a notify by GET or a buyer back to return_url.
func AppendQuery(u, query string) string {
	if strings.Contains(u, "?") {
		return u + "&" + query
	}
	return u + "?" + query
}

// SortedForm is the text both Chinese gateways sign: every parameter
// except the omitted names and those with an empty value, names in
// ascending byte order, `k=v` (the first value, raw: decoded, never
// re-encoded) joined with `&`. Which names to omit is the protocol's.
func SortedForm(params url.Values, omit ...string) string {
	keys := make([]string, 0, len(params))
	for k := range params {
		if slices.Contains(omit, k) || params.Get(k) == "" {
			continue
		}
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	for i, k := range keys {
		if i > 0 {
			b.WriteByte('&')
		}
		b.WriteString(k)
		b.WriteByte('=')
		b.WriteString(params.Get(k))
	}
	return b.String()
}
