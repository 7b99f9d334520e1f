package harness

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/rustbill/paymentd/internal/localport"
	"github.com/rustbill/paymentd/internal/pgcluster"
)

// Options of a run.
type Options struct {
	Quick    bool
	Duration time.Duration
	Rounds   int
	OutDir   string
	Profile  bool
	Keep     bool
	Conns    int
	NoWrite  bool
	// ServiceEnv are extra PAYMENTD_* settings for paymentd, to try a
	// configuration (the report lists them).
	ServiceEnv []string
	// ExtraCeilings adds informational ceilings: the callback's SQL
	// pipelined into three round trips.
	ExtraCeilings bool
	// PgStats loads pg_stat_statements into the private cluster and prints
	// the statements that took the most time in every measurement.
	PgStats bool
	// Waits samples pg_stat_activity during every measurement of paymentd
	// and reports where its backends spent the time (running, waiting for
	// a lock, the WAL, the client), with the pool's and the concurrency
	// queue's waits from paymentd's metrics. The sampler's own reads cost
	// PostgreSQL some CPU: compare CPU figures of runs without it.
	Waits bool
	// Only limits the service workloads (comma-separated names); the
	// ceilings always run.
	Only string
	// DatabaseURL: a server to create the benchmark's databases on instead
	// of a private cluster.
	DatabaseURL string
	Log, Out    io.Writer
}

// The concurrencies of the service workloads, and of the ceilings.
var inFlights = []int{8, 32}

const ceilingClients = 8

// holder is the harness's name in leader_leases: while it holds the
// event_worker role, paymentd's worker waits (see holdWorker).
const holder = "paymentd-bench"

type bench struct {
	o         Options
	root, tmp string
	logf      func(format string, args ...any)
	paymentd  string // the built binary
	self      string // this binary: fakes, empty server, profiled serve
	pgbench   string
	pgDir     string
	// postmaster is the PostgreSQL server's pid when it runs on this
	// machine (its CPU is measured), else 0.
	postmaster int
	mainURL    string
	emptyURL   string
	dropDBs    func()
	fakes      *Proc
	svc        *Proc
	empty      *Proc
	svcPort    int
	emptyPort  int
	pprofPort  int
	// metrics: this paymentd has a [metrics] listener (with pprof), which
	// must get a port of its own for each process.
	metrics     bool
	epayURL     string
	providerURL string
	jwtSecret   string
	secretsKey  string
	adminPass   string
	pool        *pgxpool.Pool
	world       *World
	// historyRange: pending payments that only the reads use.
	historyRange Range
	rep          *Report
	sizes        sizes
	svcStarts    int
	// callbacks that succeeded, and other accounting for the invariants.
	okCallbacks, okBalance, okCreate            int
	callbackRanges, createRanges, balanceRanges []Range
}

// sizes are how many rows each workload may consume per run: its
// throughput cap times the duration, so a run ends by the clock, not by
// running out (it says so when it does).
type sizes struct {
	callback, get, create, balance, pgbenchCallback int64
	// pgbenchMinimal: the minimal settlement runs 2–3 times as fast as
	// the service's SQL.
	pgbenchMinimal int64
	history        int64
	customers      int
}

func newSizes(d time.Duration) sizes {
	s := d.Seconds()
	return sizes{
		callback: int64(6000 * s), get: int64(30000 * s), create: int64(4000 * s), balance: int64(6000 * s),
		pgbenchCallback: int64(8000 * s), pgbenchMinimal: int64(12000 * s), history: 50000, customers: 1000,
	}
}

// Run runs the benchmark and returns its report.
func Run(ctx context.Context, o Options) (*Report, error) {
	if o.Rounds < 1 {
		o.Rounds = 1
	}
	if o.Conns < 1 {
		o.Conns = 2
	}
	b := &bench{o: o, sizes: newSizes(o.Duration)}
	if o.Quick {
		b.sizes.history = 20000 // a 1 s read reads fewer than that
	}
	b.logf = func(format string, args ...any) { fmt.Fprintf(o.Log, format+"\n", args...) }
	start := time.Now()
	b.rep = &Report{Started: start, Command: commandLine(), Options: map[string]string{
		"duration": o.Duration.String(), "rounds": fmt.Sprint(o.Rounds), "in_flight": "8, 32",
		"ceiling_clients": fmt.Sprint(ceilingClients), "loadgen_connections": fmt.Sprint(o.Conns),
	}}
	if len(o.ServiceEnv) > 0 {
		b.rep.Options["service_env"] = strings.Join(o.ServiceEnv, " ")
	}
	defer b.cleanup()
	if err := b.setup(ctx); err != nil {
		return nil, err
	}
	if err := b.measure(ctx); err != nil {
		return nil, err
	}
	b.checkInvariants(ctx)
	b.computeRatios()
	b.rep.Took = time.Since(start).Seconds()
	fmt.Fprint(o.Out, "\n"+b.rep.Markdown())
	if !o.NoWrite {
		base, err := b.rep.write(b.outDir())
		if err != nil {
			return b.rep, err
		}
		b.logf("report written to %s.{json,md}", base)
	}
	for _, c := range b.rep.Checks {
		if !c.OK {
			return b.rep, fmt.Errorf("invariant broken: %s: %s", c.Name, c.Detail)
		}
	}
	return b.rep, nil
}

// outDir is --out, relative to the repository unless absolute.
func (b *bench) outDir() string {
	if filepath.IsAbs(b.o.OutDir) {
		return b.o.OutDir
	}
	return filepath.Join(b.root, b.o.OutDir)
}

