package migrate

import (
	"context"
	"crypto/sha256"
	_ "embed" // schema.txt
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/rustbill/paymentd/internal/store"
)

// schemaText is the schema this build's migrations make, as ReadSchema
// describes it, one object a line, each with the migration that last
// changed it. TestSchemaFileIsWhatTheMigrationsMake keeps it true
// (PAYMENTD_UPDATE_SCHEMA=1 rewrites it).
//
//go:embed schema.txt
var schemaText string

// Object is one object of a schema's description: its kind ("table",
// "column", "constraint", "index", "trigger", "partition", "function",
// "procedure", "view", "matview", "sequence", "type"), its name (a
// table's objects as table.object, a function with its argument types)
// and its definition as PostgreSQL renders it, a function's source and a
// view's query as a hash. Migration is the migration that last changed
// it, in the expected description; 0 in a live one.
type Object struct {
	Migration int64
	Kind      string
	Name      string
	Def       string
}

// Key identifies the object: its kind and name.
func (o Object) Key() string { return o.Kind + " " + o.Name }

// line is the object as schema.txt holds it.
func (o Object) line() string {
	return fmt.Sprintf("%05d %s %s: %s", o.Migration, o.Kind, o.Name, o.Def)
}

// SchemaFileHeader opens schema.txt: what it is and how it is made.
const SchemaFileHeader = `# The schema this build's migrations make, one object a line, as the start's
# schema check reads it from the catalog (internal/migrate/schema.go): the
# migration that last changed the object, its kind and name, and how
# PostgreSQL renders it (a function's source and a view's query hashed).
# Generated; do not edit. After changing a migration, run
#   PAYMENTD_UPDATE_SCHEMA=1 go test ./internal/migrate -run TestSchemaFileIsWhatTheMigrationsMake
# and commit the result (docs/development.md, "Adding a column").
`

// FormatSchema renders objects as schema.txt: the header, then one line
// an object, by migration, kind and name.
func FormatSchema(objs []Object) string {
	sorted := append([]Object(nil), objs...)
	sort.Slice(sorted, func(i, j int) bool {
		a, b := sorted[i], sorted[j]
		if a.Migration != b.Migration {
			return a.Migration < b.Migration
		}
		if a.Kind != b.Kind {
			return a.Kind < b.Kind
		}
		return a.Name < b.Name
	})
	var b strings.Builder
	b.WriteString(SchemaFileHeader)
	for _, o := range sorted {
		b.WriteString(o.line())
		b.WriteByte('\n')
	}
	return b.String()
}

var schemaLine = regexp.MustCompile(`^(\d{5}) (\S+) (.+?): (.*)$`)

// ParseSchema reads a description written by FormatSchema.
func ParseSchema(text string) ([]Object, error) {
	var objs []Object
	seen := map[string]bool{}
	for n, l := range strings.Split(text, "\n") {
		if l == "" || strings.HasPrefix(l, "#") {
			continue
		}
		m := schemaLine.FindStringSubmatch(l)
		if m == nil {
			return nil, fmt.Errorf("schema description, line %d: not \"NNNNN kind name: definition\": %q", n+1, l)
		}
		v, _ := strconv.ParseInt(m[1], 10, 64)
		o := Object{Migration: v, Kind: m[2], Name: m[3], Def: m[4]}
		if seen[o.Key()] {
			return nil, fmt.Errorf("schema description, line %d: %s twice", n+1, o.Key())
		}
		seen[o.Key()] = true
		objs = append(objs, o)
	}
	return objs, nil
}

var expected = sync.OnceValue(func() []Object {
	objs, err := ParseSchema(schemaText)
	if err != nil {
		panic(err) // TestSchemaFileIsWhatTheMigrationsMake parses the same file
	}
	return objs
})

// ExpectedSchema is the schema this build's migrations make (schema.txt).
func ExpectedSchema() []Object { return expected() }

// ReadSchema describes the objects of the session's current schema that a
// migration can make (store.SchemaCatalog says what is left out).
func ReadSchema(ctx context.Context, db store.DB) ([]Object, error) {
	schema, err := store.Q(db).CurrentSchema(ctx)
	if err != nil {
		return nil, fmt.Errorf("schema check: read the current schema: %w", err)
	}
	rows, err := store.SchemaCatalog(ctx, db)
	if err != nil {
		return nil, fmt.Errorf("schema check: read the catalog: %w", err)
	}
	objs := make([]Object, 0, len(rows))
	for _, r := range rows {
		objs = append(objs, Object{Kind: r.Kind, Name: r.Name, Def: definition(r, schema)})
	}
	sort.Slice(objs, func(i, j int) bool { return objs[i].Key() < objs[j].Key() })
	return objs, nil
}

