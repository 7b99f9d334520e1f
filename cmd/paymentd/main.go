package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/rustbill/paymentd/internal/config"
	"github.com/rustbill/paymentd/internal/migrate"
)

// exitUsage is the exit code for a bad command line or configuration, and
// for a database whose schema is not this build's: restarting fixes none of
// them, and systemd's RestartPreventExitStatus=2 stops restarting.
const exitUsage = 2

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

const usage = `paymentd is the payment core of the billing platform.

Usage:
  paymentd serve   [--config FILE]            run the service
  paymentd dev     [--config FILE]            run the service on a local PostgreSQL
                                              (started in .data/postgres when [db].url
                                              is empty) with a generated dev config
  paymentd migrate [--config FILE] up|down|status
                                              apply, roll back one, or list migrations
  paymentd config check [--config FILE]       validate the configuration and print it as
                                              TOML with secrets masked
  paymentd admin create-admin --username U [--password-file F] [--config FILE]
  paymentd admin reset-password --username U [--password-file F] [--keep-keys] [--config FILE]
  paymentd admin disable --username U [--reason R] [--keep-keys] [--config FILE]
  paymentd admin enable --username U [--config FILE]
  paymentd admin reset-2fa --username U [--config FILE]
                                              add an admin; set an admin's password, end
                                              their sessions and revoke their API keys;
                                              disable or enable an admin (password from
                                              the file or standard input); remove an
                                              admin's second factor (a lost device)
  paymentd verify  [--config FILE]            check that payments, refunds, orders,
                                              invoices, events and balances add up;
                                              exit 1 when they do not
  paymentd secrets rotate [--config FILE]     encrypt every stored plugin secret under
                                              the key [secrets].current names, so older
                                              keys can be removed
  paymentd dev fake-epay [--addr 127.0.0.1:8090] [--public-url URL] [--pid ID] [--key KEY]
                                              run a fake epay gateway for demos until Ctrl-C,
                                              printing the merchant account to configure
  paymentd dev fake-alipay [--addr 127.0.0.1:8092] [--public-url URL] [--key-dir DIR]
                                              run a fake Alipay Open API gateway for demos until
                                              Ctrl-C, printing the app and keys to configure
  paymentd dev fake-wechatpay [--addr 127.0.0.1:8093] [--public-url URL] [--key-dir DIR]
                                              run a fake WeChat Pay API v3 for demos until
                                              Ctrl-C, printing the merchant and keys to configure
  paymentd dev fake-provider [--addr 127.0.0.1:8091] [--token TOKEN] [--provision-delay D]
                                              run a fake instance-provider API for demos until
                                              Ctrl-C, printing the http_provider settings
  paymentd plugin check [--type FOLDER] FILE  compile a plugin script, check its contract and
                                              version, dry-run info and config_schema;
                                              exit 1 naming the line when it fails
  paymentd version                            print the module version, commit, commit
                                              time and Go version
  paymentd help                               print this help

Every command takes --help; flags may come before or after a command's arguments.
Exit status: 0 success, 1 failure (a check that found a
problem included), 2 a bad command line or configuration, or a database whose schema
is not the one this build expects.

Configuration: --config FILE, else ./paymentd.toml when present; every key can be
overridden by PAYMENTD_<SECTION>__<KEY> environment variables (koanf.example.toml).
docs/operations.md describes running paymentd in production.
`

// usageError marks errors that should exit with exitUsage.
type usageError struct{ error }

// Unwrap lets errors.Is see flag.ErrHelp through it.
func (e usageError) Unwrap() error { return e.error }

// newFlags returns a sub-command's flag set: on --help and on a bad flag it
// prints the command's usage text, then its flags.
func newFlags(name, usageText string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), usageText)
		fmt.Fprintln(fs.Output(), "\nFlags:")
		fs.PrintDefaults()
	}
	return fs
}

// parseFlags parses args: --help is flag.ErrHelp (exit 0, the usage was
// printed), any other problem a usage error. Flags may come before or after
// the arguments (`migrate status --config F` as `migrate --config F
// status`): the standard flag package stops at the first argument, which an
// operator typing a documented command does not expect. A "--" ends the flags.
func parseFlags(fs *flag.FlagSet, args []string) error {
	if err := fs.Parse(flagsFirst(fs, args)); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return usageError{err}
	}
	return nil
}

func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return exitUsage
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	var err error
	switch args[0] {
	case "serve":
		err = cmdServe(ctx, args[1:], stderr)
	case "dev":
		err = cmdDev(ctx, args[1:], stdout, stderr)
	case "migrate":
		err = cmdMigrate(ctx, args[1:], stdout, stderr)
	case "plugin":
		err = cmdPlugin(ctx, args[1:], stdout, stderr)
	case "config":
		err = cmdConfig(ctx, args[1:], stdout, stderr)
	case "admin":
		err = cmdAdmin(ctx, args[1:], stdout, stderr)
	case "verify":
		err = cmdVerify(ctx, args[1:], stdout, stderr)
	case "secrets":
		err = cmdSecrets(ctx, args[1:], stdout, stderr)
	case "version":
		if len(args) > 1 {
			if args[1] == "-h" || args[1] == "--help" {
				fmt.Fprint(stdout, versionUsage)
				return 0
			}
			fmt.Fprintf(stderr, "paymentd: version takes no arguments\n")
			return exitUsage
		}
		fmt.Fprint(stdout, readVersion())
	case "help", "-h", "-help", "--help":
		fmt.Fprint(stdout, usage)
	default:
		fmt.Fprintf(stderr, "paymentd: unknown command %q\n\n%s", args[0], usage)
		return exitUsage
	}
	if err == nil {
		return 0
	}
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	fmt.Fprintln(stderr, "paymentd:", err)
	var ue usageError
	if errors.As(err, &ue) || errors.Is(err, config.ErrInvalid) || errors.Is(err, migrate.ErrSchemaDrift) {
		return exitUsage
	}
	return 1
}

// flagsFirst reorders args so that every flag (with its value, when it takes
// one and is not written --name=value) comes before the arguments, which
// follow a "--". Whether a flag takes a value is read from fs: a boolean
// flag does not. An unknown flag is left where flags go, for fs.Parse to
// refuse by name.
func flagsFirst(fs *flag.FlagSet, args []string) []string {
	var flags, rest []string
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			rest = append(rest, args[i+1:]...)
			break
		}
		if len(a) < 2 || a[0] != '-' {
			rest = append(rest, a)
			continue
		}
		flags = append(flags, a)
		name := strings.TrimLeft(a, "-")
		if strings.Contains(name, "=") {
			continue
		}
		f := fs.Lookup(name)
		if f == nil {
			continue
		}
		if b, ok := f.Value.(interface{ IsBoolFlag() bool }); ok && b.IsBoolFlag() {
			continue
		}
		if i+1 == len(args) {
			// The value is missing: as written, so that fs.Parse says so
			// instead of taking the "--" below for it.
			return args
		}
		i++
		flags = append(flags, args[i])
	}
	return append(append(flags, "--"), rest...)
}
