// Command paymentd-bench measures paymentd against its database's own
// ceiling, on this machine, in one run (`task bench`, docs/performance.md):
//
//	paymentd-bench [--quick] [--duration 10s] [--rounds 3] [--out bench/results] [--profile] [--keep]
//
// It starts everything it needs — a private PostgreSQL (or a fresh database
// on PAYMENTD_BENCH_DATABASE_URL), the fake gateway and provider, the
// paymentd binary built from this checkout, an empty server on the same
// stack — seeds the data, runs the ceilings (pgbench running the
// callback's own SQL and a point read; pgbench-minimal, the smallest
// hand-written settlement on the same tables; the empty handler)
// interleaved with the service's workloads, checks the money invariants,
// prints a report with every target ratio and writes it to the results
// directory. It stops what it started.
//
// Its other sub-commands are the processes the harness starts:
//
//	paymentd-bench fakes          fake epay gateway and fake provider (URLs as one JSON line)
//	paymentd-bench empty-server   paymentd's stack with a GetPayment that never reads the database
//	paymentd-bench serve          paymentd serve with a pprof listener (--pprof-addr), for --profile
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime"
	"runtime/debug"
	"runtime/pprof"
	"strings"
	"syscall"
	"time"

	"github.com/rustbill/paymentd/bench/harness"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout, os.Stderr); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return
		}
		fmt.Fprintln(os.Stderr, "paymentd-bench:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) > 0 {
		switch args[0] {
		case "fakes":
			return cmdFakes(ctx, args[1:], stdout)
		case "empty-server":
			return cmdEmptyServer(ctx, args[1:], stderr)
		case "serve":
			return cmdServe(ctx, args[1:], stderr)
		case "run":
			args = args[1:]
		}
	}
	fs := flag.NewFlagSet("paymentd-bench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	o := harness.Options{}
	quick := fs.Bool("quick", false, "a short run (under two minutes): 1 s per measurement")
	fs.DurationVar(&o.Duration, "duration", 0, "length of each measurement (default 10s, 1s with --quick)")
	fs.IntVar(&o.Rounds, "rounds", 3, "rounds of ceilings and workloads; medians are reported")
	fs.StringVar(&o.OutDir, "out", "bench/results", "directory for <date>.json and <date>.md (relative to the repository)")
	fs.BoolVar(&o.Profile, "profile", false, "run the service with a pprof listener and save a CPU profile of every workload of round 1")
	fs.BoolVar(&o.Keep, "keep", false, "keep the temporary directory (database, logs) for inspection")
	fs.IntVar(&o.Conns, "conns", 2, "HTTP/2 connections of the load generator")
	fs.BoolVar(&o.NoWrite, "no-write", false, "print the report without writing it to --out")
	fs.BoolVar(&o.ExtraCeilings, "extra-ceilings", false, "also measure the callback's SQL pipelined into three round trips (what batching settle would give)")
	fs.BoolVar(&o.Waits, "waits", false, "sample pg_stat_activity and paymentd's pool during every measurement: where the requests waited")
	fs.BoolVar(&o.PgStats, "pg-stats", false, "load pg_stat_statements and print the costliest statements of every measurement")
	fs.Func("set", "an extra PAYMENTD_<SECTION>__<KEY>=VALUE for paymentd (repeatable), to try a setting", func(v string) error {
		if !strings.HasPrefix(v, "PAYMENTD_") || !strings.Contains(v, "=") {
			return fmt.Errorf("--set wants PAYMENTD_<SECTION>__<KEY>=VALUE, got %q", v)
		}
		o.ServiceEnv = append(o.ServiceEnv, v)
		return nil
	})
	only := fs.String("only", "", "comma-separated workloads to run (callback,get,list,create,balance,drain,probe); default all")
	if err := fs.Parse(args); err != nil {
		return err
	}
	o.Quick = *quick
	// The load generator keeps its prepared requests live: a larger heap
	// target makes it collect them rarely. One thread: it shares the
	// machine with what it measures, and its goroutines hand responses to
	// each other cheaper on one.
	debug.SetGCPercent(400)
	if os.Getenv("GOMAXPROCS") == "" {
		runtime.GOMAXPROCS(1)
	}
	if o.Duration == 0 {
		o.Duration = 10 * time.Second
		if o.Quick {
			o.Duration = time.Second
		}
	}
	o.Only = *only
	o.DatabaseURL = os.Getenv("PAYMENTD_BENCH_DATABASE_URL")
	if path := os.Getenv("PAYMENTD_BENCH_CPUPROFILE"); path != "" {
		// The harness's own CPU profile: what the load generator costs.
		f, err := os.Create(path)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
		defer pprof.StopCPUProfile()
	}
	o.Log = stderr
	o.Out = stdout
	_, err := harness.Run(ctx, o)
	return err
}
