package deploy_test

import (
	"bufio"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"go.yaml.in/yaml/v3"

	"github.com/rustbill/paymentd/internal/app"
)

// promtoolPath builds the promtool pinned in tools/go.mod into the Go build
// cache (the first run does; later ones find it there) and returns its
// path: one staleness check of its 1,300 packages for both runs.
func promtoolPath(t *testing.T) string {
	t.Helper()
	cmd := exec.Command("go", "tool", "-n", "-modfile=../tools/go.mod", "promtool")
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	require.NoError(t, err, "go tool -n promtool: %s", stderr.String())
	return strings.TrimSpace(string(out))
}

// runPromtool runs promtool with args from deploy/.
func runPromtool(t *testing.T, promtool string, args ...string) {
	t.Helper()
	out, err := exec.Command(promtool, args...).CombinedOutput()
	require.NoError(t, err, "promtool %s:\n%s", strings.Join(args, " "), out)
}

// promtool checks the rules with the whole grammar, and the rule unit
// tests of deploy/prometheus/tests/ pass: each alert on any increase fires
// on the first event, however its series reached Prometheus (born with the
// event, counted before a restarted process's first scrape, at zero from
// the start), and stays quiet without one. Every alert of the file that
// reads increase() has a unit test expecting it to fire.
func TestAlertRulesPassPromtoolAndFireOnTheFirstEvent(t *testing.T) {
	t.Parallel()
	rules := filepath.Join("prometheus", "paymentd-alerts.yml")
	tests, err := filepath.Glob(filepath.Join("prometheus", "tests", "*.yml"))
	require.NoError(t, err)
	require.NotEmpty(t, tests)
	promtool := promtoolPath(t)
	runPromtool(t, promtool, "check", "rules", rules)
	runPromtool(t, promtool, append([]string{"test", "rules"}, tests...)...)

	fired := map[string]bool{}
	for _, path := range tests {
		raw, err := os.ReadFile(path)
		require.NoError(t, err)
		var file struct {
			Tests []struct {
				AlertRuleTest []struct {
					Alertname string           `yaml:"alertname"`
					ExpAlerts []map[string]any `yaml:"exp_alerts"`
				} `yaml:"alert_rule_test"`
			} `yaml:"tests"`
		}
		require.NoError(t, yaml.Unmarshal(raw, &file), path)
		for _, tc := range file.Tests {
			for _, a := range tc.AlertRuleTest {
				if len(a.ExpAlerts) > 0 {
					fired[a.Alertname] = true
				}
			}
		}
	}
	var file ruleFile
	require.NoError(t, yaml.Unmarshal([]byte(readRepoFile(t, "deploy/prometheus/paymentd-alerts.yml")), &file))
	var counting []string
	for _, g := range file.Groups {
		for _, r := range g.Rules {
			if strings.Contains(r.Expr, "increase(") {
				counting = append(counting, r.Alert)
				require.True(t, fired[r.Alert], "%s reads increase(): a test in deploy/prometheus/tests/ must show it firing", r.Alert)
			}
		}
	}
	require.Subset(t, counting, []string{"PaymentdHandlerPanicked", "PaymentdCallbackMismatch", "PaymentdRefundOutcomeUnknown", "PaymentdMoneyCaptured"})
}

// As soon as paymentd serves, before any event, /metrics has at zero every
// series of the counters those alerts watch that it can know: the panics
// of every route (each procedure of the policy among them), and the
// callbacks, refunds, captured money and payment transitions of every
// loaded gateway plugin (the shipped epay here), each outcome, status and
// [billing].currencies currency, of the balance and of unknown callbacks.
func TestAlertedCountersExistAtZeroBeforeTheFirstEvent(t *testing.T) {
	t.Parallel()
	s := startService(t, nil)
	srv := httptest.NewServer(s.app.Metrics().Handler(false))
	defer srv.Close()
	m := scrapeMetrics(t, srv.URL+"/metrics")

	zero := func(series string) {
		t.Helper()
		v, ok := m[series]
		require.True(t, ok, "%s is not on /metrics", series)
		require.Zero(t, v, series)
	}
	// The routes: each procedure of the policy and its service's path
	// (a panic in a layer in front of the handler), and the paths paymentd
	// mounts. No other.
	policy, err := app.Policy()
	require.NoError(t, err)
	require.NotEmpty(t, policy)
	routes := map[string]bool{}
	for _, route := range []string{"/callbacks/", "/export/payments.csv", "/export/refunds.csv", "/export/invoices.csv", "/ready", "/admin",
		"/grpc.reflection.v1.ServerReflection/", "/grpc.reflection.v1alpha.ServerReflection/", "other"} {
		routes[route] = true
	}
	for proc := range policy {
		routes[proc] = true
		routes[proc[:strings.LastIndexByte(proc, '/')+1]] = true
	}
	for route := range routes {
		zero(`paymentd_panics_total{route="` + route + `"}`)
	}
	for series := range m {
		if route, ok := strings.CutPrefix(series, `paymentd_panics_total{route="`); ok {
			require.True(t, routes[strings.TrimSuffix(route, `"}`)], "a panic series of a route paymentd does not serve: %s", series)
		}
	}
	for _, outcome := range []string{"accepted", "duplicate", "ignored", "bad_signature", "malformed", "mismatch", "not_found", "unavailable", "error"} {
		zero(`paymentd_callbacks_total{gateway="epay",outcome="` + outcome + `"}`)
		zero(`paymentd_callbacks_total{gateway="unknown",outcome="` + outcome + `"}`)
	}
	for _, gateway := range []string{"epay", "balance"} {
		for _, outcome := range []string{"succeeded", "failed", "accepted", "unknown"} {
			zero(`paymentd_refunds_total{gateway="` + gateway + `",outcome="` + outcome + `"}`)
		}
		for _, status := range []string{"pending", "success", "failed", "refunded"} {
			zero(`paymentd_payment_transitions_total{gateway="` + gateway + `",status="` + status + `"}`)
		}
	}
	for _, currency := range []string{"CNY", "USD"} {
		zero(`paymentd_payment_captured_cents_total{currency="` + currency + `",gateway="epay"}`)
	}
}

// scrapeMetrics reads a /metrics answer into its samples by series
// (`family{label="v",…}` as written).
func scrapeMetrics(t *testing.T, url string) map[string]float64 {
	t.Helper()
	resp, err := http.Get(url)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	out := map[string]float64{}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		v, err := strconv.ParseFloat(line[i+1:], 64)
		require.NoError(t, err, line)
		out[line[:i]] = v
	}
	require.NoError(t, sc.Err())
	return out
}
