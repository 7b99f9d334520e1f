package store_test

import (
	"context"
	"database/sql"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// designTables is the schema's table list: the first design's tables,
// admin_api_keys (issue 16), the payment trends' rollup (issue 19;
// docs/decisions.md, "trends rollup"), the idempotency keys (issue 26),
// the service periods (issue 28; docs/decisions.md, "renewals") and the
// invoice lines and number series (issue 38, migration 00010), the
// disputes (00012), the plan changes (00013), the saved cards (00014) and
// the recurring revenue's rollup and renewal schedule (00015) and its
// days (00016).
var designTables = []string{
	"admin_users", "customers", "sessions", "api_keys", "admin_api_keys", "products", "orders",
	"invoices", "invoice_lines", "invoice_number_series", "service_periods", "plan_changes", "payments", "refunds", "disputes", "payment_trend_currency_quarters",
	"payment_trend_gateway_quarters", "payment_trend_seconds_quarters", "payment_trend_seconds_days",
	"payment_trend_currency_changes", "payment_trend_gateway_changes", "payment_trend_seconds_changes",
	"balance_transactions", "plugins", "gateway_interfaces", "events", "leader_leases", "nodes", "instances",
	"notifications", "audit_log", "idempotency_keys", "admin_recovery_codes",
	"gateway_customers", "saved_payment_methods", "order_auto_charge", "saved_charge_attempts",
	"mrr_changes", "mrr_quarters", "mrr_days", "mrr_totals", "renewal_schedule_changes", "renewal_schedule_quarters",
}

const gooseTable = "goose_db_version"

// The contract's nine migrations (v0.1.0's) come first; later releases add
// migrations numbered on from 00010 (docs/decisions.md, "Released
// migrations").
func TestMigrationsAreNumberedGooseFiles(t *testing.T) {
	t.Parallel()
	files, err := filepath.Glob(filepath.Join(migrationsDir, "*.sql"))
	require.NoError(t, err)
	require.GreaterOrEqual(t, len(files), 9, "the API contract's 9 migrations come first (docs/api.md; docs/decisions.md, \"schema\")")

	p := newProvider(t, openSQL(t, newDatabase(t, "mig", "")))
	sources := p.ListSources()
	require.Len(t, sources, len(files))
	for i, s := range sources {
		require.EqualValues(t, i+1, s.Version, s.Path)
	}
}

func TestMigrationsUpDownToZeroAndUpAgain(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := openSQL(t, newDatabase(t, "mig", ""))
	p := newProvider(t, db)

	_, err := p.Up(ctx)
	require.NoError(t, err)
	require.ElementsMatch(t, append([]string{gooseTable}, designTables...), tables(t, db))
	v, err := p.GetDBVersion(ctx)
	require.NoError(t, err)
	require.EqualValues(t, len(p.ListSources()), v)

	_, err = p.DownTo(ctx, 0)
	require.NoError(t, err)
	require.Equal(t, []string{gooseTable}, tables(t, db), "down to 0 leaves only goose's table")
	require.Empty(t, leftovers(t, db), "down to 0 leaves no functions, types or sequences")

	_, err = p.Up(ctx)
	require.NoError(t, err)
	require.ElementsMatch(t, append([]string{gooseTable}, designTables...), tables(t, db))
}

// Each Down must restore exactly the schema its Up started from, so that any
// single migration can be rolled back.
func TestEachMigrationDownRestoresTheSchemaBeforeItsUp(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := openSQL(t, newDatabase(t, "mig", ""))
	p := newProvider(t, db)

	for _, src := range p.ListSources() {
		before := schemaSnapshot(t, db)
		_, err := p.UpByOne(ctx)
		require.NoError(t, err, src.Path)
		up := schemaSnapshot(t, db)
		require.NotEqual(t, before, up, "%s changes nothing", src.Path)

		_, err = p.Down(ctx)
		require.NoError(t, err, src.Path)
		requireSameSchema(t, before, schemaSnapshot(t, db), "down of %s does not undo its up", src.Path)

		_, err = p.UpByOne(ctx)
		require.NoError(t, err, src.Path)
		requireSameSchema(t, up, schemaSnapshot(t, db), "%s is not repeatable after its down", src.Path)
	}
}

// requireSameSchema compares two snapshots and reports only the lines that differ.
func requireSameSchema(t *testing.T, want, got string, msgAndArgs ...any) {
	t.Helper()
	if want == got {
		return
	}
	wantSet := map[string]bool{}
	for _, l := range strings.Split(want, "\n") {
		wantSet[l] = true
	}
	var diff []string
	for _, l := range strings.Split(got, "\n") {
		if !wantSet[l] {
			diff = append(diff, "+ "+l)
		}
		delete(wantSet, l)
	}
	for l := range wantSet {
		diff = append(diff, "- "+l)
	}
	require.Fail(t, "schema differs:\n"+strings.Join(diff, "\n"), msgAndArgs...)
}

func tables(t *testing.T, db *sql.DB) []string {
	t.Helper()
	return strings.Fields(queryLines(t, db, `
		SELECT coalesce(string_agg(tablename, ' ' ORDER BY tablename), '')
		FROM pg_tables
		WHERE schemaname = 'public'
		  -- audit_log's months and default are parts of it, not tables of the design.
		  AND NOT (SELECT relispartition FROM pg_class WHERE oid = format('public.%I', tablename)::regclass)`))
}

// leftovers lists objects of schema public that are neither goose's nor a
// table's own (row types, index, sequence of goose_db_version).
func leftovers(t *testing.T, db *sql.DB) string {
	t.Helper()
	return queryLines(t, db, `
		SELECT coalesce(string_agg(x, E'\n' ORDER BY x), '') FROM (
			SELECT 'function ' || proname AS x FROM pg_proc
			WHERE pronamespace = 'public'::regnamespace
			UNION ALL
			SELECT 'type ' || typname FROM pg_type
			WHERE typnamespace = 'public'::regnamespace AND typrelid = 0 AND typelem = 0
			UNION ALL
			SELECT 'relation ' || relname FROM pg_class
			WHERE relnamespace = 'public'::regnamespace AND relname NOT LIKE 'goose_db_version%'
		) o`)
}

// schemaSnapshot describes every object of schema public that a migration
// can create, one sorted line per item; goose's own table is left out.
func schemaSnapshot(t *testing.T, db *sql.DB) string {
	t.Helper()
	return queryLines(t, db, `
		SELECT coalesce(string_agg(x, E'\n' ORDER BY x), '') FROM (
			SELECT 'relation ' || relname || ' ' || relkind::text AS x FROM pg_class
			WHERE relnamespace = 'public'::regnamespace
			UNION ALL
			SELECT 'column ' || table_name || '.' || column_name || ' ' || data_type || ' '
				|| coalesce(numeric_precision::text || ',' || numeric_scale::text, '') || ' '
				|| is_nullable || ' ' || coalesce(column_default, '')
			FROM information_schema.columns WHERE table_schema = 'public'
			UNION ALL
			SELECT 'constraint ' || conrelid::regclass::text || ' ' || conname || ' ' || pg_get_constraintdef(oid)
			FROM pg_constraint WHERE connamespace = 'public'::regnamespace
			UNION ALL
			SELECT 'index ' || indexdef FROM pg_indexes WHERE schemaname = 'public'
			UNION ALL
			SELECT 'function ' || proname || ' ' || md5(prosrc) FROM pg_proc
			WHERE pronamespace = 'public'::regnamespace
			UNION ALL
			SELECT 'trigger ' || tgname || ' ' || pg_get_triggerdef(t.oid) FROM pg_trigger t
			JOIN pg_class c ON c.oid = t.tgrelid
			WHERE c.relnamespace = 'public'::regnamespace AND NOT t.tgisinternal
			UNION ALL
			SELECT 'comment ' || c.relname || ' ' || d.objsubid || ' ' || d.description
			FROM pg_description d JOIN pg_class c ON c.oid = d.objoid AND d.classoid = 'pg_class'::regclass
			WHERE c.relnamespace = 'public'::regnamespace
		) o
		WHERE x NOT LIKE '% goose\_db\_version%' AND x NOT LIKE '%public.goose\_db\_version%'`)
}

func queryLines(t *testing.T, db *sql.DB, query string) string {
	t.Helper()
	var s string
	require.NoError(t, db.QueryRowContext(context.Background(), query).Scan(&s))
	return s
}
