package architecture_test

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
)

// statusWriters are the columns with one writer (docs/development.md,
// "Where an order's status changes"): the sqlc queries that may write the
// column (a row's creation included), and the production Go files that may
// call the store functions that run them (the store's wrappers aside).
var statusWriters = []struct {
	table string
	// queries may write table.status: the insert that creates a row and
	// the transition's update.
	queries []string
	// calls match a call of a store function that writes the status, or
	// of the generated query behind it.
	calls *regexp.Regexp
	// callers are the files allowed to make those calls: the one writer
	// and the store's wrappers.
	callers []string
}{
	{
		table:   "invoices",
		queries: []string{"InsertInvoice", "InsertRenewalInvoices", "SetInvoiceStatus"},
		calls:   regexp.MustCompile(`\.SetInvoiceStatus\(`),
		callers: []string{"internal/order/invoice_transition.go", "internal/store/invoices.go"},
	},
	{
		table:   "orders",
		queries: []string{"InsertOrder", "SetOrderStatus", "CancelOrder", "SuspendOrder", "MoveOrders"},
		calls:   regexp.MustCompile(`\.(SetOrderStatus|SetOrderStatusFailingPayments|CancelOrderFailingPayments|MoveOrders)\(|(\bq|\))\.CancelOrder\(|(\bstore|\))\.SuspendOrder\(`),
		// transition_batch.go: TransitionAll, Transition for a batch.
		callers: []string{"internal/order/transition.go", "internal/order/transition_batch.go", "internal/store/orders.go"},
	},
}

// writesStatus matches a statement that sets table.status: an UPDATE of
// the table whose SET list names status, or an INSERT into it. The SET
// list ends at WHERE, FROM, RETURNING or the statement's end.
func writesStatus(table, sql string) bool {
	update := regexp.MustCompile(`(?is)\bUPDATE\s+` + table + `\b(?:\s+(?:AS\s+)?\w+)?\s+SET\s+(.*?)(?:\bWHERE\b|\bFROM\b|\bRETURNING\b|;|$)`)
	for _, m := range update.FindAllStringSubmatch(sql, -1) {
		if regexp.MustCompile(`(?i)(^|[\s,.])status\s*=`).MatchString(m[1]) {
			return true
		}
	}
	return regexp.MustCompile(`(?is)\bINSERT\s+INTO\s+` + table + `\b`).MatchString(sql)
}

// sqlComments strips "--" comments, so a query's doc can name what it
// does not do.
var sqlComments = regexp.MustCompile(`--[^\n]*`)

// queryBlocks splits sql/queries into its sqlc queries, by name, comments
// stripped.
func queryBlocks(t *testing.T) map[string]string {
	t.Helper()
	files, err := filepath.Glob("../../sql/queries/*.sql")
	if err != nil || len(files) == 0 {
		t.Fatalf("sql/queries: %v (%d files)", err, len(files))
	}
	name := regexp.MustCompile(`(?m)^-- name: (\w+) :\w+`)
	blocks := map[string]string{}
	for _, f := range files {
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		s := string(src)
		at := name.FindAllStringSubmatchIndex(s, -1)
		for i, m := range at {
			end := len(s)
			if i+1 < len(at) {
				end = at[i+1][0]
			}
			blocks[s[m[2]:m[3]]] = sqlComments.ReplaceAllString(s[m[1]:end], "")
		}
	}
	return blocks
}

