package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"

	"github.com/rustbill/paymentd/internal/fakes/provider"
)

const fakeProviderUsage = `Usage:
  paymentd dev fake-provider [--addr 127.0.0.1:8091] [--token TOKEN] [--provision-delay 0s]

Serves a fake instance-provider API (the counterpart of plugins/provider/http_provider.lua)
until Ctrl-C, for demos, and prints the settings (api_url, token) to put in the
providerConfig of a product whose providerPlugin is "http_provider". A paid order of
such a product is provisioned there: a new instance, "running" after --provision-delay,
and the order goes active. Instances live in memory and are gone when it stops.
`

// cmdFakeProvider runs the fake provider API of internal/fakes/provider for
// demos until ctx is cancelled (Ctrl-C), after printing the settings to
// configure an http_provider product with.
func cmdFakeProvider(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("dev fake-provider", fakeProviderUsage, stderr)
	addr := fs.String("addr", "127.0.0.1:8091", "listen address")
	token := fs.String("token", provider.DefaultToken, "bearer token the API accepts")
	delay := fs.Duration("provision-delay", 0, "how long a new instance stays provisioning before it runs")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 0 {
		return usageError{fmt.Errorf("dev fake-provider takes no arguments, got %q", fs.Args())}
	}
	if *token == "" {
		return usageError{errors.New("dev fake-provider: --token must not be empty")}
	}
	if *delay < 0 {
		return usageError{errors.New("dev fake-provider: --provision-delay must not be negative")}
	}
	srv := provider.New(provider.Options{
		Addr:           *addr,
		Token:          *token,
		ProvisionDelay: *delay,
		Logger:         slog.New(slog.NewTextHandler(stderr, nil)),
	})
	if err := srv.Start(); err != nil {
		return err
	}
	defer srv.Close()

	cfg, _ := json.Marshal(map[string]string{"api_url": srv.URL(), "token": *token, "plan": "vps-1g"})
	fmt.Fprintf(stdout, `fake provider API: %s (Ctrl-C to stop)
settings for a product of provider plugin "http_provider":
  api_url: %s
  token:   %s
  providerConfig: %s
A paid order of that product is provisioned here (POST /v1/instances) and goes active;
its instance runs after %s. Instances live in memory until this stops.
`, srv.URL(), srv.URL(), *token, cfg, delay.String())
	untilStopped(ctx, "dev fake-provider", stderr)
	return nil
}
