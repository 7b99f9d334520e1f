package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/rustbill/paymentd/internal/audit"
	"github.com/rustbill/paymentd/internal/config"
	"github.com/rustbill/paymentd/internal/secretpass"
)

const secretsUsage = `Usage:
  paymentd secrets rotate [--config FILE]

rotate encrypts every stored plugin secret (each "x-secret" property of a plugin's
config: gateway interfaces' configs, products' provider settings and the copies of
them orders keep) under the key [secrets].current names: the secrets still in clear
and those under another key of [secrets].keys. It takes one row at a time in a
short transaction under its row lock, while the service keeps running (run it again
if it is interrupted), and writes one audit row per row it changed (actor system,
"cli:<user>@<host>"; key ids, never a value).

Run it once every instance holds the new key and encrypts with it (docs/operations.md,
"Secrets at rest"): afterwards no secret needs an older key, which can then be
removed from [secrets].keys. It prints how many secrets each key holds.

Exit status: 0 when every secret is under the current key, 1 when some secret does
not decrypt with [secrets].keys (each is named; its interface or product stays
unusable until the key is configured or an admin sends the secret again), 2 on a bad command line
or configuration (no [secrets] keys included). The database must be migrated.
`

func cmdSecrets(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		if len(args) == 0 {
			fmt.Fprint(stderr, secretsUsage)
			return usageError{errors.New("secrets needs a sub-command: rotate")}
		}
		fmt.Fprint(stdout, secretsUsage)
		return nil
	}
	if args[0] != "rotate" {
		fmt.Fprint(stderr, secretsUsage)
		return usageError{fmt.Errorf("secrets: unknown sub-command %q", args[0])}
	}
	fs := newFlags("secrets rotate", secretsUsage, stderr)
	cfgPath := configFlag(fs)
	if err := parseFlags(fs, args[1:]); err != nil {
		return err
	}
	if fs.NArg() != 0 {
		return usageError{fmt.Errorf("secrets rotate takes no arguments, got %q", fs.Args())}
	}
	cfg, err := loadConfigFor(*cfgPath, config.SectionDB, config.SectionSecrets)
	if err != nil {
		return err
	}
	keys, err := cfg.Secrets.Keyring()
	if err != nil {
		return usageError{err}
	}
	if keys == nil {
		return usageError{errors.New("secrets rotate needs [secrets].current and [secrets].keys (koanf.example.toml)")}
	}
	pool, err := openMigrated(ctx, cfg)
	if err != nil {
		return err
	}
	defer pool.Close()

	rep, err := secretpass.Rotate(ctx, pool, keys, audit.System(operator()), time.Now())
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "encrypted %d secret(s) under key %q: %d in clear before, %d under another key\n",
		rep.Changed(), keys.Current(), rep.Sealed, rep.Resealed)
	var holders []string
	for _, t := range secretpass.Tables {
		holders = append(holders, fmt.Sprintf("%d %s", rep.Of[t.Kind].Owners, t.Plural))
	}
	fmt.Fprintf(stdout, "%s hold %d secret(s):\n", strings.Join(holders, ", "), rep.Total())
	ids := make([]string, 0, len(rep.ByKey))
	for id := range rep.ByKey {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	for _, id := range ids {
		name := fmt.Sprintf("key %q", id)
		if id == "" {
			name = "in clear"
		}
		fmt.Fprintf(stdout, "  %s: %d\n", name, rep.ByKey[id])
	}
	if len(rep.Unreadable) > 0 {
		for _, u := range rep.Unreadable {
			fmt.Fprintf(stdout, "does not decrypt: %s\n", u)
		}
		return fmt.Errorf("%d secret(s) do not decrypt with [secrets].keys: what holds them is unusable until the key is configured or an admin sends the secret again", len(rep.Unreadable))
	}
	if others := len(keys.IDs()) - 1; others > 0 {
		fmt.Fprintf(stdout, "no secret needs a key other than %q: the other %d key(s) of [secrets].keys may be removed once every instance runs with this configuration\n", keys.Current(), others)
	}
	return nil
}
