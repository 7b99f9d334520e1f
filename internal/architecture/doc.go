// Package architecture holds no code: its tests keep rules of the whole
// repository. The layers test keeps the package map of
// docs/architecture.md ("The layers") true: every package under internal/
// and cmd/ belongs to a part, or to none (a helper any part may use, such
// as auth or config); it reads the imports of the production code with
// `go list` and fails when an import runs where the map says it never may
// — directly, or through packages of no part. The writers test keeps one
// writer of orders.status, invoices.status and audit_log. The goroutines
// test reads the test files and fails on a test stopped (require.*,
// t.Fatal) from a goroutine that is not the test's (docs/testing.md,
// "Waiting instead of sleeping"). The store test keeps sqlc's package
// inside internal/store and the store free of functions that only hand a
// generated query on (store.Q runs those).
package architecture
