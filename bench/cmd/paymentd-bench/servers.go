package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"os"
	"time"

	"connectrpc.com/connect"

	"github.com/rustbill/paymentd/bench/harness"
	paymentpb "github.com/rustbill/paymentd/gen/billing/payment"
	"github.com/rustbill/paymentd/gen/billing/payment/paymentpbconnect"
	"github.com/rustbill/paymentd/internal/app"
	"github.com/rustbill/paymentd/internal/config"
	"github.com/rustbill/paymentd/internal/fakes/epay"
	"github.com/rustbill/paymentd/internal/fakes/provider"
	"github.com/rustbill/paymentd/internal/logging"
)

// cmdFakes runs the fake epay gateway and the fake provider until SIGTERM,
// after printing their URLs as one JSON line: the harness runs them in a
// process of their own so their CPU is not counted as the load
// generator's.
func cmdFakes(ctx context.Context, args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("fakes", flag.ContinueOnError)
	pid := fs.String("pid", epay.DefaultPID, "epay merchant id")
	key := fs.String("key", epay.DefaultKey, "epay merchant key")
	token := fs.String("token", provider.DefaultToken, "provider API token")
	if err := fs.Parse(args); err != nil {
		return err
	}
	f, err := harness.StartFakesAs(*pid, *key, *token)
	if err != nil {
		return err
	}
	defer f.Close()
	line, _ := json.Marshal(map[string]string{"epay": f.EpayURL, "provider": f.ProviderURL})
	fmt.Fprintln(stdout, string(line))
	<-ctx.Done()
	return nil
}

// serviceConfig loads the configuration the way `paymentd serve` does:
// ./paymentd.toml when present, then PAYMENTD_* variables.
func serviceConfig() (config.Config, error) {
	cfg, err := config.Load(config.ResolvePath(""), os.Environ())
	if err != nil {
		return cfg, err
	}
	return cfg, cfg.Validate()
}

// cmdServe is `paymentd serve` with a pprof listener on --pprof-addr: the
// harness runs it instead of the paymentd binary with --profile. The
// service is the same internal/app; only the profiling endpoint is added.
func cmdServe(ctx context.Context, args []string, stderr io.Writer) error {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	addr := fs.String("pprof-addr", "127.0.0.1:6060", "address of the net/http/pprof listener")
	if err := fs.Parse(args); err != nil {
		return err
	}
	cfg, err := serviceConfig()
	if err != nil {
		return err
	}
	log := logging.New(cfg.Log.Options(), stderr)
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		return err
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	defer srv.Close()
	return runApp(ctx, cfg, log)
}

// cmdEmptyServer serves the full paymentd stack (listener, middleware,
// credential layers, interceptors, Connect) with a GetPayment that answers
// a fixed record without touching the database: the transport's ceiling.
func cmdEmptyServer(ctx context.Context, _ []string, stderr io.Writer) error {
	cfg, err := serviceConfig()
	if err != nil {
		return err
	}
	return runApp(ctx, cfg, logging.New(cfg.Log.Options(), stderr), app.WithPaymentHandler(
		func(h paymentpbconnect.PaymentServiceHandler) paymentpbconnect.PaymentServiceHandler {
			return emptyPayments{h}
		}))
}

func runApp(ctx context.Context, cfg config.Config, log *slog.Logger, opts ...app.Option) error {
	a, err := app.New(ctx, cfg, log, opts...)
	if err != nil {
		return err
	}
	defer a.Close()
	if err := a.Run(ctx); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// emptyPayments answers GetPayment with a record shaped like a real one
// (the same encoding work), from memory.
type emptyPayments struct {
	paymentpbconnect.PaymentServiceHandler
}

var emptyRecord = &paymentpb.GetPaymentResponse{Payment: &paymentpb.PaymentRecord{
	Id: "20000000-0000-4000-8000-000000000001", OrderId: "10000000-0000-4000-8000-000000000001",
	Amount: "12.30", Currency: "CNY", GatewayInterfaceId: "7b0f1c3e-8a7d-4f51-9d1e-2a3b4c5d6e7f",
	Status: "pending", CreatedAt: "2026-01-01T00:00:00Z", UpdatedAt: "2026-01-01T00:00:00Z", RefundedAmount: "0.00",
}}

func (emptyPayments) GetPayment(context.Context, *connect.Request[paymentpb.GetPaymentRequest]) (*connect.Response[paymentpb.GetPaymentResponse], error) {
	return connect.NewResponse(emptyRecord), nil
}
