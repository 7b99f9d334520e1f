package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	identitypb "github.com/rustbill/paymentd/gen/billing/identity"
	"github.com/rustbill/paymentd/gen/billing/identity/identitypbconnect"
	"github.com/rustbill/paymentd/internal/pgcluster"
	"github.com/rustbill/paymentd/internal/testdb"
	"github.com/rustbill/paymentd/internal/testkit"
)

// opsDocFiles are the operator's documents whose shell lines run.
var opsDocFiles = []string{"docs/operations.md", "docs/runbooks.md"}

// opsDocExcused are paymentd commands of the documents that are not run, by
// their text as documented (one form of a table row), with the reason. A
// documented paymentd command that neither runs nor is listed here fails
// the test.
var opsDocExcused = map[string]string{}

// opsServing are the commands that serve until stopped: started, stopped
// once ready, and then they must exit 0. The fakes serve on the address
// --addr names, a fixed port by default: they are given a free one.
var opsServing = map[string]bool{
	"serve": true, "dev": true, "dev fake-epay": true, "dev fake-alipay": true, "dev fake-wechatpay": true, "dev fake-provider": true,
}

// The shell lines of docs/operations.md and docs/runbooks.md run as an
// operator types them, each a process of its own with this binary as the
// `paymentd` on the PATH, against a real database:
//
//   - every `paymentd …` command: each line of a ```sh block and each inline
//     code span, the command table's rows once per documented form
//     (`[--config F]` with and without it, `up|down|status` one each);
//   - the other lines of the ```sh blocks: psql, createdb, pg_dump and
//     pg_restore against the test server (the documents' role and databases
//     made under names of the test's own), openssl, and curl against a
//     `paymentd serve` the test runs;
//   - the runbooks' inline `psql "$DB" -c "…"` queries, on the test database.
//
// Placeholders are filled with real values: `--config …`, `F`, `FILE`,
// `/etc/paymentd/paymentd.toml` and `scratch.toml` name a configuration of
// the test database, `U` an admin (made first, unless the command makes
// it), `--password-file F` a file with a password, `--type T FILE` a shipped
// plugin, `db.internal` and `…` the test server and a password. Each
// command must exit 0, and its table row must list 0. A command that serves
// is stopped once /ready answers (or, for a fake, once it printed where it
// listens) and must then exit 0. A command named without what its row
// requires (`run paymentd admin reset-password first`) is a mention: its
// --help must exit 0. The log lists what ran, how, and what did not, and
// why.
func TestOperationsDocCommandsRunAsWritten(t *testing.T) {
	t.Parallel()
	for _, need := range []string{"bash", "curl", "openssl", "jq"} {
		_, err := exec.LookPath(need)
		require.NoError(t, err, "the documents' commands need %s on the PATH", need)
	}
	root, err := filepath.Abs(filepath.Join("..", ".."))
	require.NoError(t, err)
	doc := &opsDoc{}
	for _, rel := range opsDocFiles {
		doc.read(t, root, rel)
	}
	require.NotEmpty(t, doc.rows, "docs/operations.md has no command table (| command | … | exit code |)")

	e := newOpsEnv(t, root, doc)
	start := time.Now()
	e.runAll()
	t.Logf("ran the documents' commands in %s", time.Since(start).Round(10*time.Millisecond))
	e.report()
}

// opsLine is one shell line of the documents: a command of a ```sh block,
// or an inline code span (one line per documented form of a table row).
type opsLine struct {
	places []string // file:line where it is written
	text   string   // as documented
	kind   string   // "paymentd", or the command it runs (psql, curl, …)
	block  *opsBlock

	// What became of it.
	ran     string // the line as it ran (or would have), placeholders filled
	started bool   // it ran: code, out and took are its
	code    int
	out     string
	took    time.Duration
	note    string // how it ran, when not simply to its end
	skipped string // why it did not run
	problem string // why it failed
}

// opsBlock is a ```sh block: its lines run in order, in one directory.
type opsBlock struct {
	place string
	lines []*opsLine
	api   bool // it calls the service ($API): it runs while a paymentd serve is up
	work  *opsWork
}

// cliRow is a row of the command table of docs/operations.md.
type cliRow struct {
	place string
	path  string // the command's words: "admin create-admin"
	needs int    // flags and arguments outside [brackets]
	codes []int  // the exit codes its last cell lists
}

type opsDoc struct {
	lines  []*opsLine // in the documents' order
	inline map[string]*opsLine
	blocks []*opsBlock
	rows   map[string]cliRow
}