func commandLine() string {
	args := []string{"paymentd-bench"}
	for _, a := range os.Args[1:] {
		args = append(args, a)
	}
	return strings.Join(args, " ")
}

// ---- setup and teardown ----

func (b *bench) setup(ctx context.Context) error {
	var err error
	if b.root, err = repoRoot(); err != nil {
		return err
	}
	if b.tmp, err = os.MkdirTemp("", "paymentd-bench-"); err != nil {
		return err
	}
	// PostgreSQL runs as the postgres user when we are root: it must be able
	// to enter the directory.
	if err := os.Chmod(b.tmp, 0o755); err != nil {
		return err
	}
	b.logf("paymentd-bench: working in %s", b.tmp)
	b.machine()

	t := time.Now()
	b.paymentd = filepath.Join(b.tmp, "paymentd")
	// Built as deploy/Containerfile builds the release, by its script:
	// static, without grpc's x/net/trace (docs/performance.md, "Idle RSS").
	if err := runCmd(ctx, b.root, "deploy/build.sh", b.paymentd); err != nil {
		return err
	}
	if b.self, err = os.Executable(); err != nil {
		return err
	}
	b.logf("built paymentd in %s", time.Since(t).Round(time.Millisecond))

	// The private cluster installs Debian's postgresql (pgbench with it)
	// when it runs as root and the binaries are missing.
	if err := b.database(ctx); err != nil {
		return err
	}
	if b.pgbench, err = findPgbench(); err != nil {
		return err
	}

	line := ""
	b.fakes, line, err = StartProcLine("fakes", b.self, []string{"fakes", "--pid", merchantPID, "--key", merchantKey, "--token", providerToken},
		b.tmp, nil, filepath.Join(b.tmp, "fakes.log"), 10*time.Second)
	if err != nil {
		return err
	}
	var urls struct{ Epay, Provider string }
	if err := json.Unmarshal([]byte(line), &urls); err != nil {
		return fmt.Errorf("fakes announced %q: %w", line, err)
	}
	b.epayURL, b.providerURL = urls.Epay, urls.Provider

	b.jwtSecret = randomHex(24)
	b.secretsKey = randomBase64(32)
	b.adminPass = randomHex(12)
	if b.svcPort, err = localport.Free(); err != nil {
		return err
	}
	if b.emptyPort, err = localport.Free(); err != nil {
		return err
	}
	if b.pprofPort, err = localport.Free(); err != nil {
		return err
	}
	if ex, err := os.ReadFile(filepath.Join(b.root, "koanf.example.toml")); err == nil {
		b.metrics = strings.Contains(string(ex), "\n[metrics]\n") && strings.Contains(string(ex), "\npprof = ")
	}

	// First start: migrates the empty database and loads the plugins.
	first, err := b.startService(ctx, false)
	if err != nil {
		return err
	}
	b.rep.FirstStart = ms(first)
	b.logf("first start (migrations, plugin scan) ready in %s", first.Round(time.Millisecond))
	if b.pool, err = pgxpool.New(ctx, b.mainURL); err != nil {
		return err
	}
	t = time.Now()
	if b.world, err = SeedWorld(ctx, b.pool, b.epayURL, b.providerURL, b.jwtSecret, b.sizes.customers); err != nil {
		return err
	}
	if b.historyRange, err = b.world.SeedPendingPayments(ctx, b.pool, b.sizes.history); err != nil {
		return err
	}
	b.logf("seeded %d customers and %d pending payments in %s", b.sizes.customers, b.sizes.history, time.Since(t).Round(time.Millisecond))
	if err := b.stopService(); err != nil {
		return err
	}

	// The empty server: the same stack on a database of its own (its
	// background services must not compete for paymentd's leases).
	env := b.serviceEnv(b.emptyURL, b.emptyPort)
	t = time.Now()
	b.empty, err = StartProc("empty-server", b.self, []string{"empty-server"}, b.tmp, env, filepath.Join(b.tmp, "empty-server.log"))
	if err != nil {
		return err
	}
	if _, err := WaitReady(b.empty, fmt.Sprintf("http://127.0.0.1:%d/ready", b.emptyPort), t, 60*time.Second); err != nil {
		return err
	}
	// Its database (migrated by its start) gets the customers whose
	// tokens the GetPayment requests carry.
	emptyPool, err := pgxpool.New(ctx, b.emptyURL)
	if err != nil {
		return err
	}
	defer emptyPool.Close()
	return SeedCustomers(ctx, emptyPool, b.sizes.customers)
}

