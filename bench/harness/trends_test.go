package harness

import (
	"context"
	"encoding/json"
	"log/slog"
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rustbill/paymentd/internal/app"
	"github.com/rustbill/paymentd/internal/config"
	"github.com/rustbill/paymentd/internal/testdb"
)

// The trends' timing is taken the way the run takes it: as the admin, over
// the wire, against a paymentd on a seeded database. Each range answers
// every one of its days and counts the seeded payments (the calls read the
// table); the report carries the figures in its JSON and one line of its
// Markdown beside the other one-shot figures. A wrong password gets no
// figure at all.
func TestTrendsAreTimedAsTheAdminOverTheWireAndReported(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	const password = "bench-admin-password"
	cfg := config.Default()
	cfg.DB.URL = testdb.URL(t)
	cfg.JWT.Secret = "bench-secret-bench-secret-bench-secret!"
	cfg.Secrets = config.Secrets{Current: "bench", Keys: map[string]string{"bench": "YmVuY2gtc2VjcmV0cy1rZXktMzItYnl0ZXMtbG9uZyE="}}
	cfg.Bootstrap.AdminPassword = password
	cfg.Plugins.Dir = "../../plugins"
	cfg.Server.ShutdownTimeout = 5 * time.Second
	require.NoError(t, cfg.Validate())
	a, err := app.New(ctx, cfg, slog.New(slog.DiscardHandler))
	require.NoError(t, err)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	serveCtx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Serve(serveCtx, ln) }()
	t.Cleanup(func() {
		stop()
		require.NoError(t, <-done)
		a.Close()
	})
	baseURL := "http://" + ln.Addr().String()

	w, err := SeedWorld(ctx, a.Pool(), "http://epay.invalid", "http://provider.invalid", cfg.JWT.Secret, 3)
	require.NoError(t, err)
	const seeded = 40
	_, err = w.SeedPendingPayments(ctx, a.Pool(), seeded)
	require.NoError(t, err)

	ts, err := TimeTrends(ctx, a.Pool(), baseURL, "admin", password)
	require.NoError(t, err)
	require.Len(t, ts, 2)
	for i, days := range []int{90, 7} {
		got := ts[i]
		require.Equal(t, days, got.Days)
		require.EqualValues(t, seeded, got.Payments)
		require.EqualValues(t, seeded, got.Created, "%d days count the payments seeded today", days)
		require.Len(t, got.CallsMs, trendsCalls)
		require.Positive(t, got.MedianMs)
		require.Contains(t, got.CallsMs, got.MedianMs, "the median of an odd number of calls is one of them")
	}

	r := &Report{Trends: ts}
	md := r.Markdown()
	require.Contains(t, md, "GetPaymentTrends as an admin over the wire, median of 3 calls, on 40 payments: 90 days ")
	require.Contains(t, md, "; 40 payments in the range), 7 days ")
	js, err := json.Marshal(r)
	require.NoError(t, err)
	var back struct {
		Trends []TrendsTiming `json:"trends_timing"`
	}
	require.NoError(t, json.Unmarshal(js, &back))
	require.Equal(t, ts, back.Trends)
	require.NotContains(t, (&Report{}).Markdown(), "GetPaymentTrends", "a run that did not time them says nothing")

	_, err = TimeTrends(ctx, a.Pool(), baseURL, "admin", "not-the-password")
	require.ErrorContains(t, err, "admin login")
}