var (
	opsFenceRE = regexp.MustCompile("^\\s*```\\s*([A-Za-z]*)")
	// A code span; it may run over a line break, not over a blank line.
	opsSpanRE = regexp.MustCompile("`([^`\\n]+(?:\\n[^`\\n]+)*?)`")
	// A paymentd command: at the start of a command (after variable
	// assignments and wrappers such as sudo), of a pipeline's stage or of a
	// command substitution. A line that names paymentd elsewhere (a log
	// message quoted in a span) is not one.
	opsInvokesRE = regexp.MustCompile(`(?:^|[|;&(]\s*)` +
		`(?:[A-Za-z_][A-Za-z0-9_]*=(?:\$\([^)]*\)|"[^"]*"|'[^']*'|[^\s"'])*\s+|sudo(?:\s+-u\s+\S+)?\s+|env\s+|exec\s+|nohup\s+|time\s+)*` +
		`paymentd\s+[a-z]`)
	opsAssignRE      = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*=`)
	opsOptionalRE    = regexp.MustCompile(`\[(-[^\[\]]*)\]`)
	opsAlternativeRE = regexp.MustCompile(`^[a-z0-9-]+(?:\|[a-z0-9-]+)+$`)
	opsPlaceholderRE = regexp.MustCompile(`^[A-Z][A-Z_]*$`)
	opsWordRE        = regexp.MustCompile(`^[a-z][a-z0-9-]*$`)
	opsCodeRE        = regexp.MustCompile(`(?:^|,)\s*(\d+)\b`)
)

// read collects rel's shell lines and, from docs/operations.md, the
// command table.
func (d *opsDoc) read(t *testing.T, root, rel string) {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(root, rel))
	require.NoError(t, err)
	if d.inline == nil {
		d.inline = map[string]*opsLine{}
		d.rows = map[string]cliRow{}
	}
	// prose is the file with the fenced blocks' lines blanked, so that
	// code spans are looked for outside them only.
	var prose []string
	var fence []string
	var info string
	fenceAt, inFence := 0, false
	for i, l := range strings.Split(string(raw), "\n") {
		m := opsFenceRE.FindStringSubmatch(l)
		switch {
		case m != nil && !inFence:
			inFence, info, fenceAt, fence = true, m[1], i+1, nil
		case m != nil:
			inFence = false
			if info == "sh" || info == "bash" || info == "shell" {
				d.addBlock(rel, fenceAt, fence)
			}
		case inFence:
			fence = append(fence, l)
		default:
			prose = append(prose, l)
			continue
		}
		prose = append(prose, "")
	}
	require.False(t, inFence, "%s: a fence opened at line %d is not closed", rel, fenceAt)

	text := strings.Join(prose, "\n")
	for _, m := range opsSpanRE.FindAllStringSubmatchIndex(text, -1) {
		line := 1 + strings.Count(text[:m[0]], "\n")
		span := strings.TrimSpace(strings.ReplaceAll(text[m[2]:m[3]], "\n", " "))
		table := strings.HasPrefix(strings.TrimSpace(prose[line-1]), "|")
		if table {
			span = strings.ReplaceAll(span, `\|`, "|")
		}
		place := fmt.Sprintf("%s:%d", rel, line)
		switch {
		case opsInvokesRE.MatchString(span):
			for _, form := range expandForms(span) {
				d.addInline(place, form)
			}
		case strings.HasPrefix(span, `psql "$`):
			d.addInline(place, span)
		}
	}
	d.readTable(t, rel, prose)
}

func (d *opsDoc) addInline(place, text string) {
	if l, ok := d.inline[text]; ok {
		if !slices.Contains(l.places, place) {
			l.places = append(l.places, place)
		}
		return
	}
	l := &opsLine{places: []string{place}, text: text, kind: lineKind(text)}
	d.inline[text] = l
	d.lines = append(d.lines, l)
}

func (d *opsDoc) addBlock(rel string, fenceAt int, body []string) {
	b := &opsBlock{place: fmt.Sprintf("%s:%d", rel, fenceAt)}
	for _, c := range splitShell(body, fenceAt+1) {
		l := &opsLine{places: []string{fmt.Sprintf("%s:%d", rel, c.line)}, text: c.text, kind: lineKind(c.text), block: b}
		b.lines = append(b.lines, l)
		b.api = b.api || strings.Contains(c.text, "$API")
		d.lines = append(d.lines, l)
	}
	if len(b.lines) > 0 {
		d.blocks = append(d.blocks, b)
	}
}

// readTable reads the table whose header is | command | … | exit code |.
func (d *opsDoc) readTable(t *testing.T, rel string, prose []string) {
	t.Helper()
	in := false
	for i, l := range prose {
		s := strings.TrimSpace(l)
		if !in {
			in = strings.HasPrefix(s, "| command |") && strings.Contains(s, "exit code")
			continue
		}
		if !strings.HasPrefix(s, "|") {
			return
		}
		cells := tableCells(s)
		if len(cells) < 3 || strings.Trim(cells[0], "-: ") == "" {
			continue
		}
		last := cells[len(cells)-1]
		var codes []int
		for _, m := range opsCodeRE.FindAllStringSubmatch(last, -1) {
			n, err := strconv.Atoi(m[1])
			require.NoError(t, err)
			codes = append(codes, n)
		}
		for _, m := range opsSpanRE.FindAllStringSubmatch(cells[0], -1) {
			form := strings.ReplaceAll(m[1], `\|`, "|")
			path, needs := formPath(form)
			require.NotEmpty(t, path, "%s:%d: %q is not a paymentd command", rel, i+1, form)
			d.rows[path] = cliRow{place: fmt.Sprintf("%s:%d", rel, i+1), path: path, needs: needs, codes: codes}
		}
	}
}

// tableCells splits a table row at the pipes that are not escaped.
func tableCells(row string) []string {
	var cells []string
	var b strings.Builder
	for i := 0; i < len(row); i++ {
		switch {
		case row[i] == '\\' && i+1 < len(row) && row[i+1] == '|':
			b.WriteString(`\|`)
			i++
		case row[i] == '|':
			cells = append(cells, strings.TrimSpace(b.String()))
			b.Reset()
		default:
			b.WriteByte(row[i])
		}
	}
	cells = append(cells, strings.TrimSpace(b.String()))
	// The row's leading and trailing pipes leave an empty cell each.
	return cells[1 : len(cells)-1]
}

// formPath reads a documented form: its command words, and how many flags
// and arguments it needs (those outside [brackets]; a flag's PLACEHOLDER
// value is the flag's).
func formPath(form string) (path string, needs int) {
	words := strings.Fields(form)
	if len(words) == 0 || words[0] != "paymentd" {
		return "", 0
	}
	words = words[1:]
	var cmd []string
	for len(words) > 0 && opsWordRE.MatchString(words[0]) {
		cmd, words = append(cmd, words[0]), words[1:]
	}
	rest := strings.Join(words, " ")
	for opsOptionalRE.MatchString(rest) {
		rest = opsOptionalRE.ReplaceAllString(rest, "")
	}
	afterFlag := false
	for _, w := range strings.Fields(rest) {
		switch {
		case strings.HasPrefix(w, "-"):
			needs, afterFlag = needs+1, true
		case afterFlag && opsPlaceholderRE.MatchString(w):
			afterFlag = false
		default:
			needs, afterFlag = needs+1, false
		}
	}
	return strings.Join(cmd, " "), needs
}

