package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/user"
	"slices"
	"strings"

	"github.com/rustbill/paymentd/internal/apperr"
	"github.com/rustbill/paymentd/internal/cache"
	"github.com/rustbill/paymentd/internal/config"
	"github.com/rustbill/paymentd/internal/identity"
)

// stdin is where admin commands read a password without --password-file;
// tests replace it.
var stdin io.Reader = os.Stdin

const adminUsage = `Usage:
  paymentd admin create-admin   --username U [--password-file F] [--config FILE]
  paymentd admin reset-password --username U [--password-file F] [--keep-keys] [--config FILE]
  paymentd admin disable        --username U [--reason R] [--keep-keys] [--config FILE]
  paymentd admin enable         --username U [--config FILE]
  paymentd admin reset-2fa      --username U [--config FILE]
  paymentd admin unlock-2fa     --username U [--config FILE]

create-admin adds an admin account.

reset-password is the remedy for a leaked admin password: it sets the admin's
password, ends all of that admin's sessions and revokes all of that admin's API
keys, since whoever had the password could have signed in and minted keys. With
--keep-keys the keys are kept (only when you are sure no key was minted by
someone else: compare the keys' creation times with the leak). The password is
the first line of --password-file, or of standard input (typed without echo on a
terminal, or piped); never an argument, which other users could see. It must be
8 to 128 characters.

disable stops an admin at once: their login is refused, their sessions end and
their API keys are refused on every instance from the next request. Their keys
are also revoked, so that enabling them again does not bring the keys back;
with --keep-keys they are only refused while the admin is disabled. The last
enabled admin cannot be disabled. enable lets a disabled admin log in again;
keys revoked stay revoked.

reset-2fa removes an admin's two-factor sign-in (TOTP) and recovery codes, for
an admin who lost both their authenticator and their codes: they then sign in
with the password alone and can enrol again.

unlock-2fa lifts the lock that too many wrong two-factor codes in a row put
on an admin's codes (TOTP and recovery codes alike), and sets the count of
wrong codes back to 0; their second factor stays. Someone who sends wrong
codes had the password: reset it first (reset-password).

Each writes audit rows (actor system, "cli:<user>@<host>"), one per revoked key
too. With [redis] enabled the ended sessions are dropped from the shared
session cache as well. The database must be migrated (paymentd migrate up).
`

var adminSubcommands = []string{"create-admin", "reset-password", "disable", "enable", "reset-2fa", "unlock-2fa"}

func cmdAdmin(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		if len(args) == 0 {
			fmt.Fprint(stderr, adminUsage)
			return usageError{errors.New("admin needs a sub-command: " + strings.Join(adminSubcommands, ", "))}
		}
		fmt.Fprint(stdout, adminUsage)
		return nil
	}
	sub := args[0]
	if !slices.Contains(adminSubcommands, sub) {
		fmt.Fprint(stderr, adminUsage)
		return usageError{fmt.Errorf("admin: unknown sub-command %q", sub)}
	}
	fs := newFlags("admin "+sub, adminUsage, stderr)
	cfgPath := configFlag(fs)
	username := fs.String("username", "", "the admin's login name (required)")
	var passwordFile, reason *string
	var keepKeys *bool
	switch sub {
	case "create-admin", "reset-password":
		passwordFile = fs.String("password-file", "", "read the password from the first line of this file (default: standard input)")
	}
	switch sub {
	case "reset-password", "disable":
		keepKeys = fs.Bool("keep-keys", false, "keep the admin's API keys instead of revoking them")
	}
	if sub == "disable" {
		reason = fs.String("reason", "", "why, recorded in the audit log")
	}
	if err := parseFlags(fs, args[1:]); err != nil {
		return err
	}
	if fs.NArg() != 0 {
		return usageError{fmt.Errorf("admin %s takes no arguments, got %q", sub, fs.Args())}
	}
	if *username == "" {
		return usageError{fmt.Errorf("admin %s: --username is required", sub)}
	}
	var password string
	if passwordFile != nil {
		var err error
		if password, err = readPassword(*passwordFile, stderr); err != nil {
			return err
		}
		if err := identity.CheckAdminPassword(password); err != nil {
			return cliError(err)
		}
	}
	cfg, err := loadConfigFor(*cfgPath, config.SectionDB, config.SectionRedis)
	if err != nil {
		return err
	}
	pool, err := openMigrated(ctx, cfg)
	if err != nil {
		return err
	}
	defer pool.Close()

	op := identity.Operator{DB: pool, By: operator()}
	if sub == "reset-password" || sub == "disable" {
		// The service's shared session cache, so that a session ended
		// here is not trusted from there for its minute.
		c, err := cache.New(cfg.Redis.Options(), slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn})))
		if err != nil {
			return err
		}
		defer c.Close()
		op.Cache = identity.NewRedisSessionCache(c, nil)
		if c.Enabled() && !c.Available() {
			fmt.Fprintln(stderr, "warning: Redis cannot be reached: an ended session cached there is refused within a minute, not at once")
		}
	}
	switch sub {
	case "create-admin":
		a, err := op.CreateAdmin(ctx, *username, password)
		if err != nil {
			return cliError(err)
		}
		fmt.Fprintf(stdout, "admin %q created (id %s)\n", a.Username, a.ID)
	case "reset-password":
		ch, err := op.ResetPassword(ctx, *username, password, *keepKeys)
		if err != nil {
			return cliError(err)
		}
		fmt.Fprintf(stdout, "password of admin %q reset; %d session(s) ended\n", ch.Admin.Username, ch.SessionsEnded)
		printKeys(stdout, ch, *keepKeys, "reset-password")
		if ch.Admin.DisabledAt != nil {
			fmt.Fprintf(stdout, "note: admin %q is disabled and still cannot log in (paymentd admin enable)\n", ch.Admin.Username)
		}
		warnCache(stderr, ch)
	case "disable":
		ch, err := op.Disable(ctx, *username, *reason, *keepKeys)
		if err != nil {
			return cliError(err)
		}
		if ch.Changed {
			fmt.Fprintf(stdout, "admin %q disabled: login refused; %d session(s) ended\n", ch.Admin.Username, ch.SessionsEnded)
		} else {
			fmt.Fprintf(stdout, "admin %q was disabled already; %d session(s) ended\n", ch.Admin.Username, ch.SessionsEnded)
		}
		printKeys(stdout, ch, *keepKeys, "disable")
		warnCache(stderr, ch)
	case "reset-2fa":
		had, err := op.ResetTOTP(ctx, *username)
		if err != nil {
			return cliError(err)
		}
		if had {
			fmt.Fprintf(stdout, "two-factor sign-in of admin %q removed: they sign in with their password and can enrol again\n", *username)
		} else {
			fmt.Fprintf(stdout, "admin %q had no two-factor sign-in; nothing changed\n", *username)
		}
	case "unlock-2fa":
		had, err := op.UnlockSecondFactor(ctx, *username)
		if err != nil {
			return cliError(err)
		}
		if had {
			fmt.Fprintf(stdout, "two-factor codes of admin %q unlocked: the count of wrong codes is back to 0\n", *username)
		} else {
			fmt.Fprintf(stdout, "admin %q had no wrong two-factor codes to forget; nothing changed\n", *username)
		}
	default:
		ch, err := op.Enable(ctx, *username)
		if err != nil {
			return cliError(err)
		}
		if ch.Changed {
			fmt.Fprintf(stdout, "admin %q enabled: they can log in again; API keys revoked before stay revoked\n", ch.Admin.Username)
		} else {
			fmt.Fprintf(stdout, "admin %q was not disabled; nothing changed\n", ch.Admin.Username)
		}
	}
	return nil
}

