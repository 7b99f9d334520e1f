package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/user"
	"strings"

	"github.com/rustbill/paymentd/internal/apperr"
	"github.com/rustbill/paymentd/internal/identity"
)

// stdin is where admin commands read a password without --password-file;
// tests replace it.
var stdin io.Reader = os.Stdin

const adminUsage = `Usage:
  paymentd admin create-admin   --username U [--password-file F] [--config FILE]
  paymentd admin reset-password --username U [--password-file F] [--config FILE]

create-admin adds an admin account; reset-password sets an admin's password and
ends all of that admin's sessions. The password is the first line of
--password-file, or of standard input (typed without echo on a terminal, or piped);
never an argument, which other users could see. It must be 8 to 128 characters.
Both write an audit row (actor system, "cli:<user>@<host>"). The database must be
migrated (paymentd migrate up).
`

func cmdAdmin(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		if len(args) == 0 {
			fmt.Fprint(stderr, adminUsage)
			return usageError{errors.New("admin needs a sub-command: create-admin or reset-password")}
		}
		fmt.Fprint(stdout, adminUsage)
		return nil
	}
	sub := args[0]
	if sub != "create-admin" && sub != "reset-password" {
		fmt.Fprint(stderr, adminUsage)
		return usageError{fmt.Errorf("admin: unknown sub-command %q", sub)}
	}
	fs := newFlags("admin "+sub, adminUsage, stderr)
	cfgPath := configFlag(fs)
	username := fs.String("username", "", "the admin's login name (required)")
	passwordFile := fs.String("password-file", "", "read the password from the first line of this file (default: standard input)")
	if err := parseFlags(fs, args[1:]); err != nil {
		return err
	}
	if fs.NArg() != 0 {
		return usageError{fmt.Errorf("admin %s takes no arguments, got %q", sub, fs.Args())}
	}
	if *username == "" {
		return usageError{fmt.Errorf("admin %s: --username is required", sub)}
	}
	password, err := readPassword(*passwordFile, stderr)
	if err != nil {
		return err
	}
	if err := identity.CheckAdminPassword(password); err != nil {
		return cliError(err)
	}
	cfg, err := loadConfig(*cfgPath)
	if err != nil {
		return err
	}
	pool, err := openMigrated(ctx, cfg)
	if err != nil {
		return err
	}
	defer pool.Close()

	by := operator()
	switch sub {
	case "create-admin":
		a, err := identity.CreateAdmin(ctx, pool, *username, password, by)
		if err != nil {
			return cliError(err)
		}
		fmt.Fprintf(stdout, "admin %q created (id %s)\n", a.Username, a.ID)
	default:
		a, ended, err := identity.ResetAdminPassword(ctx, pool, *username, password, by)
		if err != nil {
			return cliError(err)
		}
		fmt.Fprintf(stdout, "password of admin %q reset; %d session(s) ended\n", a.Username, ended)
		if a.DisabledAt != nil {
			fmt.Fprintf(stdout, "note: admin %q is disabled and still cannot log in\n", a.Username)
		}
	}
	return nil
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