// expandForms turns the table's notation into the commands it stands for:
// each [--optional part] with and without it, each up|down|status word
// once per alternative.
func expandForms(s string) []string {
	if loc := opsOptionalRE.FindStringSubmatchIndex(s); loc != nil {
		with := s[:loc[0]] + s[loc[2]:loc[3]] + s[loc[1]:]
		without := s[:loc[0]] + s[loc[1]:]
		return append(expandForms(with), expandForms(without)...)
	}
	words := strings.Fields(s)
	for i, w := range words {
		if opsAlternativeRE.MatchString(w) {
			var out []string
			for _, alt := range strings.Split(w, "|") {
				out = append(out, expandForms(strings.Join(slices.Concat(words[:i], []string{alt}, words[i+1:]), " "))...)
			}
			return out
		}
	}
	return []string{strings.Join(words, " ")}
}

// lineKind is "paymentd" for a line that runs paymentd, else the first
// command it runs.
func lineKind(s string) string {
	if opsInvokesRE.MatchString(s) {
		return "paymentd"
	}
	for _, w := range strings.Fields(s) {
		if !opsAssignRE.MatchString(w) {
			return w
		}
	}
	return ""
}

type shellCommand struct {
	line int
	text string
}

// splitShell cuts a block into commands: a command runs on over lines
// ending in a backslash, and through its here-document.
func splitShell(body []string, firstLine int) []shellCommand {
	var out []shellCommand
	for i := 0; i < len(body); i++ {
		if s := strings.TrimSpace(body[i]); s == "" || strings.HasPrefix(s, "#") {
			continue
		}
		c := shellCommand{line: firstLine + i}
		cmd := []string{body[i]}
		for strings.HasSuffix(body[i], "\\") && i+1 < len(body) {
			i++
			cmd = append(cmd, body[i])
		}
		if m := regexp.MustCompile(`<<-?'?(\w+)'?`).FindStringSubmatch(body[i]); m != nil {
			for i+1 < len(body) {
				i++
				cmd = append(cmd, body[i])
				if strings.TrimSpace(body[i]) == m[1] {
					break
				}
			}
		}
		c.text = strings.Join(cmd, "\n")
		out = append(out, c)
	}
	return out
}

// shellWords splits s at blanks outside quotes, keeping the quotes.
func shellWords(s string) []string {
	var out []string
	var b strings.Builder
	var quote rune
	in := false
	for _, r := range s {
		switch {
		case quote != 0:
			b.WriteRune(r)
			if r == quote {
				quote = 0
			}
		case r == '\'' || r == '"':
			quote, in = r, true
			b.WriteRune(r)
		case r == ' ' || r == '\t' || r == '\n':
			if in {
				out = append(out, b.String())
				b.Reset()
				in = false
			}
		default:
			in = true
			b.WriteRune(r)
		}
	}
	if in {
		out = append(out, b.String())
	}
	return out
}

// opsPG is the test server and the documents' role and databases on it:
// each name the documents use ("paymentd", "paymentd_restored") is made
// under a name of the test's own, dropped at the end.
type opsPG struct {
	host, port, user, password, query string
	role, rolePassword                string // the documents' role paymentd

	mu  sync.Mutex
	dbs map[string]string // the documents' database name → the test's
}

func newOpsPG(t *testing.T) *opsPG {
	t.Helper()
	base, err := testdb.BaseURL(context.Background())
	require.NoError(t, err)
	u, err := url.Parse(base)
	require.NoError(t, err, "the documents' commands need the test server as a URL")
	require.Contains(t, []string{"postgres", "postgresql"}, u.Scheme, "the documents' commands need the test server as a URL, got %s", base)
	p := &opsPG{host: u.Hostname(), port: cmpOr(u.Port(), "5432"), user: u.User.Username(), query: u.RawQuery,
		role: "paymentd_test_opsdoc_" + randomHex(t, 4), rolePassword: "pw-" + randomHex(t, 8), dbs: map[string]string{}}
	p.password, _ = u.User.Password()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		conn, err := pgx.Connect(ctx, base)
		if err != nil {
			t.Error(err)
			return
		}
		defer conn.Close(ctx)
		p.mu.Lock()
		defer p.mu.Unlock()
		for _, name := range p.dbs {
			if _, err := conn.Exec(ctx, "DROP DATABASE IF EXISTS "+pgx.Identifier{name}.Sanitize()+" WITH (FORCE)"); err != nil {
				t.Error(err)
			}
		}
		if _, err := conn.Exec(ctx, "DROP ROLE IF EXISTS "+pgx.Identifier{p.role}.Sanitize()); err != nil {
			t.Error(err)
		}
	})
	return p
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

func randomHex(t *testing.T, n int) string {
	t.Helper()
	b := make([]byte, n)
	_, err := rand.Read(b)
	require.NoError(t, err)
	return hex.EncodeToString(b)
}

// db is the test's name for the documents' database name: like testdb's
// clones, paymentd_test_<label>_<time>_<random>, so that a run that dies
// leaves nothing the next run's sweep keeps.
func (p *opsPG) db(name string) string {
	p.mu.Lock()
	defer p.mu.Unlock()
	if n, ok := p.dbs[name]; ok {
		return n
	}
	var b [4]byte
	_, _ = rand.Read(b[:])
	n := "paymentd_test_opsdoc_" + strconv.FormatInt(time.Now().Unix(), 36) + "_" + hex.EncodeToString(b[:])
	p.dbs[name] = n
	return n
}

// docName is the documents' name of one of the test's databases.
func (p *opsPG) docName(name string) string {
	p.mu.Lock()
	defer p.mu.Unlock()
	for doc, n := range p.dbs {
		if n == name {
			return doc
		}
	}
	return ""
}

