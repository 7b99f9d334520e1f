package observe

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/rustbill/paymentd/internal/logging"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestIDKeyNamesTheResourceOfTheMethod(t *testing.T) {
	t.Parallel()
	for proc, want := range map[string]string{
		"/billing.payment.PaymentService/GetPayment":                  "payment_id",
		"/billing.order.OrderService/CancelOrder":                     "order_id",
		"/billing.gateway.GatewayAdminService/EnableGatewayInterface": "gateway_interface_id",
		"/billing.identity.IdentityService/RevokeApiKey":              "api_key_id",
		"/billing.event.EventAdminService/RetryEvent":                 "event_id",
		"/x.S/Get": "",
	} {
		require.Equal(t, want, idKey(proc), proc)
	}
}

func TestRoutesAreAFixedSet(t *testing.T) {
	t.Parallel()
	o := New(Options{AdminPath: "/admin"})
	for path, want := range map[string]string{
		"/callbacks/7b0f1c3e-8a7d-4f51-9d1e-2a3b4c5d6e7f": "/callbacks/{gateway_interface_id}",
		"/health": "/health", "/ready": "/ready", "/admin": "/admin", "/admin/assets/x.js": "/admin",
		"/export/payments.csv": "/export/payments.csv", "/export/refunds.csv": "/export/refunds.csv", "/export/invoices.csv": "/export/invoices.csv", "/export/x.csv": "other",
		"/billing.payment.PaymentService/GetPayment": "rpc", "/anything/else": "other", "/administrator": "other",
		"/grpc.reflection.v1.ServerReflection/ServerReflectionInfo": "reflection",
		"/" + strings.Repeat("a", 100):                              "other",
	} {
		require.Equal(t, want, o.route(path), path)
	}
}

func TestMiddlewareEchoesTheRequestIDAndWritesOneAccessLine(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	o := New(Options{Logger: slog.New(logging.WithContext(slog.NewJSONHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug})))})
	var seen string
	h := o.Middleware(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen = logging.RequestID(r.Context())
		w.WriteHeader(http.StatusTeapot)
		_, _ = w.Write([]byte("short and stout"))
	}))

	req := httptest.NewRequest(http.MethodGet, "/callbacks/x?sign=secret&money=1.00", nil)
	req.Header.Set(RequestIDHeader, "abc-123")
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	require.Equal(t, "abc-123", rec.Header().Get(RequestIDHeader))
	require.Equal(t, "abc-123", seen)
	var line map[string]any
	require.NoError(t, json.Unmarshal(buf.Bytes(), &line), buf.String())
	require.Equal(t, "http", line["msg"])
	require.Equal(t, "abc-123", line["request_id"])
	require.Equal(t, 418.0, line["status"])
	require.Equal(t, 15.0, line["bytes"])
	require.Equal(t, "/callbacks/x", line["path"])
	require.NotContains(t, buf.String(), "secret", "no query string in the access line")
	require.Equal(t, 1, strings.Count(buf.String(), "\n"))

	buf.Reset()
	req = httptest.NewRequest(http.MethodGet, "/ready", nil)
	req.Header.Set(RequestIDHeader, "bad id\t")
	rec = httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	require.Regexp(t, `^[0-9a-f]{32}$`, rec.Header().Get(RequestIDHeader))
}
