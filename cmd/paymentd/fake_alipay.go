package main

import (
	"context"
	"crypto/rsa"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"

	"github.com/rustbill/paymentd/internal/fakes/alipay"
)

const fakeAlipayUsage = `Usage:
  paymentd dev fake-alipay [--addr 127.0.0.1:8092] [--public-url URL] [--key-dir DIR]

Serves a fake Alipay Open API gateway (gateway.do) and cashier page until Ctrl-C, for
demos, and prints the app (app_id, seller_id, app private key, Alipay public key) to
configure a gateway interface of plugin "alipay" with. The keys are generated at
start; with --key-dir they are read from (or, the first time, written to)
DIR/app_private_key.pem and DIR/alipay_private_key.pem, so the configuration survives
a restart. Pay a payment with the Pay button of the cashier its payment_url (or QR
code link) opens; the notification goes to the payment's notify_url.
`

// cmdFakeAlipay runs the fake Alipay gateway of internal/fakes/alipay for
// demos until ctx is cancelled, after printing the app to configure an
// alipay gateway interface with.
func cmdFakeAlipay(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("dev fake-alipay", fakeAlipayUsage, stderr)
	addr := fs.String("addr", "127.0.0.1:8092", "listen address")
	publicURL := fs.String("public-url", "", "base URL written into cashier links (default http://ADDR)")
	keyDir := fs.String("key-dir", "", "directory keeping the two private keys across runs (default: new keys each run)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 0 {
		return usageError{fmt.Errorf("dev fake-alipay takes no arguments, got %q", fs.Args())}
	}
	appKey, err := demoKey(*keyDir, "app_private_key.pem")
	if err != nil {
		return err
	}
	alipayKey, err := demoKey(*keyDir, "alipay_private_key.pem")
	if err != nil {
		return err
	}
	srv, err := alipay.New(alipay.Options{
		Addr:      *addr,
		PublicURL: strings.TrimRight(*publicURL, "/"),
		Apps:      []alipay.App{{AppID: alipay.DefaultAppID, SellerID: alipay.DefaultSellerID, PublicKey: &appKey.PublicKey}},
		Key:       alipayKey,
		Logger:    slog.New(slog.NewTextHandler(stderr, nil)),
	})
	if err != nil {
		return err
	}
	if err := srv.Start(); err != nil {
		return err
	}
	defer srv.Close()

	cfg := map[string]any{
		"gateway_url":       srv.GatewayURL(),
		"app_id":            alipay.DefaultAppID,
		"seller_id":         alipay.DefaultSellerID,
		"app_private_key":   alipay.PrivateKeyPEM(appKey),
		"alipay_public_key": srv.PublicKeyPEM(),
	}
	cfgJSON, _ := json.Marshal(cfg)
	fmt.Fprintf(stdout, `fake alipay gateway: %s (Ctrl-C to stop)
app for a gateway interface of plugin "alipay":
  gateway_url: %s
  app_id:      %s
  seller_id:   %s
app_private_key:
%s
alipay_public_key:
%s
  config:      %s
Add "qr_mode": true for alipay.trade.precreate (a QR code) instead of the cashier page.
Payments are paid with the "Pay" button of the cashier page their payment_url opens;
notifies go to the notify_url in the payment ([server].public_url + /callbacks/{id}).
`, srv.URL(), srv.GatewayURL(), alipay.DefaultAppID, alipay.DefaultSellerID,
		strings.TrimSpace(alipay.PrivateKeyPEM(appKey)), strings.TrimSpace(srv.PublicKeyPEM()), cfgJSON)
	untilStopped(ctx, "dev fake-alipay", stderr)
	return nil
}

// demoKey reads dir/name, or generates a key and (with a dir) writes it
// there for the next run.
func demoKey(dir, name string) (*rsa.PrivateKey, error) {
	if dir == "" {
		return alipay.GenerateKey()
	}
	path := filepath.Join(dir, name)
	b, err := os.ReadFile(path)
	if err == nil {
		return alipay.ParsePrivateKeyPEM(string(b))
	}
	if !errors.Is(err, fs.ErrNotExist) {
		return nil, err
	}
	k, err := alipay.GenerateKey()
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	if err := os.WriteFile(path, []byte(alipay.PrivateKeyPEM(k)), 0o600); err != nil {
		return nil, err
	}
	return k, nil
}