// roleOf is the test's role for the documents' one: postgres stays the
// server's superuser, any other is the documents' service role.
func (p *opsPG) roleOf(name string) string {
	if name == "postgres" || name == "" {
		return p.user
	}
	return p.role
}

// url is a URL of the test server for a role and a database.
func (p *opsPG) url(role, db string) string {
	u := url.URL{Scheme: "postgres", Host: net.JoinHostPort(p.host, p.port), Path: "/" + db, RawQuery: p.query}
	switch {
	case role == p.role:
		u.User = url.UserPassword(role, p.rolePassword)
	case p.password != "":
		u.User = url.UserPassword(role, p.password)
	default:
		u.User = url.User(role)
	}
	return u.String()
}

var opsURLRE = regexp.MustCompile(`postgres(?:ql)?://[^\s"']+`)

// urls replaces every PostgreSQL URL in s by one of the test server with
// the same role and database, as the test names them.
func (p *opsPG) urls(s string) string {
	return opsURLRE.ReplaceAllStringFunc(s, func(u string) string {
		rest := u[strings.Index(u, "://")+3:]
		userinfo, hosts, ok := strings.Cut(rest, "@")
		if !ok {
			userinfo, hosts = "", rest
		}
		user, _, _ := strings.Cut(userinfo, ":")
		_, db, _ := strings.Cut(hosts, "/")
		db, _, _ = strings.Cut(db, "?")
		return p.url(p.roleOf(user), p.db(db))
	})
}

var (
	opsRoleSQLRE = regexp.MustCompile(`(?i)\b(ROLE|USER)\s+([A-Za-z_][A-Za-z0-9_]*)`)
	opsPwSQLRE   = regexp.MustCompile(`(?i)(PASSWORD\s+)'…'`)
)

// libpq fills a psql, createdb, pg_dump or pg_restore line in: hosts and
// ports the test server's, the documents' role and databases the test's.
// It also answers the databases the line creates and restores into (by
// the documents' names).
func (p *opsPG) libpq(line string) (filled string, created, restored []string, err error) {
	words := shellWords(strings.ReplaceAll(line, "\\\n", " "))
	tool := words[0]
	var out []string
	hasHost, hasPort := false, false
	for i := 0; i < len(words); i++ {
		w := words[i]
		next := func() string {
			if i+1 < len(words) {
				i++
				return words[i]
			}
			return ""
		}
		switch {
		case i == 0:
			out = append(out, w)
		case w == "-h":
			next()
			out = append(out, w, p.host)
			hasHost = true
		case w == "-p":
			next()
			out = append(out, w, p.port)
			hasPort = true
		case w == "-U" || w == "-O":
			out = append(out, w, p.roleOf(strings.Trim(next(), `"'`)))
		case w == "-c":
			sql := opsRoleSQLRE.ReplaceAllStringFunc(next(), func(m string) string {
				s := opsRoleSQLRE.FindStringSubmatch(m)
				return s[1] + " " + p.roleOf(s[2])
			})
			out = append(out, w, opsPwSQLRE.ReplaceAllString(sql, "${1}'"+p.rolePassword+"'"))
		case w == "-d" || (!strings.HasPrefix(w, "-") && tool != "pg_restore"):
			arg := w
			if w == "-d" {
				arg = next()
			}
			switch {
			case strings.Contains(arg, "://"):
				if tool == "pg_restore" {
					restored = append(restored, p.docName(dbOfURL(p.urls(strings.Trim(arg, `"'`)))))
				}
				arg = p.urls(arg)
			case strings.HasPrefix(arg, `"$`) || strings.HasPrefix(arg, "$"):
			default:
				name := strings.Trim(arg, `"'`)
				if tool == "createdb" {
					created = append(created, name)
				}
				arg = p.db(name)
			}
			if w == "-d" {
				out = append(out, w)
			}
			out = append(out, arg)
		default:
			out = append(out, w)
			if w == "-f" {
				out = append(out, next())
			}
		}
	}
	if hasHost && !hasPort {
		out = slices.Insert(out, slices.Index(out, "-h")+2, "-p", p.port)
	}
	filled = strings.Join(out, " ")
	if strings.Contains(filled, "…") || strings.Contains(filled, ".internal") {
		return "", nil, nil, fmt.Errorf("a placeholder this test cannot fill is left: %s", filled)
	}
	return filled, created, restored, nil
}

func dbOfURL(u string) string {
	parsed, err := url.Parse(u)
	if err != nil {
		return ""
	}
	return strings.TrimPrefix(parsed.Path, "/")
}

// opsEnv is what the commands run with: the test database, an admin, a
// paymentd on the PATH, and the documents' lines with their outcome.
type opsEnv struct {
	t        *testing.T
	root     string
	doc      *opsDoc
	pg       *opsPG
	path     string // PATH: paymentd first, then the PostgreSQL client tools
	tmp      string
	shared   string // the migrated test database most commands use
	pool     *pgxpool.Pool
	password string
	keeper   string // the admin made first
	plugin   string // a shipped plugin, for plugin check FILE

	slots chan struct{} // processes running at once

	mu     sync.Mutex
	nextID int

	apiClaimed bool // a serve runs the API blocks
}

const opsPassword = "opsdoc-admin-password"

