// Command paymentd-replica-bench measures what a read replica saves the
// money path (`task bench-replica`, docs/performance.md, "A million-row
// export on a read replica"): the epay callbacks' latency on the primary
// while a million-row CSV export runs, once with the export on the primary
// and once with it on a streaming standby ([db].replica_url).
//
//	paymentd-replica-bench [--rows 1000000] [--rate 50] [--exports 2] [--baseline 10]
//
// It makes a private primary and a streaming standby of it in a temporary
// directory (internal/pgcluster, the system's PostgreSQL binaries), starts
// paymentd in this process on the primary with the fake epay, seeds the
// world, pending epay payments and --rows payments to export, then, for
// each setup in turn (without a replica, then with one):
//
//  1. for --baseline seconds, epay callbacks arrive at --rate per second;
//  2. the admin downloads GET /export/payments.csv of all the seeded
//     payments --exports times in a row, while the callbacks go on at the
//     same rate.
//
// It prints each phase's callback p50/p95/p99/max, the exports' durations,
// the CPU each PostgreSQL server spent during the exports (both run on
// this machine), and how much of the second setup's exports the replica
// was in use. The callbacks of the two setups settle different payments.
package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/rustbill/paymentd/bench/harness"
	"github.com/rustbill/paymentd/internal/config"
	"github.com/rustbill/paymentd/internal/pgcluster"
)

func main() { harness.Main("paymentd-replica-bench", run) }

const (
	adminPassword = "replica-bench-admin-password"
	jwtSecret     = "replica-bench-secret-replica-bench-secret"
	// window is one paced stretch of callbacks while the exports run: the
	// load stops at most this long after they do.
	window = 2 * time.Second
)

type flags struct {
	rows, exports, baseline int
	rate                    float64
	maxExport               time.Duration
	maxLag                  time.Duration
}