func (b *bench) database(ctx context.Context) error {
	if b.o.DatabaseURL != "" {
		suffix := time.Now().UTC().Format("20060102150405")
		mainDB, emptyDB := "paymentd_bench_"+suffix, "paymentd_bench_empty_"+suffix
		conn, err := pgx.Connect(ctx, b.o.DatabaseURL)
		if err != nil {
			return fmt.Errorf("PAYMENTD_BENCH_DATABASE_URL: %w", err)
		}
		defer conn.Close(ctx)
		for _, db := range []string{mainDB, emptyDB} {
			if _, err := conn.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{db}.Sanitize()); err != nil {
				return fmt.Errorf("create database %s: %w", db, err)
			}
		}
		b.mainURL, b.emptyURL = withDatabase(b.o.DatabaseURL, mainDB), withDatabase(b.o.DatabaseURL, emptyDB)
		b.dropDBs = func() {
			dctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			conn, err := pgx.Connect(dctx, b.o.DatabaseURL)
			if err != nil {
				return
			}
			defer conn.Close(dctx)
			for _, db := range []string{mainDB, emptyDB} {
				_, _ = conn.Exec(dctx, "DROP DATABASE IF EXISTS "+pgx.Identifier{db}.Sanitize()+" WITH (FORCE)")
			}
		}
		// A server on this machine: our backend's parent is the postmaster.
		b.postmaster = PostmasterOf(ctx, conn)
		note := "its CPU is measured"
		if b.postmaster == 0 {
			note = "not on this machine: PostgreSQL CPU is not measured"
		}
		b.logf("databases %s and %s on PAYMENTD_BENCH_DATABASE_URL (%s)", mainDB, emptyDB, note)
		return nil
	}
	b.pgDir = filepath.Join(b.tmp, "postgres")
	quiet := func(string, ...any) {}
	t := time.Now()
	var err error
	if b.mainURL, err = pgcluster.Ensure(ctx, b.pgDir, "paymentd", quiet); err != nil {
		return err
	}
	if b.emptyURL, err = pgcluster.Ensure(ctx, b.pgDir, "paymentd_empty", quiet); err != nil {
		return err
	}
	b.logf("private PostgreSQL in %s ready in %s", b.pgDir, time.Since(t).Round(time.Millisecond))
	if b.o.PgStats {
		if err := b.loadPgStatStatements(ctx); err != nil {
			return err
		}
	}
	b.postmaster = PostmasterPID(b.pgDir)
	return nil
}

// loadPgStatStatements restarts the private cluster with
// pg_stat_statements loaded (--pg-stats).
func (b *bench) loadPgStatStatements(ctx context.Context) error {
	conn, err := pgx.Connect(ctx, b.mainURL)
	if err != nil {
		return err
	}
	_, err = conn.Exec(ctx, `ALTER SYSTEM SET shared_preload_libraries = 'pg_stat_statements'`)
	conn.Close(ctx)
	if err != nil {
		return err
	}
	if err := pgcluster.Stop(ctx, b.pgDir); err != nil {
		return err
	}
	if _, err := pgcluster.Ensure(ctx, b.pgDir, "paymentd", nil); err != nil {
		return err
	}
	if conn, err = pgx.Connect(ctx, b.mainURL); err != nil {
		return err
	}
	defer conn.Close(ctx)
	_, err = conn.Exec(ctx, `CREATE EXTENSION IF NOT EXISTS pg_stat_statements`)
	return err
}

// resetPgStats starts a pg_stat_statements window (--pg-stats).
func (b *bench) resetPgStats(ctx context.Context) {
	if b.o.PgStats && b.pool != nil {
		_, _ = b.pool.Exec(ctx, `SELECT pg_stat_statements_reset()`)
	}
}

// printPgStats prints the statements of the window that took the most time
// per call of the measurement (--pg-stats).
func (b *bench) printPgStats(ctx context.Context, requests int) {
	if !b.o.PgStats || b.pool == nil || requests == 0 {
		return
	}
	rows, err := b.pool.Query(ctx, `
		SELECT calls, total_exec_time, regexp_replace(left(query, 110), '\s+', ' ', 'g')
		FROM pg_stat_statements
		WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database())
		ORDER BY total_exec_time DESC LIMIT 12`)
	if err != nil {
		b.logf("    pg_stat_statements: %v", err)
		return
	}
	defer rows.Close()
	for rows.Next() {
		var calls int64
		var total float64
		var q string
		if err := rows.Scan(&calls, &total, &q); err != nil {
			return
		}
		b.logf("    %7.1f µs/req %6.2f calls/req  %s", total*1000/float64(requests), float64(calls)/float64(requests), q)
	}
}

func (b *bench) cleanup() {
	if b.pool != nil {
		b.pool.Close()
	}
	for _, p := range []*Proc{b.svc, b.empty, b.fakes} {
		if p != nil {
			_ = p.Stop(20 * time.Second)
		}
	}
	if b.dropDBs != nil {
		b.dropDBs()
	}
	if b.pgDir != "" {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		if err := pgcluster.Stop(ctx, b.pgDir); err != nil {
			b.logf("stopping PostgreSQL: %v", err)
		}
		cancel()
	}
	if b.tmp != "" && !b.o.Keep {
		_ = os.RemoveAll(b.tmp)
	} else if b.tmp != "" {
		b.logf("kept %s", b.tmp)
	}
}

// serviceEnv is paymentd's configuration: production defaults but for the
// addresses, the secrets and the plugin directory.
func (b *bench) serviceEnv(dbURL string, port int) []string {
	env := []string{
		"PAYMENTD_DB__URL=" + dbURL,
		"PAYMENTD_SERVER__HOST=127.0.0.1",
		fmt.Sprintf("PAYMENTD_SERVER__PORT=%d", port),
		fmt.Sprintf("PAYMENTD_SERVER__PUBLIC_URL=http://127.0.0.1:%d", port),
		"PAYMENTD_JWT__SECRET=" + b.jwtSecret,
		// The gateway's merchant key is stored encrypted, as in production.
		"PAYMENTD_SECRETS__CURRENT=bench",
		"PAYMENTD_SECRETS__KEYS__BENCH=" + b.secretsKey,
		"PAYMENTD_BOOTSTRAP__ADMIN_PASSWORD=" + b.adminPass,
		"PAYMENTD_PLUGINS__DIR=" + filepath.Join(b.root, "plugins"),
		"PAYMENTD_LOG__FORMAT=json",
	}
	if port == b.svcPort {
		env = append(env, b.o.ServiceEnv...)
	}
	if b.metrics {
		// The metrics listener stays on (as in production), on a port of
		// its own; with --profile it serves pprof too.
		mport := b.pprofPort
		if port != b.svcPort {
			mport = 0
		}
		env = append(env, fmt.Sprintf("PAYMENTD_METRICS__PORT=%d", mport))
		if b.o.Profile && port == b.svcPort {
			env = append(env, "PAYMENTD_METRICS__PPROF=true")
		}
	}
	return env
}

