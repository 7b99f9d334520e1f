// Package testkit holds what the tests of every package share: a settable
// clock, a log buffer that is safe to read while the service logs, and a
// wait that fails the test instead of hanging it. Production code never
// imports it (internal/architecture holds that).
//
// A test's bundle of running parts (database, service, fakes, clients) is
// called its env everywhere: `env := startX(t)`, `type env struct`.
package testkit