func run(ctx context.Context, args []string, out io.Writer) error {
	fs := flag.NewFlagSet("paymentd-replica-bench", flag.ContinueOnError)
	var f flags
	fs.IntVar(&f.rows, "rows", 1_000_000, "payments to seed and export")
	fs.IntVar(&f.exports, "exports", 2, "exports of all of them in a row, per setup")
	fs.IntVar(&f.baseline, "baseline", 10, "seconds of callbacks alone, before the exports")
	fs.Float64Var(&f.rate, "rate", 50, "epay callbacks per second")
	fs.DurationVar(&f.maxExport, "max-export", time.Minute, "the longest one export may take (the pending payments seeded for the callbacks last that long)")
	fs.DurationVar(&f.maxLag, "max-lag", 10*time.Second, "[db].replica_max_lag of the second setup")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if f.rows < 1 || f.exports < 1 || f.baseline < 1 || f.rate <= 0 {
		return errors.New("--rows, --exports, --baseline and --rate must be positive")
	}

	set, err := startPrimaryAndStandby(ctx, out)
	if err != nil {
		return err
	}
	defer set.close()

	fakes, err := harness.StartFakes()
	if err != nil {
		return err
	}
	defer fakes.Close()
	cfg := config.Default()
	cfg.DB.URL = set.primaryURL
	cfg.JWT.Secret = jwtSecret
	cfg.Bootstrap.AdminPassword = adminPassword
	cfg.RateLimit.Enabled = false
	// The second start finds the seeded interface's merchant key in clear
	// and seals it, which needs a key.
	cfg.Secrets = config.Secrets{Current: "bench1", Keys: map[string]string{"bench1": "cmVwbGljYS1iZW5jaC1rZXktcmVwbGljYS1iZW5jaCE="}}

	svc, err := harness.StartInProcess(ctx, cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		return err
	}
	pool := svc.App.Pool()
	began := time.Now()
	world, err := harness.SeedWorld(ctx, pool, fakes.EpayURL, fakes.ProviderURL, cfg.JWT.Secret, 100)
	if err != nil {
		svc.Close()
		return err
	}
	perSetup := int64(f.rate*(float64(f.baseline)+float64(f.exports)*f.maxExport.Seconds()+window.Seconds())) + 1
	payments, err := world.SeedPendingPayments(ctx, pool, 2*perSetup)
	if err != nil {
		svc.Close()
		return err
	}
	from, to, err := harness.SeedExportPayments(ctx, pool, f.rows, "replica-bench", "", "")
	if err != nil {
		svc.Close()
		return fmt.Errorf("seed: %w", err)
	}
	fmt.Fprintf(out, "seeded %d payments to export and %d pending epay payments in %s\n", f.rows, 2*perSetup, time.Since(began).Round(time.Millisecond))
	calls := harness.CallbackCalls(world, payments)
	// What a million inserted rows leave to do (autovacuum's first pass,
	// hint bits, a checkpoint, the standby's replay) is done before either
	// setup is measured, not during the first.
	settled := time.Now()
	if err := settle(ctx, pool, set.standby); err != nil {
		svc.Close()
		return err
	}
	fmt.Fprintf(out, "vacuumed, checkpointed and replayed on the standby in %s\n", time.Since(settled).Round(time.Millisecond))
	// Only the seeded customer's: the window holds the pending payments too.
	var customer string
	if err := pool.QueryRow(ctx, `SELECT id FROM customers WHERE email = 'replica-bench@example.com'`).Scan(&customer); err != nil {
		svc.Close()
		return err
	}
	export := url.Values{"from": {from.Format(time.RFC3339)}, "to": {to.Format(time.RFC3339)}, "customer_id": {customer}}

	primaryPM := harness.PostmasterOf(ctx, pool)
	standbyPM := harness.PostmasterOf(ctx, set.standby)
	var results []setupResult
	for i, withReplica := range []bool{false, true} {
		if i > 0 {
			svc.Close()
			cfg.DB.ReplicaURL, cfg.DB.ReplicaMaxLag = set.standbyURL, f.maxLag
			if svc, err = harness.StartInProcess(ctx, cfg, slog.New(slog.DiscardHandler)); err != nil {
				return err
			}
			waited := time.Now()
			if err := waitFor(ctx, 10*time.Minute, svc.App.ReplicaInUse); err != nil {
				svc.Close()
				return fmt.Errorf("the replica never came into use: %w", err)
			}
			fmt.Fprintf(out, "the replica is in use (%s after the start)\n", time.Since(waited).Round(time.Millisecond))
		}
		// One export first, not measured: the server that answers it has
		// the table in its cache, as one that serves reports would.
		cookie, err := harness.AdminCookie(ctx, svc.BaseURL, adminPassword)
		if err != nil {
			svc.Close()
			return err
		}
		took, err := download(ctx, svc.BaseURL, cookie, export, f.rows)
		if err != nil {
			svc.Close()
			return err
		}
		fmt.Fprintf(out, "warm-up export (replica %v): %s\n", withReplica, took.Round(100*time.Millisecond))
		r, err := measure(ctx, svc, f, calls[int64(i)*perSetup:int64(i+1)*perSetup], export, primaryPM, standbyPM)
		if err != nil {
			svc.Close()
			return err
		}
		r.replica = withReplica
		results = append(results, r)
	}
	svc.Close()
	report(out, f, results)
	return nil
}

// primaryAndStandby is the private cluster pair of a run.
type primaryAndStandby struct {
	base                   string
	primaryURL, standbyURL string
	primaryDir, standbyDir string
	standby                *pgx.Conn
}

func startPrimaryAndStandby(ctx context.Context, out io.Writer) (*primaryAndStandby, error) {
	// World-traversable: a server running as postgres (when this runs as
	// root) must enter it.
	base, err := os.MkdirTemp("", "paymentd-replica-bench-")
	if err != nil {
		return nil, err
	}
	if err := os.Chmod(base, 0o755); err != nil {
		return nil, err
	}
	s := &primaryAndStandby{base: base, primaryDir: filepath.Join(base, "primary"), standbyDir: filepath.Join(base, "standby")}
	logf := func(format string, args ...any) { fmt.Fprintf(out, format+"\n", args...) }
	if s.primaryURL, err = pgcluster.Ensure(ctx, s.primaryDir, "paymentd", logf); err != nil {
		s.close()
		return nil, err
	}
	standby, err := pgcluster.StartStandby(ctx, s.primaryDir, s.standbyDir, "replica1", logf)
	if err != nil {
		s.close()
		return nil, err
	}
	s.standbyURL = standby.URL("paymentd")
	if s.standby, err = pgx.Connect(ctx, s.standbyURL); err != nil {
		s.close()
		return nil, err
	}
	return s, nil
}

