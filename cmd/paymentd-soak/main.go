package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"net/url"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/rustbill/paymentd/internal/clustertest"
	"github.com/rustbill/paymentd/internal/fakes/epay"
	"github.com/rustbill/paymentd/internal/pgcluster"
)

func main() {
	os.Exit(run())
}

type options struct {
	minutes  float64
	nodes    int
	workers  int
	renewals int
	dbURL    string
	keep     bool
	interval time.Duration
	seed     uint64
	// The overload scenario (overload.go), run instead of the soak.
	overload         bool
	overloadFor      time.Duration
	overloadDeadline time.Duration
	overloadQueue    time.Duration
}

func run() int {
	var o options
	flag.Float64Var(&o.minutes, "minutes", 2, "how long the load runs (faults included)")
	flag.IntVar(&o.nodes, "nodes", 3, "paymentd instances")
	flag.IntVar(&o.workers, "workers", 6, "concurrent customers")
	flag.IntVar(&o.renewals, "renewals", 6, "customers with a monthly order that renews (the billing clock moves 9 days every 3 s)")
	flag.StringVar(&o.dbURL, "db", "", "an existing PostgreSQL server (its URL; a database of its own is created there); default: a private cluster in a temporary directory")
	flag.BoolVar(&o.keep, "keep", false, "keep the logs, the database and the private cluster's directory")
	flag.DurationVar(&o.interval, "fault-every", 12*time.Second, "time between the start of two faults")
	flag.Uint64Var(&o.seed, "seed", uint64(time.Now().UnixNano()), "seed of the fault schedule")
	flag.BoolVar(&o.overload, "overload", false, "run only the overload scenario: one node at max_concurrency 4 under 5x as many clients with deadlines, then the money check")
	flag.DurationVar(&o.overloadFor, "overload-for", 20*time.Second, "how long the overload scenario's load runs")
	// 100 ms: on a 2-core machine 20 clients at 4 slots wait about 80 ms
	// for a call, so some calls are served and the rest refused; a deadline
	// every call meets would leave the refusals unchecked.
	flag.DurationVar(&o.overloadDeadline, "overload-deadline", 100*time.Millisecond, "each overload call's client deadline")
	flag.DurationVar(&o.overloadQueue, "overload-queue-timeout", 0, "[server].queue_timeout_ms of the overloaded node (0: wait as the API contract says; a value answers ResourceExhausted past it)")
	flag.Parse()

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	run := soak
	if o.overload {
		run = overload
	}
	if err := run(ctx, o); err != nil {
		fmt.Fprintln(os.Stderr, "soak:", err)
		return 1
	}
	return 0
}

func logf(format string, args ...any) {
	fmt.Printf("%s "+format+"\n", append([]any{time.Now().Format("15:04:05.000")}, args...)...)
}