func newOpsEnv(t *testing.T, root string, doc *opsDoc) *opsEnv {
	t.Helper()
	exe, err := os.Executable()
	require.NoError(t, err)
	tmp := t.TempDir()
	// bin/paymentd runs this binary as paymentd, and notes its pid for the
	// test to signal a command that serves.
	bin := filepath.Join(tmp, "bin")
	require.NoError(t, os.Mkdir(bin, 0o755))
	script := "#!/bin/sh\n" +
		"if [ -n \"${OPSDOC_PIDFILE:-}\" ]; then echo $$ >>\"$OPSDOC_PIDFILE\"; fi\n" +
		runMainEnv + "=1 exec " + strconv.Quote(exe) + " \"$@\"\n"
	require.NoError(t, os.WriteFile(filepath.Join(bin, "paymentd"), []byte(script), 0o755))
	pgBin, err := pgcluster.FindBinaries()
	require.NoError(t, err, "the documents' psql, createdb, pg_dump and pg_restore")

	e := &opsEnv{
		t: t, root: root, doc: doc, pg: newOpsPG(t), tmp: tmp,
		path:     bin + string(os.PathListSeparator) + pgBin + string(os.PathListSeparator) + os.Getenv("PATH"),
		shared:   testdb.URL(t),
		password: opsPassword,
		keeper:   "opsdoc_keeper",
		plugin:   filepath.Join(root, "plugins", "gateway", "epay.lua"),
		slots:    make(chan struct{}, 4),
	}
	e.pool, err = pgxpool.New(context.Background(), e.shared)
	require.NoError(t, err)
	t.Cleanup(e.pool.Close)

	// A real admin first, made as the documents make one: the admin
	// commands' other admins copy its password hash.
	w := e.work(e.shared)
	require.NoError(t, w.writeDefaultConfig())
	r := e.short(w, fmt.Sprintf("paymentd admin create-admin --username %s --password-file %s", e.keeper, w.passwordFile))
	require.Equal(t, 0, r.code, "making the first admin:\n%s", r.out)
	return e
}

// opsWork is a working directory with a configuration for one database.
type opsWork struct {
	dir, config, passwordFile string
	port                      int
	toml                      string
	// A block's lines run one after the other, a chain the others do not
	// wait for: they take no slot.
	sequential bool
}

// work makes a directory with etc/paymentd.toml for db, and a password
// file. It runs on the test's goroutine (it fails the test).
func (e *opsEnv) work(db string) *opsWork {
	t := e.t
	e.mu.Lock()
	e.nextID++
	id := e.nextID
	e.mu.Unlock()
	w := &opsWork{dir: filepath.Join(e.tmp, fmt.Sprintf("run%d", id))}
	require.NoError(t, os.MkdirAll(filepath.Join(w.dir, "etc"), 0o755))
	w.config = filepath.Join(w.dir, "etc", "paymentd.toml")
	w.passwordFile = filepath.Join(w.dir, "etc", "admin-password")
	w.port = testkit.FreePort(t)
	w.toml = fmt.Sprintf(`[server]
host = "127.0.0.1"
port = %d
public_url = "http://127.0.0.1:%d"

[metrics]
port = 0

[db]
url = %q

[jwt]
secret = %q

[bootstrap]
admin_password = %q

[plugins]
dir = %q

[secrets]
current = "opsdoc"

[secrets.keys]
opsdoc = %q
`, w.port, w.port, db, cliSecret, e.password, filepath.Join(e.root, "plugins"), b64Key(9))
	require.NoError(t, os.WriteFile(w.config, []byte(w.toml), 0o600))
	require.NoError(t, os.WriteFile(w.passwordFile, []byte(e.password+"\n"), 0o600))
	return w
}

// writeDefaultConfig puts the configuration in ./paymentd.toml too, where a
// command without --config finds it.
func (w *opsWork) writeDefaultConfig() error {
	return os.WriteFile(filepath.Join(w.dir, "paymentd.toml"), []byte(w.toml), 0o600)
}

func (e *opsEnv) newName() string {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.nextID++
	return fmt.Sprintf("opsdoc%d", e.nextID)
}

// command is bash running script in w as the operator's shell would, with
// the variables the documents use set.
func (e *opsEnv) command(ctx context.Context, w *opsWork, script string, env ...string) *exec.Cmd {
	c := exec.CommandContext(ctx, "bash", "-c", "set -uo pipefail\n"+script)
	c.Dir = w.dir
	c.Env = append(childEnv(nil), "PATH="+e.path, "PW="+e.password, "LC_ALL=C.UTF-8")
	c.Env = append(c.Env, env...)
	c.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	c.Cancel = func() error { return syscall.Kill(-c.Process.Pid, syscall.SIGKILL) }
	c.WaitDelay = 5 * time.Second
	return c
}

type opsResult struct {
	ran, out, note string
	problem        string // besides the exit code
	code           int
	took           time.Duration
}

// short runs a line that ends by itself: standard input holds the
// password, as an operator types it when a command asks.
func (e *opsEnv) short(w *opsWork, line string, env ...string) opsResult {
	return e.shortIn(w, line, e.password+"\n", env...)
}

