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
	"os"
	"path/filepath"

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
  paymentd dev [--config FILE]
  paymentd dev fake-epay [--help]
  paymentd dev fake-provider [--help]

Runs the service for local development: writes .data/dev.toml (a random JWT secret
and bootstrap admin password) on first use, starts a private PostgreSQL in
.data/postgres when [db].url is empty, prints where it listens and the admin login,
and serves. fake-epay runs a fake epay gateway and fake-provider a fake instance-provider
API, for demos. Never for production.
`

// cmdDev runs the service for local development: it writes a dev config with
// a generated JWT secret and bootstrap password on first use, starts a private
// PostgreSQL cluster when [db].url is empty, prints how to log in, and serves.
func cmdDev(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) > 0 {
		switch args[0] {
		case "fake-epay":
			return cmdFakeEpay(ctx, args[1:], stdout, stderr)
		case "fake-provider":
			return cmdFakeProvider(ctx, args[1:], stdout, stderr)
		}
	}
	fs := newFlags("dev", devUsage, stderr)
	cfgPath := configFlag(fs)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	password, err := ensureDevConfig(devConfigFile)
	if err != nil {
		return err
	}
	paths := []string{devConfigFile}
	if p := config.ResolvePath(*cfgPath); p != "" {
		paths = append(paths, p)
	}
	cfg, err := config.LoadFiles(paths, os.Environ())
	if err != nil {
		return usageError{err}
	}
	if cfg.DB.URL == "" {
		logf := func(format string, args ...any) { fmt.Fprintf(stderr, "paymentd dev: "+format+"\n", args...) }
		url, err := pgcluster.Ensure(ctx, devPGDir, devDBName, logf)
		if err != nil {
			return err
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

// ensureDevConfig creates path with a random JWT secret and bootstrap admin
// password when it does not exist, and returns the bootstrap password it holds.
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
	password := base64.RawURLEncoding.EncodeToString(pw)
	body := fmt.Sprintf(`# Written by "paymentd dev" for local development only: never use these values in production.
# Delete this file to generate new ones (the admin password only applies to a database without admins).
[jwt]
secret = %q

[bootstrap]
admin_username = %q
admin_password = %q
`, hex.EncodeToString(secret), dev.Bootstrap.AdminUsername, password)
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return "", err
	}
	if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
		return "", err
	}
	return password, nil
}
