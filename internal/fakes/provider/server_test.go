package provider_test

import (
	"bytes"
	"encoding/json"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rustbill/paymentd/internal/fakes/provider"
)

type bundle struct {
	api    *provider.Server
	client *http.Client
}

func setup(t *testing.T, opts provider.Options) *bundle {
	t.Helper()
	s := provider.New(opts)
	require.NoError(t, s.Start())
	c := &http.Client{Transport: &http.Transport{}}
	t.Cleanup(func() {
		s.Close()
		c.CloseIdleConnections()
	})
	return &bundle{api: s, client: c}
}

// call sends a request with the right token (or tok when given) and decodes
// the JSON answer.
func (b *bundle) call(t *testing.T, method, path string, body any, tok ...string) (int, map[string]any) {
	t.Helper()
	var buf bytes.Buffer
	if body != nil {
		require.NoError(t, json.NewEncoder(&buf).Encode(body))
	}
	req, err := http.NewRequest(method, b.api.URL()+path, &buf)
	require.NoError(t, err)
	token := b.api.Token()
	if len(tok) > 0 {
		token = tok[0]
	}
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := b.client.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	var out map[string]any
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&out))
	return resp.StatusCode, out
}

func order(id string) map[string]string {
	return map[string]string{"order_id": id, "plan": "vps-1g", "customer_id": "c-1"}
}

func TestProvisionIsIdempotentOnOrderID(t *testing.T) {
	t.Parallel()
	b := setup(t, provider.Options{})
	status, first := b.call(t, http.MethodPost, "/v1/instances", order("o-1"))
	require.Equal(t, http.StatusCreated, status)
	require.Equal(t, provider.StatusRunning, first["status"])

	status, again := b.call(t, http.MethodPost, "/v1/instances", order("o-1"))
	require.Equal(t, http.StatusOK, status)
	require.Equal(t, first["id"], again["id"])

	require.Equal(t, 2, b.api.ProvisionRequests("o-1"))
	require.Equal(t, 1, b.api.InstancesFor("o-1"))
	require.Len(t, b.api.Instances(), 1)
}

func TestCallsWithoutTheBearerTokenAreRefused(t *testing.T) {
	t.Parallel()
	b := setup(t, provider.Options{})
	status, body := b.call(t, http.MethodPost, "/v1/instances", order("o-2"), "wrong")
	require.Equal(t, http.StatusUnauthorized, status)
	require.NotNil(t, body["error"])
	require.Zero(t, b.api.ProvisionRequests("o-2"))
	require.Equal(t, 1, b.api.UnauthorizedCalls())
}

func TestActionsFollowTheStateMachine(t *testing.T) {
	t.Parallel()
	b := setup(t, provider.Options{})
	_, in := b.call(t, http.MethodPost, "/v1/instances", order("o-3"))
	id := in["id"].(string)
	step := func(action string, wantCode int, wantStatus string) {
		t.Helper()
		code, body := b.call(t, http.MethodPost, "/v1/instances/"+id+"/"+action, nil)
		require.Equal(t, wantCode, code, action)
		if wantStatus != "" {
			require.Equal(t, wantStatus, body["status"], action)
		}
	}
	step("stop", http.StatusOK, provider.StatusStopped)
	step("stop", http.StatusOK, provider.StatusStopped) // repeat: no change
	step("reboot", http.StatusConflict, "")
	step("start", http.StatusOK, provider.StatusRunning)
	step("reboot", http.StatusOK, provider.StatusRunning)
	step("suspend", http.StatusOK, provider.StatusSuspended)
	step("start", http.StatusConflict, "")
	step("unsuspend", http.StatusOK, provider.StatusRunning)
	step("terminate", http.StatusOK, provider.StatusTerminated)
	step("terminate", http.StatusOK, provider.StatusTerminated)
	step("start", http.StatusConflict, "")
	step("explode", http.StatusNotFound, "")
	require.Equal(t, 2, b.api.ActionCalls(id, "stop"))

	code, got := b.call(t, http.MethodGet, "/v1/instances/"+id, nil)
	require.Equal(t, http.StatusOK, code)
	require.Equal(t, provider.StatusTerminated, got["status"])
	code, _ = b.call(t, http.MethodGet, "/v1/instances/nope", nil)
	require.Equal(t, http.StatusNotFound, code)
}

func TestNewInstancesProvisionForTheConfiguredDelay(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	var offset atomic.Int64
	b := setup(t, provider.Options{ProvisionDelay: time.Minute, Now: func() time.Time {
		return now.Add(time.Duration(offset.Load()))
	}})
	_, in := b.call(t, http.MethodPost, "/v1/instances", order("o-4"))
	require.Equal(t, provider.StatusProvisioning, in["status"])
	offset.Store(int64(time.Minute))
	_, got := b.call(t, http.MethodGet, "/v1/instances/"+in["id"].(string), nil)
	require.Equal(t, provider.StatusRunning, got["status"])
}

func TestUsageReportsDecimalStrings(t *testing.T) {
	t.Parallel()
	b := setup(t, provider.Options{})
	_, in := b.call(t, http.MethodPost, "/v1/instances", order("o-5"))
	id := in["id"].(string)
	require.True(t, b.api.SetUsage(id, []provider.UsageItem{{Metric: "cpu_hours", Quantity: "12.50", Unit: "h"}}))
	code, body := b.call(t, http.MethodGet, "/v1/instances/"+id+"/usage?from=2026-01-01T00:00:00Z&to=2026-02-01T00:00:00Z", nil)
	require.Equal(t, http.StatusOK, code)
	items := body["items"].([]any)
	require.Len(t, items, 1)
	require.Equal(t, "12.50", items[0].(map[string]any)["quantity"])
	require.Equal(t, "2026-01-01T00:00:00Z", body["from"])
}

func TestFailuresCanBeInjected(t *testing.T) {
	t.Parallel()
	b := setup(t, provider.Options{})
	b.api.FailProvision("o-6", 0, "no capacity in region")
	code, body := b.call(t, http.MethodPost, "/v1/instances", order("o-6"))
	require.Equal(t, http.StatusUnprocessableEntity, code)
	require.Equal(t, "no capacity in region", body["error"].(map[string]any)["message"])
	require.Zero(t, b.api.InstancesFor("o-6"))
	b.api.ClearProvisionFailure("o-6")
	code, _ = b.call(t, http.MethodPost, "/v1/instances", order("o-6"))
	require.Equal(t, http.StatusCreated, code)

	b.api.InjectFault(provider.Fault{Method: http.MethodGet, Prefix: "/v1/instances/", Status: http.StatusInternalServerError, Times: 1})
	code, _ = b.call(t, http.MethodGet, "/v1/instances/inst-0001", nil)
	require.Equal(t, http.StatusInternalServerError, code)
	code, _ = b.call(t, http.MethodGet, "/v1/instances/inst-0001", nil)
	require.Equal(t, http.StatusOK, code)

	b.api.InjectFault(provider.Fault{Prefix: "/v1/ping", Delay: 30 * time.Millisecond})
	start := time.Now()
	code, _ = b.call(t, http.MethodGet, "/v1/ping", nil)
	require.Equal(t, http.StatusOK, code)
	require.GreaterOrEqual(t, time.Since(start), 30*time.Millisecond)
}