// startService starts paymentd (or, with --profile, the profiled serve of
// this binary) and returns the time from exec to a 200 on /ready. With
// paused, the harness holds the event_worker role first, so the worker
// waits until releaseWorker.
func (b *bench) startService(ctx context.Context, paused bool) (time.Duration, error) {
	if paused {
		if err := b.holdWorker(ctx); err != nil {
			return 0, err
		}
	}
	bin, args := b.paymentd, []string{"serve"}
	if b.o.Profile && !b.metrics {
		bin, args = b.self, []string{"serve", "--pprof-addr", fmt.Sprintf("127.0.0.1:%d", b.pprofPort)}
	}
	b.svcStarts++
	logPath := filepath.Join(b.tmp, fmt.Sprintf("paymentd-%d.log", b.svcStarts))
	t := time.Now()
	p, err := StartProc("paymentd", bin, args, b.tmp, b.serviceEnv(b.mainURL, b.svcPort), logPath)
	if err != nil {
		return 0, err
	}
	b.svc = p
	took, err := WaitReady(p, b.svcURL()+"/ready", t, 60*time.Second)
	if err != nil {
		return 0, fmt.Errorf("%w (log %s)", err, logPath)
	}
	return took, nil
}

func (b *bench) stopService() error {
	if b.svc == nil {
		return nil
	}
	err := b.svc.Stop(30 * time.Second)
	b.svc = nil
	return err
}

func (b *bench) svcURL() string { return fmt.Sprintf("http://127.0.0.1:%d", b.svcPort) }

// holdWorker takes the event_worker role for the harness (as another
// instance would hold it) while paymentd is stopped, so that paymentd's
// worker waits: the request workloads are measured without the worker
// competing for the CPU, and the backlog they queue is what the drain
// measurement drains.
func (b *bench) holdWorker(ctx context.Context) error {
	_, err := b.pool.Exec(ctx, `
		INSERT INTO leader_leases (role, holder, elected_at, expires_at)
		VALUES ('event_worker', $1, now(), now() + interval '1 hour')
		ON CONFLICT (role) DO UPDATE SET holder = excluded.holder, elected_at = excluded.elected_at, expires_at = excluded.expires_at`, holder)
	return err
}

// releaseWorker resigns the harness's term the way an instance does on a
// graceful stop: paymentd takes the role within milliseconds.
func (b *bench) releaseWorker(ctx context.Context) error {
	return pgx.BeginFunc(ctx, b.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `DELETE FROM leader_leases WHERE role = 'event_worker' AND holder = $1`, holder); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, `SELECT pg_notify('paymentd_leadership', 'event_worker')`)
		return err
	})
}

func (b *bench) machine() {
	m := map[string]string{"cpus": fmt.Sprint(runtime.NumCPU()), "go": runtime.Version(), "os": runtime.GOOS + "/" + runtime.GOARCH}
	if f, err := os.Open("/proc/cpuinfo"); err == nil {
		s := bufio.NewScanner(f)
		for s.Scan() {
			if k, v, ok := strings.Cut(s.Text(), ":"); ok && strings.TrimSpace(k) == "model name" {
				m["cpu"] = strings.TrimSpace(v)
				break
			}
		}
		f.Close()
	}
	if out, err := exec.Command("git", "-C", b.root, "rev-parse", "--short", "HEAD").Output(); err == nil {
		rev := strings.TrimSpace(string(out))
		if st, err := exec.Command("git", "-C", b.root, "status", "--porcelain").Output(); err == nil && len(st) > 0 {
			rev += " (with uncommitted changes)"
		}
		m["commit"] = rev
	}
	b.rep.Machine = m
}

// ---- measuring ----

// snapshot is the CPU used so far by everything the harness watches.
type snapshot struct {
	at                               time.Time
	server, postgres, fakes, loadgen time.Duration
	machine                          time.Duration
}

func (b *bench) snap(server *Proc) snapshot {
	s := snapshot{at: time.Now(), loadgen: SelfCPU(), machine: MachineBusy()}
	if server != nil {
		s.server = ProcCPU(server.PID())
	}
	if b.postmaster > 0 {
		s.postgres = TreeCPU(b.postmaster)
	}
	if b.fakes != nil {
		s.fakes = ProcCPU(b.fakes.PID())
	}
	return s
}

// rssSampler records the largest RSS of pid while it runs.
type rssSampler struct {
	stop chan struct{}
	done chan int64
}

func sampleRSS(pid int) *rssSampler {
	s := &rssSampler{stop: make(chan struct{}), done: make(chan int64, 1)}
	go func() {
		var peak int64
		t := time.NewTicker(50 * time.Millisecond)
		defer t.Stop()
		for {
			peak = max(peak, ProcRSS(pid))
			select {
			case <-s.stop:
				s.done <- max(peak, ProcRSS(pid))
				return
			case <-t.C:
			}
		}
	}()
	return s
}

