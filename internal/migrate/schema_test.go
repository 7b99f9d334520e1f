package migrate_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/pressly/goose/v3"
	"github.com/stretchr/testify/require"

	"github.com/rustbill/paymentd/internal/migrate"
	"github.com/rustbill/paymentd/internal/testdb"
)

// updateSchemaEnv rewrites schema.txt from the migrations instead of
// comparing (docs/development.md, "Adding a column").
const updateSchemaEnv = "PAYMENTD_UPDATE_SCHEMA"

// schema.txt is what the migrations make: migrated one at a time on an
// empty database, each object is described as the start's check reads it
// and attributed to the migration that last changed it.
// PAYMENTD_UPDATE_SCHEMA=1 writes the file instead of comparing.
func TestSchemaFileIsWhatTheMigrationsMake(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := testdb.EmptyURL(t)
	pool := newPool(t, url)
	p, err := goose.NewProvider(goose.DialectPostgres, open(t, url), migrate.FS())
	require.NoError(t, err)

	current := map[string]migrate.Object{}
	for {
		res, err := p.UpByOne(ctx)
		if errors.Is(err, goose.ErrNoNextVersion) {
			break
		}
		require.NoError(t, err)
		live, err := migrate.ReadSchema(ctx, pool)
		require.NoError(t, err)
		next := make(map[string]migrate.Object, len(live))
		for _, o := range live {
			o.Migration = res.Source.Version
			if before, ok := current[o.Key()]; ok && before.Def == o.Def {
				o.Migration = before.Migration
			}
			next[o.Key()] = o
		}
		current = next
	}
	objs := make([]migrate.Object, 0, len(current))
	for _, o := range current {
		objs = append(objs, o)
	}
	got := migrate.FormatSchema(objs)

	if os.Getenv(updateSchemaEnv) != "" {
		require.NoError(t, os.WriteFile("schema.txt", []byte(got), 0o644))
		t.Logf("wrote schema.txt: %d objects", len(objs))
		return
	}
	want, err := os.ReadFile("schema.txt")
	require.NoError(t, err)
	require.Equal(t, string(want), got,
		"schema.txt is not what the migrations make: run %s=1 go test ./internal/migrate -run TestSchemaFileIsWhatTheMigrationsMake and commit it", updateSchemaEnv)
	parsed, err := migrate.ParseSchema(got)
	require.NoError(t, err)
	require.ElementsMatch(t, objs, parsed, "the file reads back as written")
	require.Len(t, migrate.ExpectedSchema(), len(objs), "the binary embeds the file")
}

func newPool(t *testing.T, url string) *pgxpool.Pool {
	t.Helper()
	pool, err := pgxpool.New(context.Background(), url)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	return pool
}

// checked is a migrated test database, its pool and the schema check of it
// after plant ran there.
func checked(t *testing.T, plant ...string) (*pgxpool.Pool, migrate.SchemaReport) {
	t.Helper()
	pool := testdb.Pool(t)
	for _, sql := range plant {
		_, err := pool.Exec(context.Background(), sql)
		require.NoError(t, err, sql)
	}
	r, err := migrate.CheckSchema(context.Background(), pool)
	require.NoError(t, err)
	return pool, r
}

// requireRefused checks the refusal is one line that begins with want.
func requireRefused(t *testing.T, r migrate.SchemaReport, want string) string {
	t.Helper()
	err := r.Err()
	require.Error(t, err)
	require.ErrorIs(t, err, migrate.ErrSchemaDrift)
	msg := err.Error()
	require.NotContains(t, msg, "\n", "one line")
	require.True(t, strings.HasPrefix(msg, want), "%s\nwant the prefix %s", msg, want)
	require.Contains(t, msg, `paymentd migrate status lists every difference (docs/operations.md, "Upgrading")`, "the way out")
	return msg
}

