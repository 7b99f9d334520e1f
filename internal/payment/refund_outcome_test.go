package payment_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/rustbill/paymentd/internal/apperr"
	"github.com/rustbill/paymentd/internal/plugin"
)

// An unknown refund outcome's error keeps why it is unknown for the log:
// the plugin's call error when the call broke off, and nothing after the
// outcome itself when the plugin answered "unknown".
func TestAnUnknownRefundOutcomeKeepsItsCause(t *testing.T) {
	t.Parallel()
	f := setupFlow(t)
	p := f.paidAtTheGateway(t, "30.00")
	gw, err := f.gws.Get(context.Background(), f.epayGW)
	require.NoError(t, err)

	gw.Plugin = callerFunc(func(string) (string, error) {
		return "", &plugin.CallError{Plugin: "epay", Function: "refund", Kind: plugin.KindTimeout, Message: "deadline exceeded"}
	})
	f.gws.set(gw)
	_, err = f.svc.RefundPayment(f.admin, p.ID, "10.00", "", "")
	require.True(t, apperr.Is(err, apperr.Internal), "%v", err)
	var ce *plugin.CallError
	require.True(t, errors.As(err, &ce), "the call error is in the chain: %v", err)
	require.Equal(t, plugin.KindTimeout, ce.Kind)

	gw.Plugin = callerFunc(func(string) (string, error) {
		return `{"status":"unknown","gateway_refund_id":"","message":"check the console"}`, nil
	})
	f.gws.set(gw)
	_, err = f.svc.RefundPayment(f.admin, p.ID, "10.00", "", "")
	require.True(t, apperr.Is(err, apperr.Internal), "%v", err)
	require.Contains(t, err.Error(), "the outcome is unknown")
	require.True(t, strings.HasSuffix(err.Error(), ": refund outcome unknown"), "no cause to add: %v", err)
}

// lockedBuffer is a log destination the service may write from any goroutine.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// records are the JSON log records with msg.
func (b *lockedBuffer) records(t *testing.T, msg string) []map[string]any {
	t.Helper()
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []map[string]any
	for line := range strings.SplitSeq(strings.TrimSpace(b.buf.String()), "\n") {
		var r map[string]any
		require.NoError(t, json.Unmarshal([]byte(line), &r), line)
		if r["msg"] == msg {
			out = append(out, r)
		}
	}
	return out
}

// A refund whose outcome is unknown may have paid money out with nothing
// recorded: its "refund finished" line is a warning, a completed one is
// information.
func TestAnUnknownRefundOutcomeIsLoggedAsAWarning(t *testing.T) {
	t.Parallel()
	f := setupFlow(t)
	logs := &lockedBuffer{}
	svc := f.loggedService(logs)
	p := f.paidAtTheGateway(t, "30.00")

	_, err := svc.RefundPayment(f.admin, p.ID, "10.00", "", "")
	require.NoError(t, err)
	gw, err := f.gws.Get(context.Background(), f.epayGW)
	require.NoError(t, err)
	gw.Plugin = callerFunc(func(string) (string, error) {
		return `{"status":"unknown","gateway_refund_id":"","message":"check the console"}`, nil
	})
	f.gws.set(gw)
	_, err = svc.RefundPayment(f.admin, p.ID, "10.00", "", "")
	require.True(t, apperr.Is(err, apperr.Internal), "%v", err)

	levels := map[string]string{}
	for _, r := range logs.records(t, "refund finished") {
		levels[r["outcome"].(string)] = r["level"].(string)
	}
	require.Equal(t, map[string]string{"succeeded": "INFO", "unknown": "WARN"}, levels)
}
