package app

import (
	"context"
)

// warnServerSettings says at start, in one warning line, what in the
// database server's settings would silently cost paymentd, without
// refusing the start (they are the DBA's to change).
//
// autovacuum off: PostgreSQL keeps the plan of a prepared statement and of
// every foreign-key check for the life of a connection, and replans it
// when its tables' statistics change, which only ANALYZE does. A plan
// made while a table was small (a new installation, the first billing day
// after an import) scans the whole table, and keeps scanning it as it
// grows: the billing run measured its PostgreSQL CPU per service at 2.8 ms
// for 100,000 services with autovacuum on and 12.9 ms with it off
// (docs/performance.md, "The billing run").
func (a *App) warnServerSettings(ctx context.Context) {
	var autovacuum string
	if err := a.pool.QueryRow(ctx, `SHOW autovacuum`).Scan(&autovacuum); err != nil {
		a.log.Warn("could not read the database server's settings", "err", err)
		return
	}
	if autovacuum != "on" {
		a.log.Warn("autovacuum is off on the database server: plans made while a table was small are not refreshed as it grows, and queries slow down as tables grow (turn it on in postgresql.conf; docs/operations.md, \"PostgreSQL\")",
			"autovacuum", autovacuum)
	}
}
