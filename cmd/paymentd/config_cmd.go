package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/rustbill/paymentd/internal/app"
	"github.com/rustbill/paymentd/internal/config"
	"github.com/rustbill/paymentd/internal/identity"
	"github.com/rustbill/paymentd/internal/migrate"
)

const configUsage = `Usage:
  paymentd config check [--config FILE]

Loads the configuration exactly as serve does (defaults, then --config FILE or
./paymentd.toml, then PAYMENTD_<SECTION>__<KEY> environment variables), validates it,
and prints the effective configuration as TOML on standard output with every secret
masked (the JWT secret, passwords, the passwords in database and Redis URLs, webhook
secrets and header values). Problems go to standard error, each naming its key, and
so do warnings (valid, but most likely a mistake: an https [server].public_url with
[session].cookie_secure = false, a public_url on this host on another port than
[server].port), which do not change the exit status. It also does what the start
does before it touches the database: [plugins].dir must be a directory it can read
(a relative one is resolved against the configuration file's directory, and the
resolved path is printed), and without [bootstrap].admin_password the database of
[db].url, when it answers, must already have an admin. When that database answers and
has no migration pending, its schema is compared with this build's, as the start
does after migrating: a difference that would refuse the start fails the check, one
the start leaves alone is a warning (paymentd migrate status lists them all).

Exit status: 0 when the configuration is valid, 1 when it is not, 2 on a bad command
line.
`

func cmdConfig(ctx context.Context, args []string, stdout, stderr io.Writer) error {
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
	err = errors.Join(cfg.Validate(), cfg.CheckPluginDir())
	if err == nil {
		err = checkDatabase(ctx, cfg, stderr)
	}
	if err != nil {
		// %v: config check exits 1 on an invalid configuration, not
		// the 2 that config.ErrInvalid means for the other commands.
		return fmt.Errorf("invalid configuration:\n%v", err)
	}
	fmt.Fprintln(stderr, "configuration is valid")
	return nil
}

// checkDatabase asks the database of [db].url what the start would: when
// no bootstrap password is set, whether it has an admin (the start fails
// without one), and whether its schema is the one this build serves. An
// unreachable database leaves both questions open, which a warning says
// when the first one matters.
func checkDatabase(ctx context.Context, cfg config.Config, stderr io.Writer) error {
	const open = "warning: [bootstrap].admin_password is empty: the service refuses to start on a database without admins"
	needAdmin := cfg.Bootstrap.AdminPassword == ""
	if cfg.DB.URL == "" {
		if needAdmin {
			fmt.Fprintln(stderr, open+" ([db].url is not set here, so the database could not be asked)")
		}
		return nil
	}
	pool, err := app.OpenPool(ctx, cfg.DB)
	if err != nil {
		if needAdmin {
			fmt.Fprintf(stderr, "%s (the database could not be asked: %v)\n", open, err)
		} else {
			fmt.Fprintf(stderr, "warning: the database of [db].url could not be asked, so its schema was not compared: %v\n", err)
		}
		return nil
	}
	defer pool.Close()
	if needAdmin {
		if err := identity.CheckBootstrap(ctx, pool, cfg.Bootstrap.Options()); err != nil {
			if errors.Is(err, identity.ErrBootstrapPasswordRequired) {
				return fmt.Errorf("%w (asked the database of [db].url)", err)
			}
			fmt.Fprintf(stderr, "%s (the database could not be asked: %v)\n", open, err)
			return nil
		}
	}
	return checkDatabaseSchema(ctx, pool, stderr)
}

// checkDatabaseSchema compares the schema of a database that has no
// migration pending with this build's. Pending migrations are the start's
// to apply, and only then can the schema be compared.
func checkDatabaseSchema(ctx context.Context, pool *pgxpool.Pool, stderr io.Writer) error {
	db := stdlib.OpenDBFromPool(pool)
	defer db.Close()
	st, err := migrate.Status(ctx, db)
	if err != nil {
		fmt.Fprintf(stderr, "warning: the schema was not compared: %v\n", err)
		return nil
	}
	pending := 0
	for _, s := range st {
		if s.AppliedAt.IsZero() {
			pending++
		}
	}
	if pending > 0 {
		fmt.Fprintf(stderr, "schema: not compared, %d migration(s) pending (the start applies them, and then compares)\n", pending)
		return nil
	}
	r, err := migrate.CheckSchema(ctx, pool)
	if err != nil {
		fmt.Fprintf(stderr, "warning: the schema was not compared: %v\n", err)
		return nil
	}
	if err := r.Err(); err != nil {
		return err
	}
	if left := r.LeftAlone(); len(left) > 0 {
		fmt.Fprintf(stderr, "warning: schema: the database holds %d object(s) this build does not know or a newer release changed, which the start leaves alone: %s\n", len(left), r.LeftAloneSummary())
	}
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
