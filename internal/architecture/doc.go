// Package architecture holds no code: its test keeps the package map of
// docs/architecture.md ("The layers") true. Every package under internal/
// and cmd/ belongs to a part, or to none (a helper any part may use, such
// as auth or config); the test reads the imports of the production code
// with `go list` and fails when an import runs where the map says it
// never may — directly, or through packages of no part.
package architecture