func (s *primaryAndStandby) close() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if s.standby != nil {
		_ = s.standby.Close(ctx)
	}
	_ = pgcluster.Stop(ctx, s.standbyDir)
	_ = pgcluster.Stop(ctx, s.primaryDir)
	_ = os.RemoveAll(s.base)
}

// settle vacuums and analyzes the seeded tables, checkpoints, and waits
// until the standby has replayed all of it.
func settle(ctx context.Context, pool interface {
	Exec(context.Context, string, ...any) (pgconn.CommandTag, error)
	QueryRow(context.Context, string, ...any) pgx.Row
}, standby *pgx.Conn) error {
	for _, q := range []string{"VACUUM (ANALYZE) payments", "VACUUM (ANALYZE) orders", "CHECKPOINT"} {
		if _, err := pool.Exec(ctx, q); err != nil {
			return fmt.Errorf("%s: %w", q, err)
		}
	}
	var lsn string
	if err := pool.QueryRow(ctx, "SELECT pg_current_wal_lsn()::text").Scan(&lsn); err != nil {
		return err
	}
	return waitFor(ctx, 10*time.Minute, func() bool {
		var done bool
		err := standby.QueryRow(ctx, "SELECT pg_last_wal_replay_lsn() >= $1::pg_lsn", lsn).Scan(&done)
		return err == nil && done
	})
}

// setupResult is what one setup measured.
type setupResult struct {
	replica             bool
	alone, during       harness.LoadResult
	exports             []time.Duration
	primaryCPU, replCPU time.Duration
	// The same while the callbacks ran alone, and how long each phase
	// lasted: the servers' CPU per second of either phase.
	alonePrimaryCPU, aloneReplCPU time.Duration
	aloneTook, duringTook         time.Duration
	// inUse and samples: how often the replica was in use, sampled every
	// 100 ms while the exports ran.
	inUse, samples int
}

// measure runs the baseline, then the exports with the callbacks going on.
func measure(ctx context.Context, svc *harness.InProcess, f flags, calls []harness.Call, export url.Values, primaryPM, standbyPM int) (setupResult, error) {
	var r setupResult
	cookie, err := harness.AdminCookie(ctx, svc.BaseURL, adminPassword)
	if err != nil {
		return r, err
	}
	loader, err := harness.NewLoader(svc.BaseURL, 8)
	if err != nil {
		return r, err
	}
	defer loader.Close()
	if err := loader.Warm(ctx); err != nil {
		return r, err
	}
	n := int(f.rate * float64(f.baseline))
	pBefore, sBefore := harness.TreeCPU(primaryPM), harness.TreeCPU(standbyPM)
	r.alone = loader.RunPaced(calls[:n], f.rate, time.Duration(f.baseline)*time.Second)
	r.alonePrimaryCPU, r.aloneReplCPU = harness.TreeCPU(primaryPM)-pBefore, harness.TreeCPU(standbyPM)-sBefore
	r.aloneTook = r.alone.End.Sub(r.alone.Start)
	calls = calls[n:]

	type done struct {
		took []time.Duration
		err  error
	}
	finished := make(chan done, 1)
	pBefore, sBefore = harness.TreeCPU(primaryPM), harness.TreeCPU(standbyPM)
	duringBegan := time.Now()
	stopSampling := make(chan struct{})
	sampled := make(chan [2]int, 1)
	go func() {
		var in, all int
		t := time.NewTicker(100 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-stopSampling:
				sampled <- [2]int{in, all}
				return
			case <-t.C:
				all++
				if svc.App.ReplicaInUse() {
					in++
				}
			}
		}
	}()
	go func() {
		var d done
		for range f.exports {
			took, err := download(ctx, svc.BaseURL, cookie, export, f.rows)
			if err != nil {
				d.err = err
				break
			}
			d.took = append(d.took, took)
		}
		finished <- d
	}()
	var res done
	for got := false; !got; {
		per := int(f.rate * window.Seconds())
		if len(calls) < per {
			return r, fmt.Errorf("the exports outlasted the seeded callbacks (--max-export %s)", f.maxExport)
		}
		w := loader.RunPaced(calls[:per], f.rate, window)
		calls = calls[per:]
		r.during.Requests += w.Requests
		r.during.Errors += w.Errors
		r.during.Latencies = append(r.during.Latencies, w.Latencies...)
		for k, v := range w.ErrorSamples {
			if r.during.ErrorSamples == nil {
				r.during.ErrorSamples = map[string]int{}
			}
			r.during.ErrorSamples[k] += v
		}
		select {
		case res = <-finished:
			got = true
		default:
		}
	}
	close(stopSampling)
	s := <-sampled
	r.inUse, r.samples = s[0], s[1]
	r.primaryCPU, r.replCPU = harness.TreeCPU(primaryPM)-pBefore, harness.TreeCPU(standbyPM)-sBefore
	r.duringTook = time.Since(duringBegan)
	slices.Sort(r.during.Latencies)
	r.exports = res.took
	return r, res.err
}