func (e *opsEnv) shortIn(w *opsWork, line, stdin string, env ...string) opsResult {
	if !w.sequential {
		e.slots <- struct{}{}
		defer func() { <-e.slots }()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	c := e.command(ctx, w, line, env...)
	c.Stdin = strings.NewReader(stdin)
	start := time.Now()
	out, err := c.CombinedOutput()
	r := opsResult{ran: line, out: string(out), code: -1, took: time.Since(start)}
	if c.ProcessState != nil {
		r.code = c.ProcessState.ExitCode()
	} else {
		r.out += err.Error()
	}
	if ctx.Err() != nil {
		r.problem = "killed after 90 s: does it serve? (opsServing)"
	}
	return r
}

// serving runs a line that serves until stopped: once ready (its /ready
// answers 200, or a fake printed where it listens) hook runs, then the
// command is stopped as an operator stops it (SIGTERM for serve, as
// systemd does; Ctrl-C for dev and the fakes).
func (e *opsEnv) serving(w *opsWork, line, path string, hook func(base string)) opsResult {
	// A slot while it starts; ready, it waits like the operator does.
	e.slots <- struct{}{}
	var release sync.Once
	free := func() { release.Do(func() { <-e.slots }) }
	defer free()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	pidFile := filepath.Join(w.dir, "paymentd.pid")
	c := e.command(ctx, w, line, "OPSDOC_PIDFILE="+pidFile)
	c.Stdin = strings.NewReader("")
	var logs testkit.Logs
	c.Stdout, c.Stderr = &logs, &logs
	start := time.Now()
	r := opsResult{ran: line}
	if err := c.Start(); err != nil {
		r.code, r.out = -1, err.Error()
		return r
	}
	done := make(chan struct{})
	go func() { _ = c.Wait(); close(done) }()
	base := fmt.Sprintf("http://127.0.0.1:%d", w.port)
	client := &http.Client{Timeout: time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	ready := func() bool {
		if strings.HasPrefix(path, "dev fake-") {
			return strings.Contains(logs.String(), "(Ctrl-C to stop)")
		}
		resp, err := client.Get(base + "/ready")
		if err != nil {
			return false
		}
		_ = resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	}
	pid := 0
	deadline := time.Now().Add(90 * time.Second)
wait:
	for {
		if pid == 0 {
			if b, err := os.ReadFile(pidFile); err == nil {
				pid, _ = strconv.Atoi(strings.TrimSpace(strings.Split(string(b), "\n")[0]))
			}
		}
		if pid != 0 && ready() {
			break
		}
		select {
		case <-done:
			break wait
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			r.problem = "neither ready nor ended within 90 s: killed"
			_ = syscall.Kill(-c.Process.Pid, syscall.SIGKILL)
			<-done
			break
		}
	}
	free()
	select {
	case <-done:
		r.problem = cmpOr(r.problem, "it ended before it was ready")
	default:
		sig, how := syscall.SIGINT, "Ctrl-C"
		if path == "serve" {
			sig, how = syscall.SIGTERM, "SIGTERM"
		}
		r.note = fmt.Sprintf("ready after %s, then stopped with %s", time.Since(start).Round(10*time.Millisecond), how)
		if hook != nil {
			hook(base)
		}
		_ = syscall.Kill(pid, sig)
		select {
		case <-done:
		case <-time.After(60 * time.Second):
			r.problem = "it did not end within 60 s of " + how + ": killed"
			_ = syscall.Kill(-c.Process.Pid, syscall.SIGKILL)
			<-done
		}
	}
	r.out, r.code, r.took = logs.String(), c.ProcessState.ExitCode(), time.Since(start)
	return r
}

// runAll runs every line: the blocks in order, in the background, the
// inline lines side by side.
func (e *opsEnv) runAll() {
	// The directories first, on the test's goroutine.
	works := map[*opsLine]*opsWork{}
	for _, l := range e.doc.lines {
		if l.block == nil {
			works[l] = e.work(e.shared)
		}
	}
	for _, b := range e.doc.blocks {
		b.work = e.work(e.shared)
		b.work.sequential = true
	}
	// migrate down rolls the latest migration back: after every other
	// command, one after the other.
	var downs []*opsLine
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for _, b := range e.doc.blocks {
			if !b.api {
				e.runBlock(b, nil)
			}
		}
	}()
	for _, l := range e.doc.lines {
		if l.block != nil {
			continue
		}
		if f := strings.Fields(l.text); l.kind == "paymentd" && slices.Contains(f, "migrate") && slices.Contains(f, "down") {
			downs = append(downs, l)
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			switch l.kind {
			case "paymentd":
				e.runPaymentd(l, works[l])
			case "psql":
				if strings.Contains(l.text, "$REPLICA") {
					l.skipped = "$REPLICA is a streaming standby, which the test server is not (pg_is_wal_replay_paused() fails on a primary)"
					return
				}
				e.record(l, e.shortIn(works[l], l.text, "", "DB="+e.shared))
				l.note = "$DB: the test database"
				if !strings.Contains(l.text, " -c ") {
					l.note += "; a session: connected, then ended by an empty input"
				}
			default:
				l.skipped = "only paymentd commands and psql queries of inline code run"
			}
		}()
	}
	wg.Wait()
	for _, l := range downs {
		e.runPaymentd(l, works[l])
		l.note = strings.TrimPrefix(l.note+"; after every other command, rolling back one more migration", "; ")
	}
	for _, b := range e.doc.blocks {
		for _, l := range b.lines {
			if b.api && !l.started && l.skipped == "" && l.problem == "" {
				l.skipped = "no paymentd serve of the documents became ready to call"
			}
		}
	}
}

// record keeps a result as l's outcome; any exit but 0 is a problem.
func (e *opsEnv) record(l *opsLine, r opsResult) {
	l.ran, l.out, l.code, l.took, l.started = r.ran, r.out, r.code, r.took, true
	if r.note != "" {
		l.note = r.note
	}
	if r.problem != "" && l.problem == "" {
		l.problem = r.problem
	}
	if r.code != 0 && l.problem == "" {
		l.problem = fmt.Sprintf("exit %d", r.code)
		if r.code == exitUsage && l.kind == "paymentd" {
			l.problem += ": paymentd refused the command line or the configuration as written"
		}
	}
}

// runBlock runs a block's lines in order in its directory; env (the API's
// variables) goes to each. A database the block creates and does not
// restore into is then set up as the service's first start does it, so
// that the blocks after it (a dump) find the service's tables.
func (e *opsEnv) runBlock(b *opsBlock, env []string) {
	w := b.work
	var created, restored []string
	creator := map[string]*opsLine{}
	for i, l := range b.lines {
		switch l.kind {
		case "paymentd":
			e.runPaymentd(l, w)
		case "psql", "createdb", "pg_dump", "pg_restore":
			line, c, r, err := e.pg.libpq(l.text)
			if err != nil {
				l.skipped = err.Error()
				continue
			}
			for _, name := range c {
				creator[name] = l
			}
			created, restored = append(created, c...), append(restored, r...)
			pgEnv := []string{"DB=" + e.shared}
			if e.pg.password != "" {
				pgEnv = append(pgEnv, "PGPASSWORD="+e.pg.password)
			}
			e.record(l, e.short(w, line, pgEnv...))
		case "openssl":
			e.record(l, e.short(w, l.text))
		case "curl":
			if !b.api {
				l.skipped = "curl of something else than the service ($API)"
				continue
			}
			// curl -s alone exits 0 on an error's answer.
			e.record(l, e.short(w, "curl() { command curl --fail-with-body \"$@\"; }\n"+l.text, env...))
			l.note = "curl with --fail-with-body, against a paymentd serve of the documents, signed in as the admin made first"
		default:
			l.skipped = fmt.Sprintf("%s is not a command this test runs", l.kind)
		}
		if l.problem != "" {
			for _, rest := range b.lines[i+1:] {
				rest.skipped = "a line before it in the block failed"
			}
			return
		}
	}
	for _, name := range created {
		if slices.Contains(restored, name) {
			continue
		}
		l := creator[name]
		r := e.short(w, "paymentd migrate up", "PAYMENTD_DB__URL="+e.pg.url(e.pg.role, e.pg.db(name)))
		l.note = fmt.Sprintf("then, as the service's first start would, paymentd migrate up as the role paymentd on %s: exit %d", name, r.code)
		if r.code != 0 {
			l.problem = fmt.Sprintf("migrating the database %s the block created: exit %d:\n%s", name, r.code, r.out)
		}
	}
}

// runAPIBlocks runs the blocks that call the service, against base,
// signed in as the admin made first.
func (e *opsEnv) runAPIBlocks(base string) {
	ids := identitypbconnect.NewIdentityServiceClient(&http.Client{Transport: &http.Transport{DisableKeepAlives: true}}, base)
	res, err := ids.AdminLogin(context.Background(), connect.NewRequest(&identitypb.AdminLoginRequest{Username: e.keeper, Password: e.password}))
	for _, b := range e.doc.blocks {
		switch {
		case !b.api:
		case err != nil:
			for _, l := range b.lines {
				l.problem = fmt.Sprintf("signing in for $ADMIN_COOKIE: %v", err)
			}
		default:
			cookie, _, _ := strings.Cut(res.Header().Get("Set-Cookie"), ";")
			e.runBlock(b, []string{"API=" + base, "ADMIN_COOKIE=" + cookie})
		}
	}
}

// runPaymentd runs a paymentd line in w (its own directory, or its
// block's).
func (e *opsEnv) runPaymentd(l *opsLine, w *opsWork) {
	if why, ok := opsDocExcused[l.text]; ok {
		l.skipped = "excused: " + why
		return
	}
	user := e.newName()
	line := e.fill(l.text, w, user)
	invs, err := e.invocations(w, line)
	if err != nil {
		l.ran, l.problem = line, err.Error()
		return
	}
	if len(invs) != 1 {
		l.ran, l.problem = line, fmt.Sprintf("runs paymentd %d times; this test runs lines that run it once", len(invs))
		return
	}
	inv := invs[0]
	for _, a := range inv.argv {
		if opsPlaceholderRE.MatchString(a) || strings.Contains(a, "…") || strings.Contains(a, ".internal") {
			l.ran, l.problem = line, fmt.Sprintf("the placeholder %q is left: teach this test what it stands for", a)
			return
		}
	}
	row, ok := e.doc.row(inv.argv)
	if !ok {
		l.ran, l.problem = line, fmt.Sprintf("paymentd %s is not a command of the command table of docs/operations.md", strings.Join(inv.argv, " "))
		return
	}
	if len(row.codes) > 0 && !slices.Contains(row.codes, 0) {
		l.problem = fmt.Sprintf("the command table (%s) lists exits %v for it, not 0", row.place, row.codes)
	}
	words := strings.Fields(row.path)
	if len(inv.argv) == len(words) && row.needs > 0 {
		// Named, not given: "run paymentd admin reset-password first".
		line = "paymentd " + row.path + " --help"
		e.record(l, e.short(w, line))
		l.note = fmt.Sprintf("a mention without what its row (%s) requires: its --help", row.place)
		return
	}
	if strings.HasPrefix(row.path, "admin ") && row.path != "admin create-admin" && slices.Contains(inv.argv, user) {
		if _, err := e.pool.Exec(context.Background(),
			`INSERT INTO admin_users (username, password_hash, display_name)
			 SELECT $1, password_hash, $1 FROM admin_users WHERE username = $2`, user, e.keeper); err != nil {
			l.ran, l.problem = line, fmt.Sprintf("making the admin %s: %v", user, err)
			return
		}
	}
	// A command that names its configuration finds no other: the
	// documents say it needs nothing more.
	if !slices.Contains(inv.argv, "--config") && inv.envDB == "" {
		if err := w.writeDefaultConfig(); err != nil {
			l.ran, l.problem = line, err.Error()
			return
		}
	} else {
		_ = os.Remove(filepath.Join(w.dir, "paymentd.toml"))
	}
	if opsServing[row.path] {
		if strings.HasPrefix(row.path, "dev fake-") && !slices.ContainsFunc(inv.argv, func(a string) bool { return strings.HasPrefix(a, "--addr") }) {
			line = regexp.MustCompile(`paymentd\s+dev\s+fake-[a-z]+`).ReplaceAllString(line, "$0 --addr 127.0.0.1:0")
		}
		var hook func(string)
		e.mu.Lock()
		if row.path == "serve" && !e.apiClaimed {
			e.apiClaimed, hook = true, e.runAPIBlocks
		}
		e.mu.Unlock()
		e.record(l, e.serving(w, line, row.path, hook))
		return
	}
	e.record(l, e.short(w, line))
}

// row is the command table's row of a command line: the longest command
// path argv starts with.
func (d *opsDoc) row(argv []string) (cliRow, bool) {
	var best cliRow
	found := false
	for path, r := range d.rows {
		w := strings.Fields(path)
		if len(w) <= len(argv) && slices.Equal(w, argv[:len(w)]) && (!found || len(w) > len(strings.Fields(best.path))) {
			best, found = r, true
		}
	}
	return best, found
}

var (
	opsConfigRE   = regexp.MustCompile(`--config(?:=|\s+)\S+`)
	opsUsernameRE = regexp.MustCompile(`--username(?:=|\s+)\S+`)
	opsPwFileRE   = regexp.MustCompile(`--password-file(?:=|\s+)\S+`)
	opsReasonRE   = regexp.MustCompile(`--reason(?:=|\s+)(?:R|"…"|…)(\s|$)`)
	opsTypeRE     = regexp.MustCompile(`--type(?:=|\s+)[A-Z]+(\s|$)`)
	opsFileRE     = regexp.MustCompile(`(^|\s)FILE(\s|$)`)
)

// fill puts real values in a paymentd line's placeholders.
func (e *opsEnv) fill(line string, w *opsWork, user string) string {
	line = e.pg.urls(line)
	line = opsConfigRE.ReplaceAllLiteralString(line, "--config "+w.config)
	line = opsUsernameRE.ReplaceAllLiteralString(line, "--username "+user)
	line = opsPwFileRE.ReplaceAllLiteralString(line, "--password-file "+w.passwordFile)
	line = opsReasonRE.ReplaceAllString(line, `--reason "the operations test"$1`)
	line = opsTypeRE.ReplaceAllString(line, "--type "+filepath.Base(filepath.Dir(e.plugin))+"$1")
	return opsFileRE.ReplaceAllString(line, "${1}"+e.plugin+"$2")
}

// opsInvocation is a paymentd command as bash hands it over.
type opsInvocation struct {
	argv  []string
	envDB string // PAYMENTD_DB__URL, when the line sets it
}

// invocations lets bash expand line (quotes, variables, pipes) with
// paymentd replaced by a function that notes what it gets. The function
// reads its standard input to the end, as paymentd does: a line that pipes
// a password in (printf … | paymentd admin create-admin) would otherwise
// see its printf killed by SIGPIPE, exit 141 under pipefail, whenever the
// function ended before printf wrote.
func (e *opsEnv) invocations(w *opsWork, line string) ([]opsInvocation, error) {
	rec := filepath.Join(w.dir, ".invocations")
	_ = os.Remove(rec)
	script := `paymentd() { cat >/dev/null; { printf '%s\0' "${PAYMENTD_DB__URL-}" "$@"; printf '\001\0'; } >>"$OPSDOC_REC"; }` + "\n" + line
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c := e.command(ctx, w, script, "OPSDOC_REC="+rec)
	c.Stdin = strings.NewReader("")
	if out, err := c.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("bash cannot run it: %v\n%s", err, out)
	}
	b, err := os.ReadFile(rec)
	if err != nil {
		return nil, nil
	}
	var out []opsInvocation
	for _, r := range strings.Split(string(b), "\x01\x00") {
		if r == "" {
			continue
		}
		f := strings.Split(strings.TrimSuffix(r, "\x00"), "\x00")
		out = append(out, opsInvocation{envDB: f[0], argv: f[1:]})
	}
	return out, nil
}