// definition is how an object is compared: the catalog's rendering without
// the schema's name, a function's source and a view's query as a hash (a
// line stays a line, and any change to the text shows).
func definition(r store.CatalogObject, schema string) string {
	def := unqualify(r.Def, schema)
	switch r.Kind {
	case "function", "procedure":
		def += " source " + digest(unqualify(r.Body, schema))
	case "view", "matview":
		def = "query " + digest(unqualify(r.Body, schema))
	}
	return def
}

// digest is a short hash of text, line endings and the space around it
// aside (a checkout with CRLF line endings makes the same functions).
func digest(text string) string {
	text = strings.TrimSpace(strings.ReplaceAll(text, "\r\n", "\n"))
	sum := sha256.Sum256([]byte(text))
	return "sha256:" + hex.EncodeToString(sum[:8])
}

// unqualify drops the schema's name before the objects it names:
// pg_get_indexdef and pg_get_triggerdef always qualify the table, so the
// same migrations run into another schema ([db].url's search_path) would
// otherwise describe differently.
func unqualify(def, schema string) string {
	for _, q := range []string{schema + ".", `"` + strings.ReplaceAll(schema, `"`, `""`) + `".`} {
		for _, before := range []string{" ", "(", ","} {
			def = strings.ReplaceAll(def, before+q, before)
		}
	}
	return def
}

// sameDefinition compares two renderings of an object, the parentheses
// aside: PostgreSQL keeps an expression's tree as it was parsed, so a
// trigger's WHEN written (a OR b) OR c renders with nested parentheses
// where pg_dump's text of it, parsed again by pg_restore, gives one flat
// OR; a database restored from a dump must describe as the one dumped.
// Grouping alone is all this leaves unseen; a changed operator, column or
// constant still differs.
func sameDefinition(a, b string) bool {
	return a == b || withoutParentheses(a) == withoutParentheses(b)
}

// withoutParentheses drops the parentheses of def outside its quoted
// literals and identifiers.
func withoutParentheses(def string) string {
	var b strings.Builder
	var quote rune
	for _, r := range def {
		switch {
		case quote != 0:
			if r == quote {
				quote = 0
			}
		case r == '\'' || r == '"':
			quote = r
		case r == '(' || r == ')':
			continue
		}
		b.WriteRune(r)
	}
	return b.String()
}

// Change says how an object of the database differs from this build's.
type Change string

// The changes a comparison finds.
const (
	// Missing: the build expects the object and the database lacks it.
	Missing Change = "missing"
	// Changed: both have it, defined differently.
	Changed Change = "changed"
	// Extra: the database has an object the build does not know.
	Extra Change = "extra"
)

// Difference is one object that differs, and whether it refuses the start.
type Difference struct {
	Change Change
	// Expected is this build's object (Missing, Changed); Found the
	// database's (Changed, Extra).
	Expected, Found Object
	// Refused: the build does not serve the database with it. Otherwise
	// it is left alone, with a warning.
	Refused bool
}

// Object is the object the difference is about.
func (d Difference) Object() Object {
	if d.Change == Extra {
		return d.Found
	}
	return d.Expected
}

// phrase is the difference in the refusal's sentence.
func (d Difference) phrase() string {
	o := d.Object()
	switch d.Change {
	case Missing:
		return fmt.Sprintf("%s is missing (%s makes it)", o.Key(), migrationName(o.Migration))
	case Changed:
		return fmt.Sprintf("%s differs from what %s makes", o.Key(), migrationName(o.Migration))
	default:
		return o.Key() + " is not this build's"
	}
}

// Detail is the difference on a line of its own, with both definitions
// (paymentd migrate status prints it).
func (d Difference) Detail() string {
	verdict := "left alone"
	if d.Refused {
		verdict = "refused"
	}
	switch d.Change {
	case Missing:
		return fmt.Sprintf("missing  %s (%s): %s [%s]", d.Expected.Key(), migrationName(d.Expected.Migration), d.Expected.Def, verdict)
	case Changed:
		return fmt.Sprintf("changed  %s (%s): this build's: %s; the database's: %s [%s]",
			d.Expected.Key(), migrationName(d.Expected.Migration), d.Expected.Def, d.Found.Def, verdict)
	default:
		return fmt.Sprintf("extra    %s: %s [%s]", d.Found.Key(), d.Found.Def, verdict)
	}
}