func soak(ctx context.Context, o options) error {
	dir, err := os.MkdirTemp("", "paymentd-soak-")
	if err != nil {
		return err
	}
	if err := os.Chmod(dir, 0o755); err != nil { // the postgres user enters it
		return err
	}
	if o.keep {
		logf("keeping everything in %s", dir)
	} else {
		defer os.RemoveAll(dir)
	}
	logs := filepath.Join(dir, "logs")
	if err := os.MkdirAll(logs, 0o755); err != nil {
		return err
	}

	bin, err := clustertest.Build(ctx)
	if err != nil {
		return err
	}
	defer clustertest.RemoveBuilt()

	// The database.
	pgDir := ""
	dbURL := ""
	if o.dbURL == "" {
		pgDir = filepath.Join(dir, "postgres")
		dbURL, err = pgcluster.Ensure(ctx, pgDir, "paymentd", logf)
		if err != nil {
			return err
		}
		defer func() {
			sctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			if err := pgcluster.Stop(sctx, pgDir); err != nil {
				logf("stopping the private cluster: %v", err)
			}
		}()
	} else {
		name := fmt.Sprintf("paymentd_soak_%d", time.Now().Unix())
		dbURL, err = createDatabase(ctx, o.dbURL, name)
		if err != nil {
			return err
		}
		if !o.keep {
			defer dropDatabase(o.dbURL, name)
		}
	}
	logf("database %s", redact(dbURL))

	fake := epay.New(epay.Options{NotifyScale: 0.01})
	if err := fake.Start(); err != nil {
		return err
	}
	defer fake.Close()

	c, err := clustertest.Start(ctx, clustertest.Options{Binary: bin, Nodes: o.nodes, DatabaseURL: dbURL, Dir: logs, Logf: logf, Env: clustertest.RenewalEnv})
	if err != nil {
		return err
	}
	defer func() {
		if err := c.Close(); err != nil {
			logf("stopping the cluster: %v", err)
		}
	}()
	w, err := clustertest.Setup(ctx, c, fake)
	if err != nil {
		return err
	}
	defer w.Close()

	runFor := time.Duration(o.minutes * float64(time.Minute))
	logf("load: %d workers on %d nodes for %s, a fault every %s (seed %d)", o.workers, o.nodes, runFor, o.interval, o.seed)
	loadCtx, stopLoad := context.WithTimeout(ctx, runFor)
	defer stopLoad()
	loadDone := make(chan struct{})
	renewals := w.NewRenewals(clustertest.RenewalOptions{Customers: o.renewals, Balance: 0.4, Refunds: 0.15})
	go func() {
		defer close(loadDone)
		var wg sync.WaitGroup
		wg.Go(func() { renewals.Run(loadCtx) })
		w.Run(loadCtx, clustertest.LoadOptions{Workers: o.workers, Duplicates: 0.5, Hostile: 0.2, Refunds: 0.1, Balance: 0.15})
		wg.Wait()
	}()

	f := &faults{c: c, w: w, renewals: renewals, fake: fake, pgDir: pgDir, rng: rand.New(rand.NewPCG(o.seed, o.seed^0x9e3779b97f4a7c15)), counts: map[string]int{}}
	f.loop(loadCtx, o.interval)
	<-loadDone
	if ctx.Err() != nil {
		return ctx.Err()
	}
	f.heal(ctx)
	logf("load stopped; faults injected: %v", f.counts)

	// Everything back up, then wait for the system to catch up and check.
	for _, n := range c.Nodes {
		if err := n.WaitReady(ctx); err != nil {
			return err
		}
	}
	settleStart := time.Now()
	if err := w.Settle(ctx, 3*time.Minute); err != nil {
		logf("%v", err)
	} else {
		logf("settled in %s", time.Since(settleStart).Round(time.Millisecond))
	}
	res, err := w.Check(ctx)
	if err != nil {
		return err
	}
	fmt.Println(res.String())
	fmt.Println(renewals.String())
	fmt.Println(figures(ctx, c))
	internal := w.InternalAnswers()
	fmt.Printf("Internal answers: %d kinds\n", len(internal))
	for _, line := range internal {
		fmt.Println("  " + line)
	}
	failures := requestFailures(logs)
	fmt.Printf("Causes the nodes logged for Internal and Unavailable answers: %d kinds\n", len(failures))
	for _, line := range failures {
		fmt.Println("  " + line)
	}
	for _, role := range []string{"event_worker", "billing"} {
		if err := c.CheckLeadership(role); err != nil {
			res.Problems = append(res.Problems, err.Error())
			fmt.Println("PROBLEM:", err)
		}
	}
	if !res.OK() || len(res.Problems) > 0 {
		fmt.Println("SOAK FAILED: lost, doubled or broke something (logs in", logs, "with --keep)")
		return errors.New("the money check failed")
	}
	fmt.Println("SOAK PASSED: nothing lost, nothing doubled, ledger clean")
	return nil
}

// faults injects one fault at a time.
type faults struct {
	c        *clustertest.Cluster
	w        *clustertest.Bundle
	renewals *clustertest.Renewals
	fake     *epay.Server
	pgDir    string
	rng      *rand.Rand
	counts   map[string]int
}

func (f *faults) loop(ctx context.Context, every time.Duration) {
	kinds := []string{"kill_leader", "kill_billing_leader", "kill_random", "stop_random", "terminate_connections", "gateway_500", "gateway_slow", "gateway_hangup", "notifications_lost"}
	if f.pgDir != "" {
		kinds = append(kinds, "restart_postgres")
	}
	next := time.After(every / 2)
	for {
		select {
		case <-ctx.Done():
			return
		case <-next:
		}
		kind := kinds[f.rng.IntN(len(kinds))]
		start := time.Now()
		if err := f.inject(ctx, kind); err != nil && ctx.Err() == nil {
			logf("fault %s: %v", kind, err)
		} else {
			f.counts[kind]++
		}
		logf("fault %s over after %s", kind, time.Since(start).Round(time.Millisecond))
		next = time.After(max(every-time.Since(start), time.Second))
	}
}

// sleep waits d or until ctx ends.
func sleep(ctx context.Context, d time.Duration) {
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
}