func TestAFreshlyMigratedDatabaseIsWhatThisBuildExpects(t *testing.T) {
	t.Parallel()
	_, r := checked(t)
	require.Empty(t, r.Differences)
	require.NoError(t, r.Err())
	require.EqualValues(t, latest, r.Recorded)
	require.EqualValues(t, latest, r.Known)
	require.Equal(t, len(migrate.ExpectedSchema()), r.Objects)
	require.Greater(t, r.Objects, 300, "tables, columns, constraints, indexes, triggers and functions")
}

// The retention job's months of audit_log come and go; they are not the
// schema's.
func TestTheAuditLogsMonthsAreNotPartOfTheSchema(t *testing.T) {
	t.Parallel()
	pool, _ := checked(t)
	ctx := context.Background()
	var created int
	require.NoError(t, pool.QueryRow(ctx, `SELECT audit_log_create_partitions(now() + interval '2 years', 2)`).Scan(&created))
	require.Equal(t, 2, created)
	_, err := pool.Exec(ctx, `SELECT audit_log_drop_partitions(now() + interval '1 month')`)
	require.NoError(t, err)
	r, err := migrate.CheckSchema(ctx, pool)
	require.NoError(t, err)
	require.Empty(t, r.Differences)
}

// The planted drift of issue 30: an older build's database lacked a column
// the code reads; the check names it, and the migration that makes it.
func TestADroppedColumnRefusesTheStartNamingItAndItsMigration(t *testing.T) {
	t.Parallel()
	_, r := checked(t, `ALTER TABLE customers DROP COLUMN token_generation`)
	requireRefused(t, r, "schema check: the database's schema is not the one this build expects: "+
		"column customers.token_generation is missing (00001_identity.sql makes it) (and 1 more refused); nothing was served: "+
		"run the paymentd that made this database, or bring its schema back to this build's")
	// Its CHECK went with it.
	require.Len(t, r.Refused(), 2)
	require.Equal(t, "constraint customers.customers_token_generation_check", r.Refused()[1].Object().Key())
	require.Contains(t, r.Refused()[0].Detail(), "missing  column customers.token_generation (00001_identity.sql): bigint not null default 0 [refused]")
}

// A function an older build made with another body: same name and
// arguments, so nothing but its source tells.
func TestAReplacedFunctionRefusesTheStart(t *testing.T) {
	t.Parallel()
	pool := testdb.Pool(t)
	ctx := context.Background()
	var def string
	require.NoError(t, pool.QueryRow(ctx, `SELECT pg_get_functiondef('payment_trends_fold'::regproc)`).Scan(&def))
	older := strings.Replace(def, "BEGIN", "BEGIN\n    -- an older build's body\n", 1)
	require.NotEqual(t, def, older)
	_, err := pool.Exec(ctx, older)
	require.NoError(t, err)
	r, err := migrate.CheckSchema(ctx, pool)
	require.NoError(t, err)
	requireRefused(t, r, "schema check: the database's schema is not the one this build expects: "+
		"function payment_trends_fold() differs from what 00005_payments.sql makes; nothing was served")
	require.Len(t, r.Differences, 1)
}

// Money's guards made harmless by hand are drift too.
func TestADisabledTriggerOrADroppedConstraintRefusesTheStart(t *testing.T) {
	t.Parallel()
	_, r := checked(t, `ALTER TABLE balance_transactions DISABLE TRIGGER balance_transactions_append_only`)
	requireRefused(t, r, "schema check: the database's schema is not the one this build expects: "+
		"trigger balance_transactions.balance_transactions_append_only differs from what 00006_balance_transactions.sql makes;")
	require.Contains(t, r.Differences[0].Detail(), "(disabled) [refused]")

	_, r = checked(t, `ALTER TABLE payments DROP CONSTRAINT payments_refunded_amount_check`)
	requireRefused(t, r, "schema check: the database's schema is not the one this build expects: "+
		"constraint payments.payments_refunded_amount_check is missing (00005_payments.sql makes it);")
}