func (s *rssSampler) peak() int64 {
	close(s.stop)
	return <-s.done
}

// fill completes a measurement with the CPU used between two snapshots.
func fill(m *Measurement, before, after snapshot, requests int, loadgenCPU time.Duration) {
	if requests == 0 {
		return
	}
	per := func(d time.Duration) float64 { return float64(d.Microseconds()) / float64(requests) }
	server, pg, fakes := after.server-before.server, after.postgres-before.postgres, after.fakes-before.fakes
	m.ServerCPUus, m.PostgresCPUus, m.FakesCPUus, m.LoadCPUus = per(server), per(pg), per(fakes), per(loadgenCPU)
	total := server + pg + fakes + loadgenCPU
	if total > 0 {
		m.LoadShare = float64(loadgenCPU) / float64(total)
	}
	wall := after.at.Sub(before.at)
	if wall > 0 {
		capacity := float64(wall) * float64(runtime.NumCPU())
		m.CPUBusy = float64(total) / capacity
		// Whatever else ran meanwhile (other processes of the machine):
		// a run where this is large measured a machine shared with
		// something else.
		if other := after.machine - before.machine - total; other > 0 {
			m.OtherCPU = float64(other) / capacity
		}
	}
}

// load runs calls against server's URL and measures it.
func (b *bench) load(name string, round, inFlight int, server *Proc, baseURL string, calls []Call, dur time.Duration) (Measurement, LoadResult, error) {
	l, err := NewLoader(baseURL, b.o.Conns)
	if err != nil {
		return Measurement{}, LoadResult{}, err
	}
	defer l.Close()
	if err := l.Warm(context.Background()); err != nil {
		return Measurement{}, LoadResult{}, err
	}
	var profile func() error
	if b.o.Profile && round == 1 && server == b.svc {
		profile = b.profile(name, inFlight, dur)
	}
	// The prepared calls are garbage-collected now, not on the clock.
	runtime.GC()
	rss := sampleRSS(server.PID())
	b.resetPgStats(context.Background())
	waits := b.sampleWaits(server)
	before := b.snap(server)
	res := l.Run(calls, inFlight, dur)
	after := b.snap(server)
	b.printPgStats(context.Background(), res.Requests)
	peak := rss.peak()
	if profile != nil {
		if err := profile(); err != nil {
			b.logf("profile of %s: %v", name, err)
		}
	}
	m := Measurement{
		Workload: name, InFlight: inFlight, Round: round, Requests: res.Requests, Errors: res.Errors,
		Seconds: res.Elapsed().Seconds(), Throughput: res.Throughput(),
		P50ms: ms(Percentile(res.Latencies, 50)), P99ms: ms(Percentile(res.Latencies, 99)),
		RSSMiB: mib(peak), Exhausted: res.Exhausted,
	}
	if len(res.ErrorSamples) > 0 {
		m.ErrorSamples = res.ErrorSamples
	}
	fill(&m, before, after, res.Requests, after.loadgen-before.loadgen)
	if waits != nil {
		w := waits.result(res.Requests)
		m.Waits = &w
	}
	b.rep.add(m)
	printLine(b.o.Log, m)
	return m, res, nil
}

// sampleWaits starts the wait sampler (--waits) for a measurement of
// paymentd; nil without --waits or for another server.
func (b *bench) sampleWaits(server *Proc) *waitSampler {
	if !b.o.Waits || server != b.svc || b.mainURL == "" {
		return nil
	}
	metricsURL := ""
	if b.metrics {
		metricsURL = fmt.Sprintf("http://127.0.0.1:%d/metrics", b.pprofPort)
	}
	s, err := sampleWaits(b.mainURL, metricsURL)
	if err != nil {
		b.logf("wait sampler: %v", err)
		return nil
	}
	return s
}

// profile starts a CPU profile of the profiled service covering a run of
// dur, and returns a function that waits for it and saves it.
func (b *bench) profile(name string, inFlight int, dur time.Duration) func() error {
	secs := max(1, int(dur.Seconds()))
	u := fmt.Sprintf("http://127.0.0.1:%d/debug/pprof/profile?seconds=%d", b.pprofPort, secs)
	done := make(chan error, 1)
	go func() {
		resp, err := http.Get(u)
		if err != nil {
			done <- err
			return
		}
		defer resp.Body.Close()
		dir := filepath.Join(b.outDir(), "profiles")
		if err := os.MkdirAll(dir, 0o755); err != nil {
			done <- err
			return
		}
		f, err := os.Create(filepath.Join(dir, fmt.Sprintf("%s-%d.pb.gz", name, inFlight)))
		if err != nil {
			done <- err
			return
		}
		_, err = io.Copy(f, resp.Body)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		done <- err
	}()
	time.Sleep(50 * time.Millisecond) // let the profile start before the load
	return func() error { return <-done }
}

func (b *bench) pgbenchRun(ctx context.Context, name string, round int, script string, dur time.Duration, vars map[string]string) (Measurement, error) {
	before := b.snap(nil)
	r, err := Pgbench(ctx, b.pgbench, b.mainURL, b.tmp, name, script, ceilingClients, dur, vars)
	after := b.snap(nil)
	if err != nil {
		return Measurement{}, err
	}
	m := Measurement{
		Workload: name, InFlight: ceilingClients, Round: round, Requests: r.Txns, Errors: r.Failed,
		Seconds: float64(r.Txns) / r.TPS, Throughput: r.TPS,
		P50ms: ms(Percentile(r.Latencies, 50)), P99ms: ms(Percentile(r.Latencies, 99)),
	}
	// pgbench's own CPU (it is the ceiling's load generator); its
	// connection setup is in it, a small overestimate.
	fill(&m, before, after, r.Txns, r.CPU)
	b.rep.add(m)
	printLine(b.o.Log, m)
	return m, nil
}