// productionGo lists the service's Go files, by path from the root: tests,
// sqlc's output (which mirrors sql/queries), the bench and the TestOnly
// packages (which seed rows of their own) left out.
func productionGo(t *testing.T) map[string]string {
	t.Helper()
	files := map[string]string{}
	err := filepath.WalkDir("../..", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel("../..", path)
		rel = filepath.ToSlash(rel)
		if d.IsDir() {
			switch {
			case rel == ".git", rel == "admin-ui", rel == "gen", rel == ".data", rel == "internal/store/dbsqlc",
				partOf(rel) == "TestOnly", partOf(rel) == "Entry" && strings.HasPrefix(rel, "bench"):
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(rel, ".go") || strings.HasSuffix(rel, "_test.go") {
			return nil
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		files[rel] = string(src)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return files
}

// orders.status and invoices.status each have one writer (order.Transition,
// order.InvoiceTransition): a query that writes the column and is not the
// writer's, a call of the writer's store function from elsewhere, or SQL
// in Go that writes the column fails here.
func TestEachStatusHasOneWriter(t *testing.T) {
	t.Parallel()
	blocks := queryBlocks(t)
	goFiles := productionGo(t)
	for _, w := range statusWriters {
		var queries []string
		for name, sql := range blocks {
			if writesStatus(w.table, sql) {
				queries = append(queries, name)
			}
		}
		sort.Strings(queries)
		want := append([]string(nil), w.queries...)
		sort.Strings(want)
		if strings.Join(queries, ",") != strings.Join(want, ",") {
			t.Errorf("queries writing %s.status: %v, want only %v (one writer: go through the transition)", w.table, queries, want)
		}
		allowed := map[string]bool{}
		for _, f := range w.callers {
			allowed[f] = true
		}
		for path, src := range goFiles {
			if !allowed[path] && w.calls.MatchString(src) {
				t.Errorf("%s writes %s.status (%s): go through the transition", path, w.table, w.calls.FindString(src))
			}
			if writesStatus(w.table, src) {
				t.Errorf("%s holds SQL writing %s.status: go through the transition", path, w.table)
			}
		}
	}
}

// periodWriters are the queries that write an order's periods, by what
// each may write: service_periods rows, orders.paid_until and
// orders.renews (docs/decisions.md, "One owner for periods"). The order's
// renewal turned off when a renewal invoice is cancelled is Go's, with an
// audit row (CancelUnpaidServicePeriod writes the periods only).
var periodWriters = []struct {
	what    string
	writes  func(sql string) bool
	queries []string
}{
	{"service_periods", writesServicePeriods, []string{
		"InsertServicePeriod", "InsertRenewalPeriods", "MarkServicePeriodPaid", "MarkServicePeriodsFollowed", "CloseServicePeriods",
		"ExtendServicePeriod", "CancelUnpaidServicePeriod", "AddServicePeriodNotices", "ReissueServicePeriod",
	}},
	{"orders.paid_until", func(sql string) bool { return writesOrdersColumn("paid_until", sql) }, []string{"SetOrderPaidUntil"}},
	{"orders.renews", func(sql string) bool { return writesOrdersColumn("renews", sql) }, []string{"SetOrderRenews"}},
}

// periodCalls matches a call of a store function that runs one of them
// (store.SetPaidEnd runs SetOrderPaidUntil), through the store package or
// a query set (store.Q(tx).X, q.X); not a method of the same name on
// another type (order.Service.ExtendServicePeriod).
var periodCalls = func() *regexp.Regexp {
	names := []string{"SetPaidEnd"}
	for _, w := range periodWriters {
		names = append(names, w.queries...)
	}
	return regexp.MustCompile(`(\bstore\.|\)\.|\bq\.)(` + strings.Join(names, "|") + `)\(`)
}()

// periodOwner is the one file that calls them, beside the store's wrappers.
var periodOwner = []string{"internal/order/periods.go", "internal/store/service_periods.go"}

// writesServicePeriods matches an UPDATE of or an INSERT into
// service_periods.
func writesServicePeriods(sql string) bool {
	return regexp.MustCompile(`(?is)\b(UPDATE|INSERT\s+INTO)\s+service_periods\b`).MatchString(sql)
}

// writesOrdersColumn matches an UPDATE of orders whose SET list names
// column, or an INSERT into orders whose column list does.
func writesOrdersColumn(column, sql string) bool {
	named := regexp.MustCompile(`(?i)(^|[\s,.(])` + column + `\s*(=|,|\)|$)`)
	update := regexp.MustCompile(`(?is)\bUPDATE\s+orders\b(?:\s+(?:AS\s+)?\w+)?\s+SET\s+(.*?)(?:\bWHERE\b|\bFROM\b|\bRETURNING\b|;|$)`)
	for _, m := range update.FindAllStringSubmatch(sql, -1) {
		if named.MatchString(m[1]) {
			return true
		}
	}
	insert := regexp.MustCompile(`(?is)\bINSERT\s+INTO\s+orders\s*\(([^)]*)\)`)
	for _, m := range insert.FindAllStringSubmatch(sql, -1) {
		if named.MatchString(m[1]) {
			return true
		}
	}
	return false
}

// writesPeriods matches SQL that writes any of the periods' columns.
func writesPeriods(sql string) bool {
	for _, w := range periodWriters {
		if w.writes(sql) {
			return true
		}
	}
	return false
}

// An order's periods have one owner (internal/order's periods.go), as
// orders.status has Transition: a query that writes service_periods,
// orders.paid_until or orders.renews and is not that column's writer, a
// call of one of those queries from another file, or SQL in Go that writes
// them fails here.
func TestPeriodsHaveOneOwner(t *testing.T) {
	t.Parallel()
	blocks := queryBlocks(t)
	for _, w := range periodWriters {
		var queries []string
		for name, sql := range blocks {
			if w.writes(sql) {
				queries = append(queries, name)
			}
		}
		sort.Strings(queries)
		want := append([]string(nil), w.queries...)
		sort.Strings(want)
		if strings.Join(queries, ",") != strings.Join(want, ",") {
			t.Errorf("queries writing %s: %v, want only %v (one owner: internal/order/periods.go)", w.what, queries, want)
		}
	}
	allowed := map[string]bool{}
	for _, f := range periodOwner {
		allowed[f] = true
	}
	for path, src := range productionGo(t) {
		if !allowed[path] && periodCalls.MatchString(src) {
			t.Errorf("%s writes an order's periods (%s): go through internal/order/periods.go", path, periodCalls.FindString(src))
		}
		if writesPeriods(src) {
			t.Errorf("%s holds SQL writing an order's periods: go through internal/order/periods.go", path)
		}
	}
}

// The period writers' matchers find each way SQL can write the columns,
// and not the reads or the other columns.
func TestWritesPeriodsMatcher(t *testing.T) {
	t.Parallel()
	for sql, want := range map[string]bool{
		"UPDATE service_periods SET notices = @n WHERE order_id = @id":                      true,
		"INSERT INTO service_periods (order_id) VALUES (@id)":                               true,
		"WITH c AS (SELECT 1) UPDATE orders SET renews = false, updated_at = @at FROM c":    true,
		"UPDATE orders o SET updated_at = @at, paid_until = @p WHERE id = @id":              true,
		"UPDATE orders SET renews=@r":                                                       true,
		"INSERT INTO orders (id, renews) VALUES (@id, false)":                               true,
		"INSERT INTO orders (id, paid_until) VALUES (@id, @p)":                              true,
		"SELECT * FROM service_periods WHERE order_id = @id":                                false,
		"UPDATE orders SET status = @s WHERE id = @id AND renews":                           false,
		"UPDATE orders SET status = @s WHERE paid_until < @now":                             false,
		"INSERT INTO orders (id, status) VALUES (@id, @s)":                                  false,
		"UPDATE orders SET renewal_price = @p, updated_at = @at WHERE id = @id RETURNING *": false,
	} {
		if got := writesPeriods(sql); got != want {
			t.Errorf("writesPeriods(%q) = %v, want %v", sql, got, want)
		}
	}
}

// audit.Write (internal/audit) is the one writer of audit_log: two queries
// insert into it, a row (InsertAuditLog) and the rows a pipelined
// transaction merges (InsertAuditLogs), both sent by store.AppendAudit.
func TestAuditLogHasOneWriter(t *testing.T) {
	t.Parallel()
	insert := regexp.MustCompile(`(?is)\bINSERT\s+INTO\s+audit_log\b`)
	var writers []string
	for name, sql := range queryBlocks(t) {
		if insert.MatchString(sql) {
			writers = append(writers, name)
		}
	}
	sort.Strings(writers)
	if want := []string{"InsertAuditLog", "InsertAuditLogs"}; !slices.Equal(writers, want) {
		t.Errorf("queries inserting into audit_log: %v, want only %v (write through audit.Write)", writers, want)
	}
	for path, src := range productionGo(t) {
		if insert.MatchString(src) {
			t.Errorf("%s inserts into audit_log: write through audit.Write", path)
		}
	}
}