// compareSchema lists how live differs from expected: missing objects
// first, then changed ones, then extra ones, each by kind (tables first)
// and name. newer says the database records migrations this build does
// not have.
//
// What refuses the start (docs/decisions.md, "schema check"):
//   - an object this build expects that is missing, always: a query or a
//     migration of this build needs it;
//   - a changed object, unless the database is newer: there the newer
//     release changed it expand-then-contract, so that the previous one
//     keeps working during a rolling upgrade, and a contract step would
//     have removed something (missing);
//   - an extra object that can refuse or alter this build's writes (a
//     constraint, a trigger, a unique index, a NOT NULL column without a
//     default, on a table of this build's), unless the database is newer.
//     Other extra objects (an operator's index, view or table, a newer
//     release's table) are left alone.
func compareSchema(expected, live []Object, newer bool) []Difference {
	found := make(map[string]Object, len(live))
	for _, o := range live {
		found[o.Key()] = o
	}
	known := make(map[string]bool, len(expected))
	var diffs, extras []Difference
	for _, e := range expected {
		known[e.Key()] = true
		f, ok := found[e.Key()]
		switch {
		case !ok:
			diffs = append(diffs, Difference{Change: Missing, Expected: e, Refused: true})
		case !sameDefinition(f.Def, e.Def):
			diffs = append(diffs, Difference{Change: Changed, Expected: e, Found: f, Refused: !newer})
		}
	}
	for _, f := range live {
		if !known[f.Key()] {
			extras = append(extras, Difference{Change: Extra, Found: f, Refused: !newer && altersWrites(f, known)})
		}
	}
	order := func(ds []Difference) {
		sort.Slice(ds, func(i, j int) bool {
			a, b := ds[i], ds[j]
			if (a.Change == Missing) != (b.Change == Missing) {
				return a.Change == Missing
			}
			ka, kb := kindRank(a.Object().Kind), kindRank(b.Object().Kind)
			if ka != kb {
				return ka < kb
			}
			return a.Object().Key() < b.Object().Key()
		})
	}
	order(diffs)
	order(extras)
	return append(diffs, extras...)
}

// kinds orders the kinds of objects for the refusal, which names the first
// difference: a missing table says more than each of its columns.
var kinds = []string{"table", "partition", "column", "constraint", "index", "trigger",
	"function", "procedure", "view", "matview", "sequence", "type"}

func kindRank(kind string) int {
	for i, k := range kinds {
		if k == kind {
			return i
		}
	}
	return len(kinds)
}

// altersWrites reports whether an object this build does not know can
// refuse or change what it writes: only one on a table of this build's
// (known holds the expected objects' keys) can.
func altersWrites(o Object, known map[string]bool) bool {
	table, _, ok := strings.Cut(o.Name, ".")
	if !ok || !known["table "+table] {
		return false
	}
	switch o.Kind {
	case "constraint", "trigger":
		return true
	case "index":
		return strings.HasPrefix(o.Def, "CREATE UNIQUE INDEX")
	case "column":
		// This build's inserts do not name it: NOT NULL needs a value
		// from somewhere.
		return strings.Contains(o.Def, " not null") && !strings.Contains(o.Def, " default ") &&
			!strings.Contains(o.Def, " identity") && !strings.Contains(o.Def, " generated always as (")
	}
	return false
}

// SchemaReport is the outcome of CheckSchema.
type SchemaReport struct {
	// Objects is how many objects this build expects.
	Objects int
	// Recorded is the newest migration the database records; Known the
	// newest this build has.
	Recorded, Known int64
	// Differences, the refused ones first.
	Differences []Difference
	// Release is set when the database was compared with a release's
	// schema before newer migrations ran on it (not with this build's).
	Release string
}

// Newer reports whether the database records migrations this build does
// not have: a newer release migrated it.
func (r SchemaReport) Newer() bool { return r.Recorded > r.Known }

// Refused lists the differences that refuse the start.
func (r SchemaReport) Refused() []Difference { return r.filter(true) }

// LeftAlone lists the differences that do not (with a warning).
func (r SchemaReport) LeftAlone() []Difference { return r.filter(false) }

func (r SchemaReport) filter(refused bool) []Difference {
	var out []Difference
	for _, d := range r.Differences {
		if d.Refused == refused {
			out = append(out, d)
		}
	}
	return out
}

// Err is the refusal (a *DriftError) when a difference refuses the start.
func (r SchemaReport) Err() error {
	if len(r.Refused()) == 0 {
		return nil
	}
	return &DriftError{Report: r}
}

// LeftAloneSummary names the differences left alone, for the start's one
// warning line: the first few, and how many more.
func (r SchemaReport) LeftAloneSummary() string {
	const named = 5
	var names []string
	left := r.LeftAlone()
	for i, d := range left {
		if i == named {
			names = append(names, fmt.Sprintf("and %d more", len(left)-named))
			break
		}
		name := d.Object().Key()
		if d.Change != Extra {
			name += " (" + string(d.Change) + ")"
		}
		names = append(names, name)
	}
	return strings.Join(names, ", ")
}

