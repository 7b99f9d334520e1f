package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"runtime"
	"runtime/debug"

	"github.com/rustbill/paymentd/internal/app"
	"github.com/rustbill/paymentd/internal/config"
	"github.com/rustbill/paymentd/internal/logging"
)

func configFlag(fs *flag.FlagSet) *string {
	return fs.String("config", "", "configuration file (default ./paymentd.toml when present)")
}

// loadConfig loads and validates the whole configuration, as the service
// uses it, turning every problem into a usage error that names the key.
func loadConfig(path string) (config.Config, error) {
	cfg, err := config.Load(config.ResolvePath(path), os.Environ())
	if err != nil {
		return cfg, usageError{err}
	}
	if err := cfg.Validate(); err != nil {
		return cfg, usageError{fmt.Errorf("invalid configuration:\n%w", err)}
	}
	return cfg, nil
}

// loadConfigFor loads the configuration and validates only the sections an
// operator's command uses: verify on a scratch restore needs [db], not the
// service's [jwt].secret.
func loadConfigFor(path string, sections ...config.Section) (config.Config, error) {
	cfg, err := config.Load(config.ResolvePath(path), os.Environ())
	if err != nil {
		return cfg, usageError{err}
	}
	if err := cfg.ValidateSections(sections...); err != nil {
		return cfg, usageError{fmt.Errorf("invalid configuration:\n%w", err)}
	}
	return cfg, nil
}

const serveUsage = `Usage:
  paymentd serve [--config FILE]

Runs the service: applies pending migrations (under the migration role), creates the
bootstrap admin on a database without admins, and serves gRPC, gRPC-Web and Connect
on [server].host:port and metrics on [metrics].host:port until SIGINT or SIGTERM,
then drains and stops. docs/operations.md describes running it in production.
`

func cmdServe(ctx context.Context, args []string, stderr io.Writer) error {
	fs := newFlags("serve", serveUsage, stderr)
	cfgPath := configFlag(fs)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 0 {
		return usageError{fmt.Errorf("serve takes no arguments, got %q", fs.Args())}
	}
	cfg, err := loadConfig(*cfgPath)
	if err != nil {
		return err
	}
	if err := cfg.CheckPluginDir(); err != nil {
		return err
	}
	return serve(ctx, cfg, stderr)
}

func serve(ctx context.Context, cfg config.Config, stderr io.Writer) error {
	log := logging.New(cfg.Log.Options(), stderr)
	v := readVersion()
	log.Info("starting paymentd", "version", v.Version, "commit", v.Commit, "commit_time", v.CommitTime, "modified", v.Modified)
	runtime.MemProfileRate = memProfileRate(cfg, runtime.MemProfileRate)
	a, err := newAppPacked(ctx, cfg, log)
	if err != nil {
		return err
	}
	defer a.Close()
	if err := a.Run(ctx); err != nil {
		return err
	}
	log.Info("stopped")
	return nil
}

// startGCPercent is the collector's target while the service starts.
const startGCPercent = 10

// newAppPacked is app.New with the collector run ten times as often as
// usual while it works: the start allocates most of what the process will
// ever hold (plugins compiled, the validator's CEL environment, protobuf
// descriptors) between the garbage of migrations and compilation, and
// what it keeps lands in half-empty spans the collector cannot give back.
// Collected often, the garbage's slots are reused by what stays: idle RSS
// about −1 MiB for a few milliseconds of collection on a heap of 10 MB
// (docs/performance.md, "Idle RSS"). GOGC, if set, is what comes back after.
func newAppPacked(ctx context.Context, cfg config.Config, log *slog.Logger) (*app.App, error) {
	prev := debug.SetGCPercent(startGCPercent)
	if prev >= 0 && prev < startGCPercent { // GOGC below ours: keep it
		debug.SetGCPercent(prev)
	}
	defer debug.SetGCPercent(prev)
	return app.New(ctx, cfg, log)
}

// memProfileRate is the allocation sampling rate for cfg: none when
// nobody can read a heap profile ([metrics].pprof off, the default), else
// the runtime's. Each sample unwinds its stack through the executable's
// line tables and keeps it in the profiler's bucket table: by the end of
// the start that had made about 2 MiB of the executable and the table
// resident for nothing (docs/performance.md, "Idle RSS, round three").
func memProfileRate(cfg config.Config, current int) int {
	if cfg.Metrics.Pprof {
		return current
	}
	return 0
}
