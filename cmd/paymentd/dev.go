package main

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/rustbill/paymentd/internal/config"
	"github.com/rustbill/paymentd/internal/pgcluster"
)

// Local development state lives under .data/ in the working directory.
const (
	devDataDir    = ".data"
	devConfigFile = ".data/dev.toml"
	devPGDir      = ".data/postgres"
	devDBName     = "paymentd"
)

const devUsage = `Usage:
  paymentd dev [--config FILE] [--keep-db]
  paymentd dev fake-epay [--help]
  paymentd dev fake-alipay [--help]
  paymentd dev fake-wechatpay [--help]
  paymentd dev fake-provider [--help]

Runs the service for local development: writes .data/dev.toml (a random JWT secret,
bootstrap admin password and [secrets] key) on first use, adding the key to a
dev.toml written before keys existed, starts a private PostgreSQL in
.data/postgres when [db].url is empty, turns [billing].test_clock on, prints where it
listens and the admin login, and serves until SIGINT or SIGTERM, or until the process
that started it goes away (a "go run" or "task" wrapper that was stopped); then it stops gracefully and stops the
private PostgreSQL too, unless --keep-db or another client still uses it. A cluster left
running by a crash or kill -9 is reused by the next run. fake-epay runs a fake epay gateway, fake-alipay a fake Alipay Open API gateway,
fake-wechatpay a fake WeChat Pay API v3 and fake-provider a fake instance-provider API, for demos. Never for production.
`

// cmdDev runs the service for local development: it writes a dev config with
// a generated JWT secret and bootstrap password on first use, starts a private
// PostgreSQL cluster when [db].url is empty, prints how to log in, and serves.
func cmdDev(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) > 0 {
		switch args[0] {
		case "fake-epay":
			return cmdFakeEpay(ctx, args[1:], stdout, stderr)
		case "fake-alipay":
			return cmdFakeAlipay(ctx, args[1:], stdout, stderr)
		case "fake-wechatpay":
			return cmdFakeWechatpay(ctx, args[1:], stdout, stderr)
		case "fake-provider":
			return cmdFakeProvider(ctx, args[1:], stdout, stderr)
		}
	}
	fs := newFlags("dev", devUsage, stderr)
	cfgPath := configFlag(fs)
	keepDB := fs.Bool("keep-db", false, "leave the private PostgreSQL running when paymentd dev stops")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 0 {
		return usageError{fmt.Errorf("dev takes no arguments besides fake-epay, fake-alipay, fake-wechatpay and fake-provider, got %q", fs.Args())}
	}
	logf := func(format string, args ...any) { fmt.Fprintf(stderr, "paymentd dev: "+format+"\n", args...) }
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	defer watchParent(ctx, cancel, logf)()
	password, err := ensureDevConfig(devConfigFile)
	if err != nil {
		return err
	}
	paths := []string{devConfigFile}
	if p := config.ResolvePath(*cfgPath); p != "" {
		paths = append(paths, p)
	}
	cfg, err := loadDevConfig(paths, os.Environ())
	if err != nil {
		return usageError{err}
	}
	// Before a private PostgreSQL is started for nothing.
	if err := cfg.CheckPluginDir(); err != nil {
		return err
	}
	if cfg.DB.URL == "" {
		url, err := pgcluster.Ensure(ctx, devPGDir, devDBName, logf)
		if err != nil {
			return err
		}
		if !*keepDB {
			defer stopDevCluster(logf)
		}
		cfg.DB.URL = url
		fmt.Fprintf(stdout, "local database: %s (data in %s)\n", url, devPGDir)
	}
	if err := cfg.Validate(); err != nil {
		return usageError{fmt.Errorf("invalid configuration:\n%w", err)}
	}
	fmt.Fprintf(stdout, "service:        %s (gRPC, gRPC-Web and Connect on one port)\n", cfg.Server.PublicURL)
	if password != "" && cfg.Bootstrap.AdminPassword == password {
		fmt.Fprintf(stdout, "admin login:    %s / %s (from %s; used when the database has no admin yet)\n",
			cfg.Bootstrap.AdminUsername, password, devConfigFile)
	}
	return serve(ctx, cfg, stderr)
}

// loadDevConfig loads the files and the environment as serve does, with
// three differences for a checkout: the default [plugins].dir is the
// working directory's plugins (the checkout ./run.sh runs in, not .data/
// where dev.toml is), [billing].test_clock is on (local development may
// move the billing clock forward), and a moved [server].port takes the
// default [server].public_url along. serve leaves all three as the
// configuration says.
func loadDevConfig(paths, environ []string) (config.Config, error) {
	wd, err := os.Getwd()
	if err != nil {
		return config.Config{}, err
	}
	cfg, err := config.LoadFilesFrom(paths, environ, wd)
	if err != nil {
		return cfg, err
	}
	cfg.Billing.TestClock = true
	if def := config.Default().Server; cfg.Server.PublicURL == def.PublicURL && cfg.Server.Port != def.Port {
		cfg.Server.PublicURL = "http://" + net.JoinHostPort("127.0.0.1", strconv.Itoa(cfg.Server.Port))
	}
	return cfg, nil
}