// ErrSchemaDrift marks a database whose schema this build does not serve
// (errors.Is on a *DriftError). The service's commands exit 2 on it, as
// on a bad configuration: restarting cannot fix it.
var ErrSchemaDrift = errors.New("schema check: the database's schema is not the one this build expects")

// DriftError is a refused schema check. Its message is one line: the first
// refused difference, how many more there are, and the way out.
type DriftError struct {
	Report SchemaReport
}

// Is makes errors.Is(err, ErrSchemaDrift) true.
func (e *DriftError) Is(target error) bool { return target == ErrSchemaDrift }

func (e *DriftError) Error() string {
	refused := e.Report.Refused()
	var b strings.Builder
	b.WriteString(ErrSchemaDrift.Error())
	b.WriteString(": ")
	b.WriteString(refused[0].phrase())
	// The counts say what `migrate status` will list: the other refused
	// differences, and those the start leaves alone.
	n, left := len(refused)-1, len(e.Report.LeftAlone())
	switch {
	case n > 0 && left > 0:
		fmt.Fprintf(&b, " (and %d more refused, %d left alone)", n, left)
	case n > 0:
		fmt.Fprintf(&b, " (and %d more refused)", n)
	case left > 0:
		fmt.Fprintf(&b, " (and %d left alone)", left)
	}
	b.WriteString("; nothing was served: ")
	if e.Report.Release != "" {
		fmt.Fprintf(&b, "the database records migration %05d, the last of %[2]s, without %[2]s's schema, so this build's newer migrations were not applied; ",
			e.Report.Recorded, e.Report.Release)
	}
	switch {
	case e.Report.Newer():
		fmt.Fprintf(&b, "a newer release migrated this database (it records migration %05d, this build knows up to %05d) and removed what this build needs: run that release, or restore the backup taken before it",
			e.Report.Recorded, e.Report.Known)
	case preRelease(e.Report.Recorded):
		// Pre-release builds recorded the same nine migrations with other
		// contents: their databases cannot be told from a hand change.
		fmt.Fprintf(&b, "if a pre-release build (from before %[1]s) made this database, it has no upgrade path: export what you keep and start on a new database (CHANGELOG.md, %[1]s); otherwise bring its schema back to this build's (restore a backup, or undo a change made by hand)",
			FirstRelease().Version)
	default:
		b.WriteString("run the paymentd that made this database, or bring its schema back to this build's (restore a backup, recreate the database, or undo a change made by hand)")
	}
	b.WriteString(`; paymentd migrate status lists every difference (docs/operations.md, "Upgrading")`)
	return b.String()
}

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}

// CheckSchema compares the schema of pool's database with the one this
// build's migrations make, once they have run (app start, migrate up,
// the operator's commands). The report's Err refuses the start; its
// LeftAlone differences deserve a warning.
func CheckSchema(ctx context.Context, pool *pgxpool.Pool) (SchemaReport, error) {
	r := SchemaReport{Objects: len(ExpectedSchema()), Known: KnownVersion()}
	db := stdlib.OpenDBFromPool(pool)
	defer db.Close()
	p, err := newProvider(db, nil)
	if err != nil {
		return r, err
	}
	if r.Recorded, err = p.GetDBVersion(ctx); err != nil {
		return r, fmt.Errorf("schema check: read the migrations applied: %w", err)
	}
	live, err := ReadSchema(ctx, pool)
	if err != nil {
		return r, err
	}
	r.Differences = compareSchema(ExpectedSchema(), live, r.Newer())
	return r, nil
}

// migrations are the names of this build's migration files by version.
var migrations = sync.OnceValue(func() map[int64]string {
	entries, err := fs.ReadDir(FS(), ".")
	if err != nil {
		panic(err) // embedded
	}
	names := map[int64]string{}
	for _, e := range entries {
		prefix, _, ok := strings.Cut(e.Name(), "_")
		if v, err := strconv.ParseInt(prefix, 10, 64); ok && err == nil {
			names[v] = e.Name()
		}
	}
	return names
})

// KnownVersion is the newest migration of this build.
func KnownVersion() int64 {
	var newest int64
	for v := range migrations() {
		newest = max(newest, v)
	}
	return newest
}

// migrationName is a migration's file name ("00005_payments.sql"), or its
// number when this build has no such file.
func migrationName(v int64) string {
	if n, ok := migrations()[v]; ok {
		return n
	}
	return fmt.Sprintf("migration %05d", v)
}
