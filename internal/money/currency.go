package money

// IsCurrencyCode reports whether s has the shape of an ISO 4217 code:
// three capital ASCII letters ("CNY", "USD"). It does not consult the
// list of codes: which currencies a deployment takes is configuration.
func IsCurrencyCode(s string) bool {
	if len(s) != 3 {
		return false
	}
	for i := range 3 {
		if s[i] < 'A' || s[i] > 'Z' {
			return false
		}
	}
	return true
}
