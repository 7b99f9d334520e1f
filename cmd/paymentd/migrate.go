package main

import (
	"context"
	"fmt"
	"io"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/rustbill/paymentd/internal/app"
	"github.com/rustbill/paymentd/internal/config"
	"github.com/rustbill/paymentd/internal/migrate"
)

const migrateUsage = `Usage:
  paymentd migrate [--config FILE] up|down|status

up applies every pending migration (waiting up to [cluster].migration_wait for
another instance's run), down rolls back the most recent one, status lists them.
Each prints the list afterwards; up and status then compare the database's schema
with the one this build expects, as the service's start does, and print every
difference with both definitions. Exit status 2 when a difference would refuse
the start (docs/operations.md, "Upgrading").
`

func cmdMigrate(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("migrate", migrateUsage, stderr)
	cfgPath := configFlag(fs)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return usageError{fmt.Errorf("migrate needs one of: up, down, status")}
	}
	cfg, err := loadConfigFor(*cfgPath, config.SectionDB, config.SectionCluster)
	if err != nil {
		return err
	}
	pool, err := app.OpenPool(ctx, cfg.DB)
	if err != nil {
		return err
	}
	defer pool.Close()
	db := stdlib.OpenDBFromPool(pool)
	defer db.Close()

	switch fs.Arg(0) {
	case "up":
		if err := migrate.UpWith(ctx, db, migrate.Options{
			Wait: cfg.Cluster.MigrationWait, LeaseTTL: cfg.Cluster.LeaseTTL, LeaseRenew: cfg.Cluster.LeaseRenew,
		}); err != nil {
			return err
		}
	case "down":
		if err := migrate.Down(ctx, db); err != nil {
			return err
		}
	case "status":
	default:
		return usageError{fmt.Errorf("migrate: unknown action %q (want up, down or status)", fs.Arg(0))}
	}
	st, err := migrate.Status(ctx, db)
	if err != nil {
		return err
	}
	pending := 0
	for _, s := range st {
		applied := "pending"
		if !s.AppliedAt.IsZero() {
			applied = "applied " + s.AppliedAt.UTC().Format("2006-01-02 15:04:05Z")
		} else {
			pending++
		}
		fmt.Fprintf(stdout, "%05d  %-40s %s\n", s.Source.Version, s.Source.Path, applied)
	}
	if fs.Arg(0) == "down" {
		return nil // a rolled-back schema is not this build's, on purpose
	}
	if pending > 0 {
		fmt.Fprintf(stdout, "schema: not compared, %d migration(s) pending (paymentd migrate up applies them)\n", pending)
		return nil
	}
	return printSchemaCheck(ctx, pool, stdout)
}

// printSchemaCheck compares the schema with this build's, prints the
// verdict and every difference, and returns the start's refusal if any.
func printSchemaCheck(ctx context.Context, pool *pgxpool.Pool, stdout io.Writer) error {
	r, err := migrate.CheckSchema(ctx, pool)
	if err != nil {
		return err
	}
	if len(r.Differences) == 0 {
		fmt.Fprintf(stdout, "schema: as this build expects (%d objects)\n", r.Objects)
		return nil
	}
	fmt.Fprintf(stdout, "schema: %d difference(s) from this build's (%d refused, %d left alone; the database records migration %05d, this build knows up to %05d):\n",
		len(r.Differences), len(r.Refused()), len(r.LeftAlone()), r.Recorded, r.Known)
	for _, d := range r.Differences {
		fmt.Fprintln(stdout, "  "+d.Detail())
	}
	return r.Err()
}
