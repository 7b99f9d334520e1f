package main

import (
	"context"
	"fmt"
	"io"

	"github.com/jackc/pgx/v5/stdlib"

	"github.com/rustbill/paymentd/internal/app"
	"github.com/rustbill/paymentd/internal/config"
	"github.com/rustbill/paymentd/internal/migrate"
)

const migrateUsage = `Usage:
  paymentd migrate [--config FILE] up|down|status

up applies every pending migration (waiting up to [cluster].migration_wait for
another instance's run), down rolls back the most recent one, status lists them.
Each prints the list afterwards.
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
	for _, s := range st {
		applied := "pending"
		if !s.AppliedAt.IsZero() {
			applied = "applied " + s.AppliedAt.UTC().Format("2006-01-02 15:04:05Z")
		}
		fmt.Fprintf(stdout, "%05d  %-40s %s\n", s.Source.Version, s.Source.Path, applied)
	}
	return nil
}