func (b *bench) wants(name string) bool {
	if b.o.Only == "" {
		return true
	}
	for _, w := range strings.Split(b.o.Only, ",") {
		if strings.TrimSpace(w) == name {
			return true
		}
	}
	return false
}

func (b *bench) measure(ctx context.Context) error {
	d := b.o.Duration
	for round := 1; round <= b.o.Rounds; round++ {
		if err := ctx.Err(); err != nil {
			return err
		}
		b.logf("round %d of %d", round, b.o.Rounds)
		// Rows for this round, seeded while nothing is measured.
		pgbRange, err := b.world.SeedPendingPayments(ctx, b.pool, b.sizes.pgbenchCallback)
		if err != nil {
			return err
		}
		minRange, err := b.world.SeedPendingPayments(ctx, b.pool, b.sizes.pgbenchMinimal)
		if err != nil {
			return err
		}
		type pools struct {
			callback, create, balance Range
		}
		var ps []pools
		for range inFlights {
			var p pools
			if b.wants("callback") {
				if p.callback, err = b.world.SeedPendingPayments(ctx, b.pool, b.sizes.callback); err != nil {
					return err
				}
			}
			if b.wants("create") {
				if p.create, err = b.world.SeedPendingOrders(ctx, b.pool, b.sizes.create); err != nil {
					return err
				}
			}
			if b.wants("balance") {
				if p.balance, err = b.world.SeedPendingOrders(ctx, b.pool, b.sizes.balance); err != nil {
					return err
				}
			}
			ps = append(ps, p)
		}
		if _, err := b.pool.Exec(ctx, "VACUUM ANALYZE"); err != nil {
			return err
		}

		// A fresh paymentd per round, its worker paused: the start is
		// measured, then its idle memory.
		took, err := b.startService(ctx, true)
		if err != nil {
			return err
		}
		b.rep.StartReady = append(b.rep.StartReady, ms(took))
		time.Sleep(time.Second)
		b.rep.IdleRSS = append(b.rep.IdleRSS, mib(ProcRSS(b.svc.PID())))
		b.rep.IdleAnonRSS = append(b.rep.IdleAnonRSS, mib(ProcAnonRSS(b.svc.PID())))
		b.logf("  paymentd ready in %s, idle RSS %.1f MiB", took.Round(time.Millisecond), b.rep.IdleRSS[len(b.rep.IdleRSS)-1])
		if err := b.warmUp(ctx); err != nil {
			return err
		}

		// Ceilings.
		if _, err := b.pgbenchRun(ctx, "pgbench-callback", round, callbackScript, d, callbackVars(b.world, pgbRange.From)); err != nil {
			return err
		}
		if _, err := b.pgbenchRun(ctx, "pgbench-minimal", round, minimalScript, d, minimalVars(minRange.From)); err != nil {
			return fmt.Errorf("%w (a round seeds %d pending payments for it, one per transaction)", err, minRange.N)
		}
		if b.o.ExtraCeilings {
			r, err := b.world.SeedPendingPayments(ctx, b.pool, b.sizes.pgbenchCallback)
			if err != nil {
				return err
			}
			if _, err := b.pgbenchRun(ctx, "pgbench-callback-pipelined", round, pipelinedCallbackScript, d, callbackVars(b.world, r.From)); err != nil {
				return err
			}
		}
		if _, err := b.pgbenchRun(ctx, "pgbench-read", round, readScript, d, map[string]string{
			"from": fmt.Sprint(b.historyRange.From), "to": fmt.Sprint(b.historyRange.From + b.historyRange.N - 1),
		}); err != nil {
			return err
		}
		emptyCalls := GetCalls(b.world, b.historyRange, int(b.sizes.get))
		if _, _, err := b.load("empty", round, ceilingClients, b.empty, fmt.Sprintf("http://127.0.0.1:%d", b.emptyPort), emptyCalls, d); err != nil {
			return err
		}

		// The service.
		for i, c := range inFlights {
			p := ps[i]
			if b.wants("callback") {
				_, res, err := b.load("callback", round, c, b.svc, b.svcURL(), CallbackCalls(b.world, p.callback), d)
				if err != nil {
					return err
				}
				b.okCallbacks += countOK(res.OK)
				b.callbackRanges = append(b.callbackRanges, p.callback)
			}
			if b.wants("get") {
				if _, _, err := b.load("get", round, c, b.svc, b.svcURL(), GetCalls(b.world, b.historyRange, int(b.sizes.get)), d); err != nil {
					return err
				}
			}
			if b.wants("list") {
				if _, _, err := b.load("list", round, c, b.svc, b.svcURL(), ListCalls(b.world, int(b.sizes.get)), d); err != nil {
					return err
				}
			}
			if b.wants("create") {
				_, res, err := b.load("create", round, c, b.svc, b.svcURL(), CreateCalls(b.world, p.create), d)
				if err != nil {
					return err
				}
				b.okCreate += countOK(res.OK)
				b.createRanges = append(b.createRanges, p.create)
			}
			if b.wants("balance") {
				_, res, err := b.load("balance", round, c, b.svc, b.svcURL(), BalanceCalls(b.world, p.balance), d)
				if err != nil {
					return err
				}
				b.okBalance += countOK(res.OK)
				b.balanceRanges = append(b.balanceRanges, p.balance)
			}
		}

		// The worker: release it onto the backlog the round queued (and
		// let it finish, measured or not, so the next round starts with an
		// empty queue).
		if err := b.drain(ctx, round, b.wants("drain")); err != nil {
			return err
		}
		if round == b.o.Rounds && b.wants("probe") && b.wants("callback") {
			if err := b.probe(ctx); err != nil {
				return err
			}
		}
		// The dashboard's trends on every payment the run left (a few
		// seconds): the figure issue 19 asks for.
		if round == b.o.Rounds {
			if err := b.measureTrends(ctx); err != nil {
				return err
			}
		}
		if err := b.stopService(); err != nil {
			return err
		}
	}
	b.rep.summarize()
	return nil
}

