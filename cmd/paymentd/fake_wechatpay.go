package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"strings"

	"github.com/rustbill/paymentd/internal/fakes/wechatpay"
)

const fakeWechatpayUsage = `Usage:
  paymentd dev fake-wechatpay [--addr 127.0.0.1:8093] [--public-url URL] [--key-dir DIR]

Serves a fake WeChat Pay API v3 (orders, query, close, refunds, encrypted notifications)
and an H5 payment page until Ctrl-C, for demos, and prints the merchant (mchid, appid,
merchant key and serial, APIv3 key, WeChat Pay public key and its ID) to configure a
gateway interface of plugin "wechatpay" with. The keys are generated at start; with
--key-dir they are read from (or, the first time, written to)
DIR/merchant_private_key.pem and DIR/wechatpay_private_key.pem. Pay an H5 payment with
the Pay button of the page its payment_url opens (a Native payment's code_url is
weixin://… and opens nowhere: use mode "h5" for demos); the notification goes to the
payment's notify_url.
`

// cmdFakeWechatpay runs the fake WeChat Pay of internal/fakes/wechatpay for
// demos until ctx is cancelled, after printing the merchant to configure a
// wechatpay gateway interface with.
func cmdFakeWechatpay(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("dev fake-wechatpay", fakeWechatpayUsage, stderr)
	addr := fs.String("addr", "127.0.0.1:8093", "listen address")
	publicURL := fs.String("public-url", "", "base URL written into h5_url links (default http://ADDR)")
	keyDir := fs.String("key-dir", "", "directory keeping the two private keys across runs (default: new keys each run)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 0 {
		return usageError{fmt.Errorf("dev fake-wechatpay takes no arguments, got %q", fs.Args())}
	}
	merchantKey, err := demoKey(*keyDir, "merchant_private_key.pem")
	if err != nil {
		return err
	}
	wxKey, err := demoKey(*keyDir, "wechatpay_private_key.pem")
	if err != nil {
		return err
	}
	srv, err := wechatpay.New(wechatpay.Options{
		Addr:      *addr,
		PublicURL: strings.TrimRight(*publicURL, "/"),
		Merchants: []wechatpay.Merchant{{MchID: wechatpay.DefaultMchID, AppID: wechatpay.DefaultAppID, SerialNo: wechatpay.DefaultSerialNo,
			PublicKey: &merchantKey.PublicKey, APIv3Key: wechatpay.DefaultAPIv3Key}},
		Key:    wxKey,
		Logger: slog.New(slog.NewTextHandler(stderr, nil)),
	})
	if err != nil {
		return err
	}
	if err := srv.Start(); err != nil {
		return err
	}
	defer srv.Close()

	cfg := map[string]any{
		"api_base":             srv.URL(),
		"mchid":                wechatpay.DefaultMchID,
		"appid":                wechatpay.DefaultAppID,
		"merchant_serial_no":   wechatpay.DefaultSerialNo,
		"merchant_private_key": wechatpay.PrivateKeyPEM(merchantKey),
		"api_v3_key":           wechatpay.DefaultAPIv3Key,
		"wechatpay_public_key": srv.PublicKeyPEM(),
		"wechatpay_serial":     srv.KeySerial(),
		"mode":                 "h5",
	}
	cfgJSON, _ := json.Marshal(cfg)
	fmt.Fprintf(stdout, `fake wechatpay: %s (Ctrl-C to stop)
merchant for a gateway interface of plugin "wechatpay":
  api_base:           %s
  mchid:              %s
  appid:              %s
  merchant_serial_no: %s
  api_v3_key:         %s
  wechatpay_serial:   %s
merchant_private_key:
%s
wechatpay_public_key:
%s
  config:             %s
"mode": "native" answers a weixin:// code_url (a QR code) instead of the H5 page.
Payments are paid with the "Pay" button of the page their payment_url opens;
notifications go to the notify_url in the payment ([server].public_url + /callbacks/{id}).
`, srv.URL(), srv.URL(), wechatpay.DefaultMchID, wechatpay.DefaultAppID, wechatpay.DefaultSerialNo, wechatpay.DefaultAPIv3Key,
		srv.KeySerial(), strings.TrimSpace(wechatpay.PrivateKeyPEM(merchantKey)), strings.TrimSpace(srv.PublicKeyPEM()), cfgJSON)
	untilStopped(ctx, "dev fake-wechatpay", stderr)
	return nil
}