// stopDevCluster stops the private cluster once the service has stopped (its
// pool closed), unless another client (a test run sharing .data/postgres)
// still uses it. It runs after the signal, so it gets a context of its own.
func stopDevCluster(logf func(string, ...any)) {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	logf("stopping the private PostgreSQL in %s (--keep-db leaves it running)", devPGDir)
	stopped, clients, err := pgcluster.StopUnlessInUse(ctx, devPGDir)
	switch {
	case err != nil:
		logf("could not stop the private PostgreSQL in %s: %v", devPGDir, err)
	case !stopped:
		logf("left the private PostgreSQL in %s running: %d other clients use it", devPGDir, clients)
	default:
		logf("the private PostgreSQL in %s is stopped", devPGDir)
	}
}

// untilStopped returns when ctx ends (Ctrl-C, SIGTERM) or when the process
// that started the command goes away, as paymentd dev does: a demo fake run
// under `go run` must not outlive the `go run` a person stopped.
func untilStopped(ctx context.Context, name string, stderr io.Writer) {
	ctx, cancel := context.WithCancel(ctx)
	defer watchParent(ctx, cancel, func(format string, args ...any) {
		fmt.Fprintf(stderr, "paymentd "+name+": "+format+"\n", args...)
	})()
	<-ctx.Done()
}

// startParent is the process that started paymentd, read when the program
// starts: read when a fake begins to serve instead, a wrapper killed while
// the fake was still making its keys was already gone, and the fake took
// its new parent for the one to watch (under load,
// TestDevFakesStopWhenTheWrapperThatStartedThemIsKilled saw it).
var startParent = os.Getppid()

// watchParent cancels the run when the process that started paymentd dev goes
// away. "go run" ignores SIGINT (it expects the terminal to send it to the
// whole process group) and dies of SIGTERM without passing it on, and a task
// wrapper may die the same way: without this the service and its database
// would outlive the command that a person stopped. The returned function
// ends the watch and waits for it.
func watchParent(ctx context.Context, cancel context.CancelFunc, logf func(string, ...any)) (wait func()) {
	parent := startParent
	done := make(chan struct{})
	go func() {
		defer close(done)
		tick := time.NewTicker(200 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
				if os.Getppid() != parent {
					logf("the process that started it (pid %d) is gone; stopping", parent)
					cancel()
					return
				}
			}
		}
	}()
	return func() { cancel(); <-done }
}

// ensureDevConfig creates path with a random JWT secret, bootstrap admin
// password and [secrets] key when it does not exist, adds a [secrets] key to
// one written before gateway secrets were encrypted, and returns the
// bootstrap password it holds.
func ensureDevConfig(path string) (string, error) {
	dev, err := config.LoadFiles(nil, nil)
	if err != nil {
		return "", err
	}
	if _, err := os.Stat(path); err == nil {
		c, err := config.LoadFiles([]string{path}, nil)
		if err != nil {
			return "", err
		}
		if err := addDevSecretsKey(path, c); err != nil {
			return "", err
		}
		return c.Bootstrap.AdminPassword, nil
	} else if !errors.Is(err, fs.ErrNotExist) {
		return "", err
	}
	secret := make([]byte, 32)
	pw := make([]byte, 12)
	if _, err := rand.Read(secret); err != nil {
		return "", err
	}
	if _, err := rand.Read(pw); err != nil {
		return "", err
	}
	key, err := devSecretsBlock()
	if err != nil {
		return "", err
	}
	password := base64.RawURLEncoding.EncodeToString(pw)
	body := fmt.Sprintf(`# Written by "paymentd dev" for local development only: never use these values in production.
# Delete this file to generate new ones (the admin password only applies to a database without admins;
# without the [secrets] key the plugin secrets stored in .data/postgres cannot be read).
[jwt]
secret = %q

[bootstrap]
admin_username = %q
admin_password = %q
%s`, hex.EncodeToString(secret), dev.Bootstrap.AdminUsername, password, key)
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return "", err
	}
	if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
		return "", err
	}
	return password, nil
}

// devSecretsKeyID names the key paymentd dev generates.
const devSecretsKeyID = "dev"

// devSecretsBlock is a [secrets] section with a new random key.
func devSecretsBlock() (string, error) {
	key := make([]byte, 32)
	if _, err := rand.Read(key); err != nil {
		return "", err
	}
	return fmt.Sprintf(`
[secrets]
# Encrypts plugin secrets (merchant keys, provider tokens) in the database.
current = %q
[secrets.keys]
%s = %q
`, devSecretsKeyID, devSecretsKeyID, base64.StdEncoding.EncodeToString(key)), nil
}

// addDevSecretsKey appends a [secrets] section to a dev config c (read from
// path) that has none: dev.toml files written before secrets were
// encrypted. One with a [secrets] section of its own is left alone.
func addDevSecretsKey(path string, c config.Config) error {
	if len(c.Secrets.Keys) > 0 || c.Secrets.Current != "" {
		return nil
	}
	body, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	if strings.Contains(string(body), "[secrets") {
		return nil
	}
	block, err := devSecretsBlock()
	if err != nil {
		return err
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		return err
	}
	if _, err := f.WriteString(block); err != nil {
		_ = f.Close()
		return err
	}
	return f.Close()
}