func countOK(ok []bool) int {
	n := 0
	for _, v := range ok {
		if v {
			n++
		}
	}
	return n
}

// warmUp sends a few of every request kind to a fresh paymentd (pool
// connections, prepared statements, plugin states), outside the
// measurements; the rows it uses are its own.
func (b *bench) warmUp(ctx context.Context) error {
	const n = 200
	cb, err := b.world.SeedPendingPayments(ctx, b.pool, n)
	if err != nil {
		return err
	}
	orders, err := b.world.SeedPendingOrders(ctx, b.pool, 2*n)
	if err != nil {
		return err
	}
	create, balance := Range{From: orders.From, N: n}, Range{From: orders.From + n, N: n}
	l, err := NewLoader(b.svcURL(), b.o.Conns)
	if err != nil {
		return err
	}
	defer l.Close()
	var calls []Call
	calls = append(calls, CallbackCalls(b.world, cb)...)
	calls = append(calls, GetCalls(b.world, b.historyRange, n)...)
	calls = append(calls, ListCalls(b.world, n)...)
	calls = append(calls, CreateCalls(b.world, create)...)
	calls = append(calls, BalanceCalls(b.world, balance)...)
	res := l.Run(calls, 32, time.Minute)
	if res.Errors > 0 {
		return fmt.Errorf("warm-up: %d of %d requests failed: %v", res.Errors, res.Requests, res.ErrorSamples)
	}
	b.okCallbacks += countOK(res.OK[:n])
	b.callbackRanges = append(b.callbackRanges, cb)
	b.okCreate += n
	b.createRanges = append(b.createRanges, create)
	b.okBalance += n
	b.balanceRanges = append(b.balanceRanges, balance)
	return nil
}

// drain lets the worker loose on the backlog of order_paid events the
// round's callbacks and balance payments queued, and measures how fast it
// takes their orders to active through the fake provider.
func (b *bench) drain(ctx context.Context, round int, record bool) error {
	var backlog int
	if err := b.pool.QueryRow(ctx, `SELECT count(*) FROM events WHERE status = 'pending' AND event_type = 'order_paid'`).Scan(&backlog); err != nil {
		return err
	}
	if backlog == 0 {
		return b.releaseWorker(ctx)
	}
	rss := sampleRSS(b.svc.PID())
	b.resetPgStats(ctx)
	var profile func() error
	if b.o.Profile && round == 1 && record {
		// The profile covers the drain's first seconds (it must be
		// asked for with its length).
		profile = b.profile("drain", 0, min(20*time.Second, time.Duration(backlog)*3*time.Millisecond))
	}
	before := b.snap(b.svc)
	t0 := time.Now()
	if err := b.releaseWorker(ctx); err != nil {
		return err
	}
	limit := 10 * time.Minute
	for {
		// A cheap probe (the first row of the partial indexes of pending
		// and processing events): the poll must not cost the database
		// what the worker needs.
		queued, err := b.queued(ctx)
		if err != nil {
			return err
		}
		if !queued {
			break
		}
		if time.Since(t0) > limit {
			return fmt.Errorf("drain: events still queued after %s", limit)
		}
		time.Sleep(100 * time.Millisecond)
	}
	after := b.snap(b.svc)
	peak := rss.peak()
	if profile != nil {
		if err := profile(); err != nil {
			b.logf("profile of the drain: %v", err)
		}
	}
	var failed int
	if err := b.pool.QueryRow(ctx, `SELECT count(*) FROM events WHERE status = 'failed'`).Scan(&failed); err != nil {
		return err
	}
	if failed > 0 {
		return fmt.Errorf("drain: %d events failed (see the paymentd logs in %s)", failed, b.tmp)
	}
	// The order_paid handler's last commit, by the service's clock.
	var last time.Time
	if err := b.pool.QueryRow(ctx, `SELECT max(updated_at) FROM events WHERE event_type = 'order_paid'`).Scan(&last); err != nil {
		return err
	}
	elapsed := last.Sub(t0)
	if elapsed <= 0 {
		elapsed = after.at.Sub(t0)
	}
	if !record {
		return nil
	}
	m := Measurement{
		Workload: "drain", InFlight: 0, Round: round, Requests: backlog,
		Seconds: elapsed.Seconds(), Throughput: float64(backlog) / elapsed.Seconds(), RSSMiB: mib(peak),
		Note: fmt.Sprintf("(order_paid backlog %d; with its order_provisioned events everything drained in %.2f s)", backlog, after.at.Sub(t0).Seconds()),
	}
	fill(&m, before, after, backlog, 0)
	b.rep.add(m)
	printLine(b.o.Log, m)
	b.printPgStats(ctx, backlog)
	return nil
}