// printKeys says what became of the admin's API keys.
func printKeys(stdout io.Writer, ch identity.AdminAccessChange, kept bool, sub string) {
	if kept {
		fmt.Fprintf(stdout, "API keys of admin %q kept (--keep-keys)", ch.Admin.Username)
		if ch.Admin.DisabledAt != nil {
			fmt.Fprint(stdout, "; refused while the admin is disabled")
		}
		fmt.Fprintln(stdout)
		return
	}
	fmt.Fprintf(stdout, "revoked %d API key(s) of admin %q (paymentd admin %s --keep-keys keeps them)\n", ch.KeysRevoked, ch.Admin.Username, sub)
}

func warnCache(stderr io.Writer, ch identity.AdminAccessChange) {
	if ch.CacheErr != nil {
		fmt.Fprintf(stderr, "warning: an ended session could not be dropped from Redis (%v): it is refused within a minute, not at once\n", ch.CacheErr)
	}
}

// readPassword reads the first line of path, or of stdin when path is "".
func readPassword(path string, stderr io.Writer) (string, error) {
	var r io.Reader = stdin
	if path != "" {
		f, err := os.Open(path)
		if err != nil {
			return "", fmt.Errorf("--password-file: %w", err)
		}
		defer f.Close()
		r = f
	}
	var line string
	read := func() error {
		var err error
		line, err = bufio.NewReader(io.LimitReader(r, 4096)).ReadString('\n')
		if err != nil && !errors.Is(err, io.EOF) {
			return fmt.Errorf("reading the password: %w", err)
		}
		return nil
	}
	if f, ok := r.(*os.File); ok && path == "" {
		terminal, err := withoutEcho(f.Fd(), func() error {
			fmt.Fprint(stderr, "Password: ")
			return read()
		})
		if terminal {
			fmt.Fprintln(stderr)
			if err != nil {
				return "", err
			}
			return strings.TrimRight(line, "\r\n"), nil
		}
	}
	if err := read(); err != nil {
		return "", err
	}
	return strings.TrimRight(line, "\r\n"), nil
}

// operator names who ran the command, for the audit row.
func operator() string {
	name := os.Getenv("USER")
	if u, err := user.Current(); err == nil {
		name = u.Username
	}
	host, _ := os.Hostname()
	return "cli:" + name + "@" + host
}

// cliError turns a domain error into its caller-facing message.
func cliError(err error) error {
	var ae *apperr.Error
	if errors.As(err, &ae) && ae.Kind != apperr.Internal {
		return errors.New(ae.Message)
	}
	return err
}
