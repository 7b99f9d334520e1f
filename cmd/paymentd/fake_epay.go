package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"

	"github.com/rustbill/paymentd/internal/fakes/epay"
)

const fakeEpayUsage = `Usage:
  paymentd dev fake-epay [--addr 127.0.0.1:8090] [--public-url URL] [--pid ID] [--key KEY]

Serves a fake epay v1 merchant API and cashier page until Ctrl-C, for demos and the
README's quick start, and prints the merchant account (api_url, pid, key) to
configure a gateway interface of plugin "epay" with. Pay a payment with the Pay
button of the page its payment_url opens; the notification goes to the payment's
notify_url.
`

// cmdFakeEpay runs the fake epay v1 gateway of internal/fakes/epay for demos
// until ctx is cancelled (Ctrl-C), after printing the merchant account to
// configure an epay gateway interface with.
func cmdFakeEpay(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("dev fake-epay", fakeEpayUsage, stderr)
	addr := fs.String("addr", "127.0.0.1:8090", "listen address")
	publicURL := fs.String("public-url", "", "base URL written into payment links (default http://ADDR)")
	pid := fs.String("pid", epay.DefaultPID, "merchant id")
	key := fs.String("key", epay.DefaultKey, "merchant key (MD5 signing)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 0 {
		return usageError{fmt.Errorf("dev fake-epay takes no arguments, got %q", fs.Args())}
	}
	if *pid == "" || *key == "" {
		return usageError{errors.New("dev fake-epay: --pid and --key must not be empty")}
	}
	srv := epay.New(epay.Options{
		Addr:      *addr,
		PublicURL: strings.TrimRight(*publicURL, "/"),
		Merchants: map[string]string{*pid: *key},
		Logger:    slog.New(slog.NewTextHandler(stderr, nil)),
	})
	if err := srv.Start(); err != nil {
		return err
	}
	defer srv.Close()

	apiURL := srv.URL() + "/"
	cfg, _ := json.Marshal(map[string]string{"api_url": apiURL, "pid": *pid, "key": *key})
	fmt.Fprintf(stdout, `fake epay gateway: %s (Ctrl-C to stop)
merchant account for a gateway interface of plugin "epay":
  api_url: %s
  pid:     %s
  key:     %s
  config:  %s
Payments are paid with the "Pay" button of the cashier page their payment_url opens;
notifies go to the notify_url in the payment ([server].public_url + /callbacks/{id}).
`, srv.URL(), apiURL, *pid, *key, cfg)
	untilStopped(ctx, "dev fake-epay", stderr)
	return nil
}
