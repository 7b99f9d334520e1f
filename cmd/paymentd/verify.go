package main

import (
	"context"
	"fmt"
	"io"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/rustbill/paymentd/internal/app"
	"github.com/rustbill/paymentd/internal/config"
	"github.com/rustbill/paymentd/internal/ledger"
	"github.com/rustbill/paymentd/internal/migrate"
)

const verifyUsage = `Usage:
  paymentd verify [--config FILE]

Checks that the money in the database adds up: payments, refunds, orders, invoices,
events and the customers' balance ledger agree with each other (internal/ledger).
The checks run in one read-only snapshot while the service keeps running. Prints a
summary, and one line per violation with the ids of the rows involved.

Exit status: 0 when the ledger is clean, 1 when a rule is broken or the check could
not run, 2 on a bad command line or configuration.
`

func cmdVerify(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("verify", verifyUsage, stderr)
	cfgPath := configFlag(fs)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 0 {
		return usageError{fmt.Errorf("verify takes no arguments, got %q", fs.Args())}
	}
	cfg, err := loadConfigFor(*cfgPath, config.SectionDB)
	if err != nil {
		return err
	}
	pool, err := openMigrated(ctx, cfg)
	if err != nil {
		return err
	}
	defer pool.Close()
	r, err := ledger.Verify(ctx, pool)
	if err != nil {
		return err
	}
	fmt.Fprintln(stdout, r.String())
	if !r.OK() {
		return fmt.Errorf("the ledger check found %d violation(s)", len(r.Violations))
	}
	return nil
}

// openMigrated opens the pool and checks that every migration of this
// binary is applied and that the schema is the one it expects, as the
// service's start does: the operator's commands work on the schema they
// were built for, and never migrate it themselves.
func openMigrated(ctx context.Context, cfg config.Config) (*pgxpool.Pool, error) {
	pool, err := app.OpenPool(ctx, cfg.DB)
	if err != nil {
		return nil, err
	}
	db := stdlib.OpenDBFromPool(pool)
	st, err := migrate.Status(ctx, db)
	_ = db.Close()
	if err != nil {
		pool.Close()
		return nil, fmt.Errorf("reading the schema version: %w", err)
	}
	pending := 0
	for _, s := range st {
		if s.AppliedAt.IsZero() {
			pending++
		}
	}
	if pending > 0 {
		pool.Close()
		return nil, fmt.Errorf("the database schema is not up to date (%d migration(s) pending): run paymentd migrate up", pending)
	}
	r, err := migrate.CheckSchema(ctx, pool)
	if err == nil {
		err = r.Err()
	}
	if err != nil {
		pool.Close()
		return nil, err
	}
	return pool, nil
}