// What an operator adds beside the schema is left alone unless it can
// refuse or change this build's writes.
func TestExtraObjectsAreLeftAloneUnlessTheyCanChangeWrites(t *testing.T) {
	t.Parallel()
	_, r := checked(t,
		`CREATE INDEX report_payments_by_day ON payments (date_trunc('day', created_at AT TIME ZONE 'UTC'))`,
		`CREATE VIEW report_paid AS SELECT id, amount FROM payments WHERE status = 'success'`,
		`CREATE TABLE report_notes (id int PRIMARY KEY, note text NOT NULL)`,
		`ALTER TABLE orders ADD COLUMN crm_ref text`,
		`ALTER TABLE orders ADD COLUMN crm_flag boolean NOT NULL DEFAULT false`)
	require.NoError(t, r.Err())
	require.Len(t, r.Differences, 9, "index, view, table with its two columns, primary key and index, and two columns")
	require.Empty(t, r.Refused())
	require.Contains(t, r.LeftAloneSummary(), "and 4 more")

	for _, plant := range []struct{ sql, key string }{
		{`ALTER TABLE orders ADD COLUMN crm_id text NOT NULL`, "column orders.crm_id"},
		{`CREATE UNIQUE INDEX one_order_per_total ON orders (total_amount)`, "index orders.one_order_per_total"},
		{`ALTER TABLE payments ADD CONSTRAINT small_payments CHECK (amount < 1000)`, "constraint payments.small_payments"},
		{`CREATE TRIGGER audit_more BEFORE INSERT ON payments FOR EACH ROW EXECUTE FUNCTION reject_update_delete()`, "trigger payments.audit_more"},
	} {
		_, r := checked(t, plant.sql)
		requireRefused(t, r, "schema check: the database's schema is not the one this build expects: "+
			plant.key+" is not this build's; nothing was served")
	}
}

// A database a newer release migrated (it records a migration this build
// does not have): what that release changed or added is its
// expand-then-contract, left alone; what it removed refuses, naming the
// release's migration.
func TestOnANewerReleasesDatabaseOnlyWhatIsMissingRefuses(t *testing.T) {
	t.Parallel()
	pool, r := checked(t,
		fmt.Sprintf(`INSERT INTO goose_db_version (version_id, is_applied) VALUES (%d, true)`, latest+1),
		`ALTER TABLE payments DROP CONSTRAINT payments_status_check`,
		`ALTER TABLE payments ADD CONSTRAINT payments_status_check CHECK (status IN ('pending', 'success', 'failed', 'refunded', 'disputed'))`,
		`ALTER TABLE payments ADD COLUMN dispute_id uuid NOT NULL DEFAULT gen_random_uuid()`,
		`CREATE TRIGGER payments_dispute_sync BEFORE UPDATE ON payments FOR EACH ROW EXECUTE FUNCTION reject_update_delete()`)
	require.True(t, r.Newer())
	require.NoError(t, r.Err())
	require.Len(t, r.LeftAlone(), 3)

	_, err := pool.Exec(context.Background(), `ALTER TABLE orders DROP COLUMN suspend_reason`)
	require.NoError(t, err)
	r, err = migrate.CheckSchema(context.Background(), pool)
	require.NoError(t, err)
	requireRefused(t, r, "schema check: the database's schema is not the one this build expects: "+
		"column orders.suspend_reason is missing (00002_catalog_orders.sql makes it)")
	require.Contains(t, r.Err().Error(), fmt.Sprintf("a newer release migrated this database (it records migration %05d, this build knows up to %05d)", latest+1, latest))
}

// The migrations run into another schema ([db].url's search_path) make
// the same description: the schema's name is not part of it.
func TestASchemaOtherThanPublicDescribesTheSame(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := testdb.EmptyURL(t)
	admin := newPool(t, url)
	_, err := admin.Exec(ctx, `CREATE SCHEMA "Pay ments"`)
	require.NoError(t, err)
	cfg, err := pgxpool.ParseConfig(url)
	require.NoError(t, err)
	cfg.ConnConfig.RuntimeParams["search_path"] = `"Pay ments"`
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	db := stdlibDB(t, pool)
	require.NoError(t, migrate.Up(ctx, db))
	r, err := migrate.CheckSchema(ctx, pool)
	require.NoError(t, err)
	require.Empty(t, r.Differences)
}

