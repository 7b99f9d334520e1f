package store

// ByKey maps rows by key(row), a row read in one statement over many ids
// found again by its id (a later row with the same key wins).
func ByKey[R any, K comparable](rows []R, key func(R) K) map[K]R {
	out := make(map[K]R, len(rows))
	for _, r := range rows {
		out[key(r)] = r
	}
	return out
}
