package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"

	"github.com/rustbill/paymentd/internal/gateway"
	"github.com/rustbill/paymentd/internal/plugin"
)

const pluginUsage = `Usage:
  paymentd plugin check [--type gateway|notifier|provider] FILE

Does what the plugin scanner does with FILE, without a database: compiles it as the
type of its folder, checks the contract, reads version(), and dry-runs info and
config_schema (without HTTP). Prints the plugin's type, version, hash and secret
keys. Exit status 0 when it would load, 1 naming the line when it would not.
`

// cmdPlugin runs the plugin authors' tools: `plugin check FILE`.
func cmdPlugin(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) > 0 && (args[0] == "-h" || args[0] == "--help") {
		fmt.Fprint(stdout, pluginUsage)
		return nil
	}
	if len(args) == 0 || args[0] != "check" {
		return usageError{errors.New("plugin needs a sub-command: check FILE")}
	}
	fs := newFlags("plugin check", pluginUsage, stderr)
	folder := fs.String("type", "", "folder the script belongs in: gateway, notifier or provider (default: the file's folder)")
	if err := parseFlags(fs, args[1:]); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return usageError{errors.New("plugin check needs exactly one FILE")}
	}
	return checkPlugin(ctx, fs.Arg(0), *folder, stdout)
}

// checkPlugin does what the scanner does with a file, without a database:
// compile, check the contract of the folder's type, read the version, and
// dry-run info and config_schema. Its error names the line when there is
// one.
func checkPlugin(ctx context.Context, path, folder string, stdout io.Writer) error {
	if folder == "" {
		folder = filepath.Base(filepath.Dir(path))
	}
	if _, ok := gateway.FolderType(folder); !ok {
		return fmt.Errorf("plugin check: %s is in folder %q; put it under gateway/, notifier/ or provider/, or pass --type", path, folder)
	}
	name, ok := strings.CutSuffix(filepath.Base(path), ".lua")
	if !ok {
		return fmt.Errorf("plugin check: %s: a plugin file ends in .lua", path)
	}
	src, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("plugin check: %w", err)
	}
	// No HTTP: info and config_schema must not call out. print() and log()
	// go to stderr's bit bucket; the answer is what matters.
	rt := plugin.NewRuntime(plugin.Options{Logger: slog.New(slog.DiscardHandler)})
	in, err := gateway.Inspect(ctx, rt, name, folder, src)
	if err != nil {
		return fmt.Errorf("plugin check %s: %w", path, err)
	}
	defer in.Plugin.Close()

	fmt.Fprintf(stdout, "%s: ok\n", path)
	fmt.Fprintf(stdout, "  name:        %s\n", in.Name)
	fmt.Fprintf(stdout, "  type:        %s (%d functions: %s)\n", in.Type, len(plugin.Functions(in.Type)), strings.Join(plugin.Functions(in.Type), ", "))
	fmt.Fprintf(stdout, "  version:     %s\n", in.Script.Version())
	fmt.Fprintf(stdout, "  admin_page:  %t\n", in.Script.HasAdminPage())
	fmt.Fprintf(stdout, "  sha256:      %s\n", in.Script.SHA256())
	fmt.Fprintf(stdout, "  info:        %s\n", in.Info)
	secrets := in.Schema.Secrets()
	if len(secrets) == 0 {
		secrets = []string{"(none)"}
	}
	fmt.Fprintf(stdout, "  secret keys: %s\n", strings.Join(secrets, ", "))
	if in.Type == plugin.Gateway {
		currencies := "(none: its interfaces take no payment)"
		switch {
		case len(in.Currencies) == 1 && in.Currencies[0] == "*":
			currencies = "each interface names its own (config \"currencies\")"
		case len(in.Currencies) > 0:
			currencies = strings.Join(in.Currencies, ", ")
		}
		fmt.Fprintf(stdout, "  currencies:  %s\n", currencies)
	}
	return nil
}