// download reads one export to the end and checks it has every row.
func download(ctx context.Context, base, cookie string, q url.Values, rows int) (time.Duration, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/export/payments.csv?"+q.Encode(), nil)
	if err != nil {
		return 0, err
	}
	req.Header.Set("Cookie", cookie)
	began := time.Now()
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(res.Body)
		return 0, fmt.Errorf("export answered %d: %s", res.StatusCode, b)
	}
	var lines lineCounter
	if _, err := io.Copy(&lines, res.Body); err != nil {
		return 0, fmt.Errorf("reading the export: %w", err)
	}
	if int(lines) != rows+1 {
		return 0, fmt.Errorf("the export has %d lines, want a header and %d rows", lines, rows)
	}
	return time.Since(began), nil
}

// lineCounter counts the newlines written to it.
type lineCounter int

func (c *lineCounter) Write(p []byte) (int, error) {
	*c += lineCounter(bytes.Count(p, []byte{'\n'}))
	return len(p), nil
}

func report(out io.Writer, f flags, results []setupResult) {
	fmt.Fprintf(out, "\n%d-row export ×%d, epay callbacks at %.0f/s on the primary\n", f.rows, f.exports, f.rate)
	fmt.Fprintf(out, "%-38s %7s %8s %8s %8s %8s %6s\n", "callbacks", "calls", "p50", "p95", "p99", "max", "errors")
	for _, r := range results {
		name := "without a replica"
		if r.replica {
			name = "with a replica"
		}
		for _, p := range []struct {
			phase string
			l     harness.LoadResult
		}{{"alone", r.alone}, {"during the exports", r.during}} {
			l := p.l.Latencies
			fmt.Fprintf(out, "%-38s %7d %8s %8s %8s %8s %6d\n", name+", "+p.phase, p.l.Requests, ms(harness.Percentile(l, 50)),
				ms(harness.Percentile(l, 95)), ms(harness.Percentile(l, 99)), ms(harness.Percentile(l, 100)), p.l.Errors)
			for k, v := range p.l.ErrorSamples {
				fmt.Fprintf(out, "    %d × %s\n", v, k)
			}
		}
	}
	fmt.Fprintln(out)
	for _, r := range results {
		name := "without a replica"
		if r.replica {
			name = "with a replica"
		}
		perSecond := func(cpu, took time.Duration) string { return fmt.Sprintf("%.2f", cpu.Seconds()/took.Seconds()) }
		fmt.Fprintf(out, "%s: exports took %v; CPU (cores) primary %s alone, %s during the exports; standby %s alone, %s during", name, roundAll(r.exports),
			perSecond(r.alonePrimaryCPU, r.aloneTook), perSecond(r.primaryCPU, r.duringTook),
			perSecond(r.aloneReplCPU, r.aloneTook), perSecond(r.replCPU, r.duringTook))
		if r.replica {
			fmt.Fprintf(out, "; replica in use in %d of %d samples", r.inUse, r.samples)
		}
		fmt.Fprintln(out)
	}
}

func roundAll(ds []time.Duration) []time.Duration {
	out := make([]time.Duration, len(ds))
	for i, d := range ds {
		out[i] = d.Round(100 * time.Millisecond)
	}
	return out
}

func waitFor(ctx context.Context, limit time.Duration, cond func() bool) error {
	ctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	t := time.NewTicker(100 * time.Millisecond)
	defer t.Stop()
	for !cond() {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
	}
	return nil
}

func ms(d time.Duration) string { return fmt.Sprintf("%.1fms", float64(d.Microseconds())/1000) }