// queued reports whether events wait or run: a cheap probe (the first
// row of the partial indexes of pending and processing events), so that
// polling costs the database nothing the worker needs.
func (b *bench) queued(ctx context.Context) (bool, error) {
	var q bool
	err := b.pool.QueryRow(ctx, `
		SELECT EXISTS (SELECT 1 FROM events WHERE status = 'pending' AND run_at <= now() + interval '1 hour')
		    OR EXISTS (SELECT 1 FROM events WHERE status = 'processing' AND locked_until > now() - interval '1 hour')`).Scan(&q)
	return q, err
}

// probe measures callback commit → order active with the worker running
// (woken by NOTIFY), at a load the machine sustains: half the rate at
// which it can both settle and provision, 1/(1/callbacks + 1/drain) with
// the 8-in-flight callback and the drain throughputs measured before.
func (b *bench) probe(ctx context.Context) error {
	b.rep.summarize()
	s, ok := b.rep.Summary("callback", 8)
	if !ok || s.Throughput <= 0 {
		return nil
	}
	sustained := s.Throughput
	if d, ok := b.rep.Summary("drain", 0); ok && d.Throughput > 0 {
		sustained = 1 / (1/s.Throughput + 1/d.Throughput)
	}
	rate := sustained / 2
	dur := max(b.o.Duration, 3*time.Second)
	if b.o.Quick {
		dur = 2 * time.Second
	}
	n := int64(rate * dur.Seconds())
	r, err := b.world.SeedPendingPayments(ctx, b.pool, n)
	if err != nil {
		return err
	}
	l, err := NewLoader(b.svcURL(), b.o.Conns)
	if err != nil {
		return err
	}
	defer l.Close()
	if err := l.Warm(ctx); err != nil {
		return err
	}
	before := b.snap(b.svc)
	res := l.RunPaced(CallbackCalls(b.world, r), rate, dur)
	after := b.snap(b.svc)
	b.okCallbacks += countOK(res.OK)
	b.callbackRanges = append(b.callbackRanges, r)
	// Wait for the orders to become active.
	deadline := time.Now().Add(2 * time.Minute)
	for {
		queued, err := b.queued(ctx)
		if err != nil {
			return err
		}
		if !queued {
			break
		}
		if time.Now().After(deadline) {
			return errors.New("probe: events still queued after 2 minutes")
		}
		time.Sleep(50 * time.Millisecond)
	}
	// Commit → active: the payment's updated_at is stamped in the settling
	// transaction (just before its commit), the order's when the worker
	// activated it; both by paymentd's clock.
	rows, err := b.pool.Query(ctx, `
		SELECT o.updated_at - p.updated_at
		FROM payments p JOIN orders o ON o.id = p.order_id
		WHERE p.id BETWEEN $1 AND $2 AND p.status = 'success' AND o.status = 'active'`,
		BenchID(kindPayment, r.From), BenchID(kindPayment, r.From+r.N-1))
	if err != nil {
		return err
	}
	lat, err := pgx.CollectRows(rows, pgx.RowTo[time.Duration])
	if err != nil {
		return err
	}
	sortDurations(lat)
	m := Measurement{
		Workload: "commit-to-active", InFlight: 0, Round: b.o.Rounds, Requests: len(lat), Errors: res.Errors,
		Seconds: res.Elapsed().Seconds(), Throughput: res.Throughput(),
		P50ms: ms(Percentile(lat, 50)), P99ms: ms(Percentile(lat, 99)),
		Note: fmt.Sprintf("(callbacks paced at %.0f/s, request p99 %.2f ms)", rate, ms(Percentile(res.Latencies, 99))),
	}
	if len(res.ErrorSamples) > 0 {
		m.ErrorSamples = res.ErrorSamples
	}
	fill(&m, before, after, res.Requests, after.loadgen-before.loadgen)
	b.rep.add(m)
	printLine(b.o.Log, m)
	return nil
}

// ---- helpers ----

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
func mib(b int64) float64        { return float64(b) / (1 << 20) }

func sortDurations(d []time.Duration) { slices.Sort(d) }

func randomBase64(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return base64.StdEncoding.EncodeToString(b)
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

func findPgbench() (string, error) {
	if dir, err := pgcluster.FindBinaries(); err == nil {
		p := filepath.Join(dir, "pgbench")
		if _, err := os.Stat(p); err == nil {
			return p, nil
		}
	}
	if p, err := exec.LookPath("pgbench"); err == nil {
		return p, nil
	}
	return "", errors.New("pgbench not found: install PostgreSQL's client programs (Debian: apt-get install postgresql)")
}

// repoRoot is the directory of the go.mod of module
// github.com/rustbill/paymentd at or above the working directory.
func repoRoot() (string, error) {
	wd, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for d := wd; ; d = filepath.Dir(d) {
		if b, err := os.ReadFile(filepath.Join(d, "go.mod")); err == nil && strings.Contains(string(b), "module github.com/rustbill/paymentd\n") {
			return d, nil
		}
		if d == filepath.Dir(d) {
			return "", fmt.Errorf("run paymentd-bench inside the paymentd repository (no go.mod of github.com/rustbill/paymentd above %s)", wd)
		}
	}
}

func withDatabase(conn, dbname string) string {
	u, err := url.Parse(conn)
	if err != nil {
		return conn
	}
	u.Path = "/" + dbname
	u.RawPath = ""
	return u.String()
}