func (f *faults) inject(ctx context.Context, kind string) error {
	// Faults end even when the load stops meanwhile.
	bg := context.WithoutCancel(ctx)
	switch kind {
	case "kill_leader", "kill_random":
		var n *clustertest.Node
		if kind == "kill_leader" {
			wctx, cancel := context.WithTimeout(bg, 10*time.Second)
			n, _ = f.c.WaitLeader(wctx, "event_worker", nil)
			cancel()
		}
		if n == nil {
			alive := f.c.Alive()
			if len(alive) < 2 {
				return errors.New("fewer than two nodes up")
			}
			n = alive[f.rng.IntN(len(alive))]
		}
		if _, err := n.Kill(); err != nil {
			return err
		}
		logf("fault %s: %s (%s) killed", kind, n.Name, n.ID())
		sleep(ctx, 5*time.Second)
		return f.restart(bg, n)
	case "kill_billing_leader":
		// Killed in the middle of the billing pass that an advance of its
		// clock runs (the renewals due in the step: invoices issued,
		// balances applied, orders suspended); the next leader finishes
		// it, and the restarted node catches its clock up.
		wctx, cancel := context.WithTimeout(bg, 10*time.Second)
		n, err := f.c.WaitLeader(wctx, "billing", nil)
		cancel()
		if err != nil {
			return err
		}
		go f.renewals.Bump(bg, n)
		sleep(ctx, time.Duration(10+f.rng.IntN(150))*time.Millisecond)
		if _, err := n.Kill(); err != nil {
			return err
		}
		logf("fault %s: %s (%s) killed during its billing pass", kind, n.Name, n.ID())
		sleep(ctx, 5*time.Second)
		return f.restart(bg, n)
	case "stop_random":
		alive := f.c.Alive()
		if len(alive) < 2 {
			return errors.New("fewer than two nodes up")
		}
		n := alive[f.rng.IntN(len(alive))]
		logf("fault %s: %s (%s) stopped gracefully", kind, n.Name, n.ID())
		if err := n.Stop(20 * time.Second); err != nil {
			return err
		}
		sleep(ctx, 3*time.Second)
		return f.restart(bg, n)
	case "terminate_connections":
		var killed int
		err := f.c.Pool.QueryRow(bg, `SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
			WHERE datname = current_database() AND pid <> pg_backend_pid()`).Scan(&killed)
		logf("fault %s: %d backends terminated", kind, killed)
		return err
	case "restart_postgres":
		logf("fault %s: stopping PostgreSQL", kind)
		if err := pgcluster.Stop(bg, f.pgDir); err != nil {
			return err
		}
		sleep(ctx, 2*time.Second)
		_, err := pgcluster.Ensure(bg, f.pgDir, "paymentd", nil)
		logf("fault %s: PostgreSQL is back", kind)
		return err
	case "gateway_500":
		f.fake.InjectFault(epay.Fault{Status: 500})
		sleep(ctx, 4*time.Second)
		f.fake.ClearFaults()
	case "gateway_slow":
		f.fake.InjectFault(epay.Fault{Delay: 2 * time.Second})
		sleep(ctx, 5*time.Second)
		f.fake.ClearFaults()
	case "gateway_hangup":
		f.fake.InjectFault(epay.Fault{Hangup: true})
		sleep(ctx, 4*time.Second)
		f.fake.ClearFaults()
	case "notifications_lost":
		f.fake.DropNotify(true)
		sleep(ctx, 6*time.Second)
		f.fake.DropNotify(false)
	}
	return nil
}

func (f *faults) restart(ctx context.Context, n *clustertest.Node) error {
	if err := n.Start(); err != nil {
		return err
	}
	rctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if err := n.WaitReady(rctx); err != nil {
		return err
	}
	logf("%s back as %s", n.Name, n.ID())
	return nil
}

// heal ends every fault still in place.
func (f *faults) heal(ctx context.Context) {
	f.fake.ClearFaults()
	f.fake.DropNotify(false)
	for _, n := range f.c.Nodes {
		if !n.Alive() {
			if err := f.restart(ctx, n); err != nil {
				logf("restarting %s: %v", n.Name, err)
			}
		}
	}
}

func createDatabase(ctx context.Context, serverURL, name string) (string, error) {
	conn, err := pgx.Connect(ctx, serverURL)
	if err != nil {
		return "", err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize()); err != nil {
		return "", err
	}
	u, err := url.Parse(serverURL)
	if err != nil {
		return "", err
	}
	u.Path = "/" + name
	return u.String(), nil
}

func dropDatabase(serverURL, name string) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, serverURL)
	if err != nil {
		logf("drop %s: %v", name, err)
		return
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "DROP DATABASE IF EXISTS "+pgx.Identifier{name}.Sanitize()+" WITH (FORCE)"); err != nil {
		logf("drop %s: %v", name, err)
	}
}

// redact hides a password in a URL.
func redact(u string) string {
	p, err := url.Parse(u)
	if err != nil || p.User == nil {
		return u
	}
	if _, ok := p.User.Password(); ok {
		p.User = url.UserPassword(p.User.Username(), "xxxxx")
	}
	return strings.Replace(p.String(), "%78%78%78%78%78", "xxxxx", 1)
}
