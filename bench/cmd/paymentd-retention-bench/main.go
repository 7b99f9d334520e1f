// Command paymentd-retention-bench measures the retention job
// (internal/retention; docs/performance.md, "Retention") on a database of
// the bench's size:
//
//	paymentd-retention-bench [--audit 1000000] [--events 1000000] [--notifications 500000] [--db postgres://…] [--keep]
//
// On a fresh, migrated database on the server of --db (default
// PAYMENTD_BENCH_DATABASE_URL, then PAYMENTD_TEST_DATABASE_URL; dropped
// afterwards unless --keep) it first times single-row audit inserts into
// the partitioned audit_log against a copy of the table as it was before
// (one heap, five indexes), alternating. Then it seeds, each in one
// INSERT … SELECT generate_series, --audit audit rows over the last 24
// months, --events done events over the same months (a third order_paid,
// which are kept) and --notifications sent notifications, and runs one
// retention round with audit_months 12 and the default event and
// notification retention, then a second round, and prints what each did
// and how long it took.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/rustbill/paymentd/bench/harness"
	"github.com/rustbill/paymentd/internal/migrate"
	"github.com/rustbill/paymentd/internal/retention"
	"github.com/rustbill/paymentd/internal/startstop"
	"github.com/rustbill/paymentd/internal/store"
)

func main() { harness.Main("paymentd-retention-bench", run) }

func run(ctx context.Context, args []string, out io.Writer) error {
	fs := flag.NewFlagSet("paymentd-retention-bench", flag.ContinueOnError)
	audits := fs.Int("audit", 1_000_000, "audit rows to seed over 24 months")
	events := fs.Int("events", 1_000_000, "done events to seed over 24 months")
	notifications := fs.Int("notifications", 500_000, "sent notifications to seed over 24 months")
	inserts := fs.Int("inserts", 20_000, "single-row audit inserts timed into each table")
	dbURL := fs.String("db", harness.FirstSet(os.Getenv("PAYMENTD_BENCH_DATABASE_URL"), os.Getenv("PAYMENTD_TEST_DATABASE_URL")),
		"a PostgreSQL URL whose server gets a fresh database for the run")
	keep := fs.Bool("keep", false, "keep the database afterwards")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *dbURL == "" {
		return errors.New("--db (or PAYMENTD_BENCH_DATABASE_URL) is required")
	}
	fresh, drop, err := harness.FreshDatabase(ctx, *dbURL, "paymentd_retention_bench_")
	if err != nil {
		return err
	}
	if *keep {
		fmt.Fprintln(out, "database kept:", fresh)
	} else {
		defer drop()
	}
	pool, err := pgxpool.New(ctx, fresh)
	if err != nil {
		return err
	}
	defer pool.Close()
	db := stdlib.OpenDBFromPool(pool)
	if err := migrate.Up(ctx, db); err != nil {
		return err
	}
	_ = db.Close()
	now := time.Now().UTC()
	first := time.Date(now.Year(), now.Month()-24, 1, 0, 0, 0, 0, time.UTC)
	if _, err := store.CreateAuditPartitions(ctx, pool, first, 24+1+retention.MonthsAhead); err != nil {
		return err
	}

	if err := insertCost(ctx, pool, *inserts, out); err != nil {
		return err
	}

	step := func(what, q string, args ...any) error {
		start := time.Now()
		tag, err := pool.Exec(ctx, q, args...)
		if err != nil {
			return fmt.Errorf("%s: %w", what, err)
		}
		fmt.Fprintf(out, "seeded %s: %d rows in %s\n", what, tag.RowsAffected(), time.Since(start).Round(time.Millisecond))
		return nil
	}
	span := now.Sub(first).Seconds()
	if err := step("customers and orders", `
		WITH c AS (INSERT INTO customers (email, password_hash, currency) VALUES ('retention-bench@example.com', 'x', 'CNY') RETURNING id)
		INSERT INTO orders (customer_id, total_amount, currency) SELECT c.id, 10, 'CNY' FROM c, generate_series(1, 1000)`); err != nil {
		return err
	}
	if err := step("audit_log", `
		INSERT INTO audit_log (actor_kind, actor_id, action, entity_type, entity_id, after, request_id, created_at)
		SELECT 'system', 'bench', 'payment.success', 'payment', gen_random_uuid()::text,
		       jsonb_build_object('status', 'success', 'amount', '12.30', 'paid_at', now()), md5(i::text),
		       $1::timestamptz + (i::float8 / $2) * $3 * interval '1 second'
		FROM generate_series(1, $2) i`, first, *audits, span); err != nil {
		return err
	}
	if err := step("events", `
		INSERT INTO events (event_type, order_id, status, payload, attempts, created_at, updated_at, run_at)
		SELECT (ARRAY['order_paid', 'order_provisioned', 'renewal_reminder'])[1 + i % 3], o.ids[1 + i % 1000], 'done',
		       jsonb_build_object('order_id', o.ids[1 + i % 1000]), 1, t, t, t
		FROM (SELECT array_agg(id) AS ids FROM orders) o,
		     LATERAL (SELECT i, $1::timestamptz + (i::float8 / $2) * $3 * interval '1 second' AS t FROM generate_series(1, $2) i) s`,
		first, *events, span); err != nil {
		return err
	}
	if err := step("notifications", `
		INSERT INTO notifications (recipient, channel, body, status, attempts, sent_at, created_at, updated_at)
		SELECT 'c' || i || '@example.com', 'email', 'your order', 'sent', 1, t, t, t
		FROM (SELECT i, $1::timestamptz + (i::float8 / $2) * $3 * interval '1 second' AS t FROM generate_series(1, $2) i) s`,
		first, *notifications, span); err != nil {
		return err
	}
	if _, err := pool.Exec(ctx, `VACUUM ANALYZE`); err != nil {
		return err
	}

	p, err := retention.New(pool, retention.Options{AuditMonths: 12, Clock: func() time.Time { return now },
		Job: startstop.Job{Logger: slog.New(slog.DiscardHandler)}})
	if err != nil {
		return err
	}
	for round := 1; round <= 2; round++ {
		var auditBefore int64
		if err := pool.QueryRow(ctx, `SELECT count(*) FROM audit_log`).Scan(&auditBefore); err != nil {
			return err
		}
		start := time.Now()
		rep, err := p.RunOnce(ctx)
		if err != nil {
			return err
		}
		took := time.Since(start)
		var auditAfter int64
		if err := pool.QueryRow(ctx, `SELECT count(*) FROM audit_log`).Scan(&auditAfter); err != nil {
			return err
		}
		auditTook := took - rep.Events.Took - rep.Notifications.Took
		fmt.Fprintf(out, "round %d: %s in all\n", round, took.Round(time.Millisecond))
		fmt.Fprintf(out, "  audit: %d months dropped (%d rows) in %s; %d created\n", len(rep.PartitionsDropped), auditBefore-auditAfter,
			auditTook.Round(time.Millisecond), rep.PartitionsCreated)
		for _, k := range []struct {
			what string
			p    retention.Purged
		}{{"notifications", rep.Notifications}, {"events", rep.Events}} {
			rate := float64(k.p.Deleted) / k.p.Took.Seconds()
			fmt.Fprintf(out, "  %s: %d deleted of %d examined in %d statements, %s (%.0f rows/s deleted)\n",
				k.what, k.p.Deleted, k.p.Examined, k.p.Statements, k.p.Took.Round(time.Millisecond), rate)
		}
	}
	return nil
}