// report logs every line's outcome and fails the test for each problem
// and for each paymentd command that neither ran nor is excused.
func (e *opsEnv) report() {
	t := e.t
	var ran, notRun strings.Builder
	nRan, nNot := 0, 0
	for _, l := range e.doc.lines {
		where := l.places[0]
		if len(l.places) > 1 {
			where += fmt.Sprintf(" (and %d more)", len(l.places)-1)
		}
		if l.problem == "" && !l.started && l.skipped == "" {
			l.skipped = "nothing ran it"
			if l.kind == "paymentd" {
				l.problem = "a paymentd command of the documents that neither ran nor is excused (opsDocExcused)"
			}
		}
		if l.started {
			nRan++
			fmt.Fprintf(&ran, "  %s  `%s`\n      ran: %s\n      exit %d in %s", where, oneLine(l.text), oneLine(l.ran), l.code, l.took.Round(10*time.Millisecond))
			if l.note != "" {
				fmt.Fprintf(&ran, "; %s", l.note)
			}
			ran.WriteString("\n")
		} else {
			nNot++
			fmt.Fprintf(&notRun, "  %s  `%s`: %s\n", where, oneLine(l.text), cmpOr(l.skipped, l.problem))
		}
		if l.problem != "" {
			how := "not run"
			if l.started {
				how = fmt.Sprintf("exit %d", l.code)
			}
			t.Errorf("%s: `%s`\n%s\nas: %s\n%s %s\n%s", strings.Join(l.places, ", "), l.text, l.problem, l.ran, how, l.note, tail(l.out, 40))
		}
	}
	for text := range opsDocExcused {
		if !slices.ContainsFunc(e.doc.lines, func(l *opsLine) bool { return l.text == text }) {
			t.Errorf("opsDocExcused excuses %q, which the documents no longer hold", text)
		}
	}
	t.Logf("ran %d lines of the documents:\n%s", nRan, ran.String())
	t.Logf("did not run %d lines:\n%s", nNot, notRun.String())
}

func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

// A line that pipes a password into paymentd is read for its arguments
// without the pipe's writer being killed, however late the writer writes.
func TestTheOperationsTestReadsAPipedLineWithoutKillingItsWriter(t *testing.T) {
	e := &opsEnv{t: t, path: os.Getenv("PATH"), password: opsPassword}
	w := &opsWork{dir: t.TempDir()}
	invs, err := e.invocations(w, `{ sleep 0.3; printf '%s\n' "$PW"; } | paymentd admin create-admin --username ops`)
	require.NoError(t, err)
	require.Len(t, invs, 1)
	require.Equal(t, []string{"admin", "create-admin", "--username", "ops"}, invs[0].argv)
}
