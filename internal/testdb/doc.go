// Package testdb gives tests real PostgreSQL databases that are already
// migrated, cheap enough to have one per test.
//
// Migrating a fresh database for every test would cost seconds each; cloning
// a migrated template with CREATE DATABASE … TEMPLATE costs a fraction of
// that. So one template per migration set is built once per server (not once
// per process: `go test ./...` runs packages as parallel processes) and each
// test clones it:
//
//	                        advisory lock on the admin database
//	                  ┌───────────────────────────────────────────────┐
//	template missing ─┼▶ <tmpl>_build ──migrate.Up──▶ IS_TEMPLATE,     │
//	                  │   (template0)     │           ALLOW_CONNECTIONS │
//	                  │                   │ fails     false ──rename──▶ paymentd_tmpl_<fingerprint>
//	                  │                   ▼                            │      │
//	                  │            dropped: no half template           │      │ CREATE DATABASE … TEMPLATE
//	                  └───────────────────────────────────────────────┘      ▼
//	                                            paymentd_test_<pkg>_<time>_<rand> ──t.Cleanup──▶ DROP … WITH (FORCE)
//
// The template is named after migrate.Fingerprint, so editing a migration
// builds a new template; templates of other fingerprints are dropped when a
// new one is built. Only the final rename makes a template visible under its
// real name, and it is marked IS_TEMPLATE and closed to connections before
// that, so whoever sees it may clone it. Clones whose test process died
// before its cleanup are dropped by a later run once they are old and unused.
//
// The server comes from PAYMENTD_TEST_DATABASE_URL, else the local server on
// 127.0.0.1:5432 (database test) if it answers within a second, else a
// private cluster in <repo>/.data/postgres started by internal/pgcluster, so
// `go test ./...` works on a bare machine.
//
// EmptyURL is the exception: a database with no schema at all, for tests
// that migrate it themselves — the migrations' own tests, and internal/app's
// running services, which migrate at start as production does
// (docs/development.md, "Testing with a running service and fakes").
//
// Packages that want one database for all their tests use Shared, and wrap
// their run in TestMain so the database is dropped at the end:
//
//	func TestMain(m *testing.M) {
//		goleak.VerifyTestMain(testdb.Main(m))
//	}
package testdb