// insertCost times single-row inserts (the InsertAuditLog statement) into
// the partitioned audit_log and into audit_log_flat, a copy of the table
// as it was before partitioning (identity primary key and the created_at
// index beside the other three), in alternating rounds of one transaction
// each.
func insertCost(ctx context.Context, pool *pgxpool.Pool, n int, out io.Writer) error {
	if _, err := pool.Exec(ctx, `
		CREATE TABLE audit_log_flat (
		    id bigint PRIMARY KEY GENERATED ALWAYS AS IDENTITY, actor_kind text NOT NULL, actor_id text NOT NULL DEFAULT '',
		    action text NOT NULL, entity_type text NOT NULL, entity_id text NOT NULL, before jsonb, after jsonb,
		    request_id text NOT NULL DEFAULT '', created_at timestamptz NOT NULL DEFAULT now());
		CREATE INDEX ON audit_log_flat (entity_type, entity_id, created_at);
		CREATE INDEX ON audit_log_flat (created_at DESC, id DESC);
		CREATE INDEX ON audit_log_flat (actor_id, created_at DESC, id DESC);
		CREATE INDEX ON audit_log_flat (action, created_at DESC, id DESC);
		CREATE TRIGGER audit_log_flat_append_only BEFORE UPDATE OR DELETE ON audit_log_flat
		    FOR EACH ROW EXECUTE FUNCTION reject_update_delete();`); err != nil {
		return err
	}
	took := map[string]time.Duration{}
	const rounds = 10
	for r := 0; r < rounds; r++ {
		for _, table := range []string{"audit_log_flat", "audit_log"} {
			q := `INSERT INTO ` + table + ` (actor_kind, actor_id, action, entity_type, entity_id, before, after, request_id, created_at)
				VALUES ('system', 'bench', 'payment.success', 'payment', $1, NULL, $2, 'req', $3)`
			// One transaction per round: the commit's flush, which would
			// dominate one transaction per row, is left out.
			tx, err := pool.Begin(ctx)
			if err != nil {
				return err
			}
			start := time.Now()
			for i := 0; i < n/rounds; i++ {
				if _, err := tx.Exec(ctx, q, fmt.Sprint(r, i), []byte(`{"status":"success","amount":"12.30"}`), time.Now()); err != nil {
					_ = tx.Rollback(ctx)
					return err
				}
			}
			took[table] += time.Since(start)
			if err := tx.Commit(ctx); err != nil {
				return err
			}
		}
	}
	for _, table := range []string{"audit_log_flat", "audit_log"} {
		fmt.Fprintf(out, "insert into %s: %.1f µs a row (%d rows, one statement each, %d per transaction)\n", table,
			float64(took[table].Microseconds())/float64(n), n, n/rounds)
	}
	// The rows inserted into audit_log stay (it is append-only); they are
	// in the current month, which the round keeps.
	_, err := pool.Exec(ctx, `DROP TABLE audit_log_flat`)
	return err
}
