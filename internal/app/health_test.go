package app_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/stretchr/testify/require"

	identitypb "github.com/rustbill/paymentd/gen/billing/identity"
	"github.com/rustbill/paymentd/gen/billing/identity/identitypbconnect"
	paymentpb "github.com/rustbill/paymentd/gen/billing/payment"
	"github.com/rustbill/paymentd/gen/billing/payment/paymentpbconnect"
	"github.com/rustbill/paymentd/internal/app"
	"github.com/rustbill/paymentd/internal/config"
	"github.com/rustbill/paymentd/internal/logging"
	"github.com/rustbill/paymentd/internal/testdb"
	"github.com/rustbill/paymentd/internal/testkit"
)

// blockingPayments holds GetPayment until released: a request that keeps
// the concurrency limit's only slot.
type blockingPayments struct {
	paymentpbconnect.PaymentServiceHandler
	entered chan<- struct{}
	release <-chan struct{}
}

func (b blockingPayments) GetPayment(ctx context.Context, req *connect.Request[paymentpb.GetPaymentRequest]) (*connect.Response[paymentpb.GetPaymentResponse], error) {
	b.entered <- struct{}{}
	<-b.release
	return b.PaymentServiceHandler.GetPayment(ctx, req)
}

// The production stack, as app.New builds it: /health passes Observe (it
// gets a request id and an access line) and nothing else. It answers while
// the concurrency limit's only slot is taken, credentials on it are never
// looked at, and it never acquires a database connection. /ready uses the
// database but, like /health, never waits for a slot and ignores
// credentials. Every check has a control on an API call, which passes every
// layer.
func TestHealthPassesOnlyObserveNoLimitNoCredentialLayerAndNoDatabase(t *testing.T) {
	t.Parallel()
	cfg := testConfig(testdb.URL(t))
	cfg.Plugins.Dir = pluginDir(t)
	cfg.Server.MaxConcurrency = 1
	cfg.RateLimit.Enabled = true
	cfg.Log = config.Log{Level: "debug", Format: "json"}
	logs := &testkit.Logs{}
	entered, release := make(chan struct{}, 1), make(chan struct{})
	a, err := app.New(context.Background(), cfg, logging.New(cfg.Log.Options(), logs),
		app.WithPaymentHandler(func(h paymentpbconnect.PaymentServiceHandler) paymentpbconnect.PaymentServiceHandler {
			return blockingPayments{PaymentServiceHandler: h, entered: entered, release: release}
		}))
	require.NoError(t, err)
	t.Cleanup(a.Close)
	// The handler tree alone, without Serve: no event worker, reconciler or
	// heartbeat uses the pool meanwhile, so every acquire is a request's.
	srv := httptest.NewServer(a.Server().Handler())
	t.Cleanup(srv.Close)
	client := &http.Client{Timeout: 5 * time.Second}
	t.Cleanup(client.CloseIdleConnections)
	acquires := func() int64 { return a.Pool().Stat().AcquireCount() }

	// A well-formed session token that names no session: a session layer
	// would look it up in the database before refusing it.
	session := base64.RawURLEncoding.EncodeToString(bytes.Repeat([]byte{0x5a}, 32))
	forged := func(r *http.Request) {
		r.Header.Set("Cookie", "paymentd_session="+session)
		r.Header.Set("Authorization", "Bearer forged.jwt.token")
		r.Header.Set("X-Api-Key", "pk_forged_key")
	}
	get := func(path string, c *http.Client) (int, string, string, error) {
		method, reqBody := http.MethodGet, io.Reader(nil)
		if path == paymentpbconnect.PaymentServiceGetPaymentProcedure {
			method, reqBody = http.MethodPost, strings.NewReader(`{"id": "7b0f1c3e-8a7d-4f51-9d1e-2a3b4c5d6e7f"}`)
		}
		req, err := http.NewRequest(method, srv.URL+path, reqBody)
		require.NoError(t, err)
		req.Header.Set("Content-Type", "application/json")
		forged(req)
		resp, err := c.Do(req)
		if err != nil {
			return 0, "", "", err
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body), resp.Header.Get("X-Request-Id"), nil
	}
	linesOf := func(requestID string) []map[string]any {
		var out []map[string]any
		for _, l := range logs.Lines(t) {
			if l["request_id"] == requestID {
				out = append(out, l)
			}
		}
		return out
	}

	// No database: /health with every kind of (forged) credential does not
	// acquire a connection; /ready with the same does (the ping).
	before := acquires()
	var healthIDs []string
	for range 20 {
		code, body, id, err := get("/health", client)
		require.NoError(t, err)
		require.Equal(t, http.StatusOK, code)
		require.Empty(t, body)
		healthIDs = append(healthIDs, id)
	}
	require.Equal(t, before, acquires(), "/health acquired a database connection")
	code, _, readyID, err := get("/ready", client)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, code)
	require.Greater(t, acquires(), before, "control: /ready uses the pool, so the count moves")
	code, _, apiID, err := get(paymentpbconnect.PaymentServiceGetPaymentProcedure, client)
	require.NoError(t, err)
	require.Equal(t, http.StatusUnauthorized, code, "control: the API call's forged credentials are refused")

	// Observe only: each /health has a request id and its access line, and
	// no credential layer saw its credentials, nor /ready's; the API call's
	// were rejected.
	for _, id := range healthIDs {
		require.Regexp(t, `^[0-9a-f]{32}$`, id, "Observe gives /health a request id")
		lines := linesOf(id)
		require.Len(t, lines, 1, "one line for /health %s: its access line, nothing from a later layer: %v", id, lines)
		require.Equal(t, "http", lines[0]["msg"])
		require.Equal(t, "/health", lines[0]["route"])
	}
	for _, l := range linesOf(readyID) {
		require.NotEqual(t, "credential rejected", l["msg"], "/ready's credentials were looked at: %v", l)
	}
	var rejected map[string]any
	for _, l := range linesOf(apiID) {
		if l["msg"] == "credential rejected" {
			rejected = l
		}
	}
	require.NotNil(t, rejected, "control: the credential layers reject the forged session on an API call")
	require.Equal(t, "session", rejected["kind"])
	require.NotContains(t, rejected["reason"], "malformed", "control: the session was looked up, not refused on sight")

	// No limit: a customer's GetPayment holds the only slot. /health and
	// /ready still answer at once; another API call waits in the queue
	// behind it.
	ids := identitypbconnect.NewIdentityServiceClient(client, srv.URL)
	reg, err := ids.Register(context.Background(), connect.NewRequest(&identitypb.RegisterRequest{
		Email: "dora@example.com", Password: "correct horse battery", Name: "Dora"}))
	require.NoError(t, err)
	payments := paymentpbconnect.NewPaymentServiceClient(client, srv.URL)
	held := make(chan error, 1)
	go func() {
		_, err := payments.GetPayment(context.Background(), with(&paymentpb.GetPaymentRequest{Id: "7b0f1c3e-8a7d-4f51-9d1e-2a3b4c5d6e7f"}, bearer(reg.Msg.GetAccessToken())))
		held <- err
	}()
	testkit.WaitOrTimeout(t, entered, "GetPayment to reach the handler")
	code, _, _, err = get("/health", &http.Client{Timeout: 2 * time.Second})
	require.NoError(t, err, "/health queued behind the concurrency limit")
	require.Equal(t, http.StatusOK, code)
	code, _, _, err = get("/ready", &http.Client{Timeout: 2 * time.Second})
	require.NoError(t, err, "/ready queued behind the concurrency limit")
	require.Equal(t, http.StatusOK, code)
	_, _, _, err = get(paymentpbconnect.PaymentServiceGetPaymentProcedure, &http.Client{Timeout: 300 * time.Millisecond})
	require.Error(t, err, "control: an API call waits for the slot GetPayment holds")
	close(release)
	require.Equal(t, connect.CodeNotFound, connect.CodeOf(<-held))
}
