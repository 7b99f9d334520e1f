package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"

	"github.com/rustbill/paymentd/internal/config"
)

const configUsage = `Usage:
  paymentd config check [--config FILE]

Loads the configuration exactly as serve does (defaults, then --config FILE or
./paymentd.toml, then PAYMENTD_<SECTION>__<KEY> environment variables), validates it,
and prints the effective configuration as TOML on standard output with every secret
masked (the JWT secret, passwords, the passwords in database and Redis URLs, webhook
secrets and header values). Problems go to standard error, each naming its key, and
so do warnings (valid, but most likely a mistake: an https [server].public_url with
[session].cookie_secure = false), which do not change the exit status.

Exit status: 0 when the configuration is valid, 1 when it is not, 2 on a bad command
line.
`

func cmdConfig(_ context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) > 0 && (args[0] == "-h" || args[0] == "--help" || args[0] == "help") {
		fmt.Fprint(stdout, configUsage)
		return nil
	}
	if len(args) == 0 || args[0] != "check" {
		fmt.Fprint(stderr, configUsage)
		return usageError{fmt.Errorf("config needs a sub-command: check")}
	}
	fs := newFlags("config check", configUsage, stderr)
	cfgPath := configFlag(fs)
	if err := parseFlags(fs, args[1:]); err != nil {
		return err
	}
	if fs.NArg() != 0 {
		return usageError{fmt.Errorf("config check takes no arguments, got %q", fs.Args())}
	}
	path := config.ResolvePath(*cfgPath)
	cfg, err := config.Load(path, os.Environ())
	if err != nil {
		return err
	}
	source := "defaults"
	if path != "" {
		source += " + " + path
	}
	if env := envKeys(os.Environ()); len(env) > 0 {
		source += " + " + strings.Join(env, ", ")
	}
	fmt.Fprintf(stdout, "# paymentd configuration from %s; secrets masked\n\n", source)
	_, _ = stdout.Write(cfg.Masked().TOML())
	for _, w := range cfg.Warnings() {
		fmt.Fprintln(stderr, "warning: "+w)
	}
	if err := cfg.Validate(); err != nil {
		return fmt.Errorf("invalid configuration:\n%w", err)
	}
	fmt.Fprintln(stderr, "configuration is valid")
	return nil
}

// envKeys names the PAYMENTD_ variables that took part (never their values).
func envKeys(environ []string) []string {
	var out []string
	for _, kv := range environ {
		k, _, _ := strings.Cut(kv, "=")
		if config.IsConfigEnv(k) {
			out = append(out, k)
		}
	}
	slices.Sort(out)
	return out
}