func TestCompareSchemaSaysWhatRefuses(t *testing.T) {
	t.Parallel()
	col := func(name, def string) migrate.Object { return migrate.Object{Kind: "column", Name: name, Def: def} }
	expected := []migrate.Object{{Migration: 1, Kind: "table", Name: "t", Def: "table"}, col("t.a", "integer not null")}
	for _, c := range []struct {
		extra   migrate.Object
		refused bool
	}{
		{col("t.b", "text"), false},
		{col("t.b", "text not null default ''::text"), false},
		{col("t.b", "bigint not null generated always as identity"), false},
		{col("t.b", "text not null"), true},
		{migrate.Object{Kind: "index", Name: "t.i", Def: "CREATE INDEX i ON t USING btree (a)"}, false},
		{migrate.Object{Kind: "index", Name: "t.i", Def: "CREATE UNIQUE INDEX i ON t USING btree (a)"}, true},
		{migrate.Object{Kind: "function", Name: "f()", Def: "returns integer language sql volatile source sha256:00"}, false},
	} {
		live := append(append([]migrate.Object(nil), expected...), c.extra)
		d := migrate.CompareSchema(expected, live, false)
		require.Len(t, d, 1)
		require.Equal(t, migrate.Extra, d[0].Change)
		require.Equal(t, c.refused, d[0].Refused, c.extra.Def)
		require.False(t, migrate.CompareSchema(expected, live, true)[0].Refused, "a newer release's %s", c.extra.Def)
	}
	d := migrate.CompareSchema(expected, []migrate.Object{col("t.a", "bigint not null"), col("t.z", "text not null")}, true)
	require.Equal(t, []migrate.Change{migrate.Missing, migrate.Changed, migrate.Extra}, []migrate.Change{d[0].Change, d[1].Change, d[2].Change})
	require.Equal(t, []bool{true, false, false}, []bool{d[0].Refused, d[1].Refused, d[2].Refused})
}

// stdlibDB is pool as a database/sql handle, which migrate.Up takes.
func stdlibDB(t *testing.T, pool *pgxpool.Pool) *sql.DB {
	t.Helper()
	db := stdlib.OpenDBFromPool(pool)
	t.Cleanup(func() { _ = db.Close() })
	return db
}

// A dump restored with pg_restore parses a trigger's WHEN again, and nested
// ORs come back flat: the same trigger. A changed operator, column or
// quoted constant is still a difference.
func TestARestoredTriggerIsTheSameAndAChangedOneIsNot(t *testing.T) {
	t.Parallel()
	made := `CREATE TRIGGER t AFTER UPDATE ON refunds FOR EACH ROW WHEN ((((old.status = 'succeeded'::text) OR (new.status = 'succeeded'::text)) AND ((((old.status IS DISTINCT FROM new.status) OR (old.updated_at IS DISTINCT FROM new.updated_at)) OR (old.amount IS DISTINCT FROM new.amount)) OR (old.payment_id IS DISTINCT FROM new.payment_id)))) EXECUTE FUNCTION f()`
	restored := `CREATE TRIGGER t AFTER UPDATE ON refunds FOR EACH ROW WHEN ((((old.status = 'succeeded'::text) OR (new.status = 'succeeded'::text)) AND ((old.status IS DISTINCT FROM new.status) OR (old.updated_at IS DISTINCT FROM new.updated_at) OR (old.amount IS DISTINCT FROM new.amount) OR (old.payment_id IS DISTINCT FROM new.payment_id)))) EXECUTE FUNCTION f()`
	require.True(t, migrate.SameDefinition(made, restored))
	require.False(t, migrate.SameDefinition(made, strings.Replace(made, "old.amount IS DISTINCT", "old.status IS DISTINCT", 1)))
	require.False(t, migrate.SameDefinition(made, strings.Replace(made, "'succeeded'", "'failed'", 1)))
	require.False(t, migrate.SameDefinition("CHECK (a = '(x)')", "CHECK (a = 'x')"), "parentheses inside a literal count")
}
