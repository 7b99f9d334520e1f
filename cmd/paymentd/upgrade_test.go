package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"

	identitypb "github.com/rustbill/paymentd/gen/billing/identity"
	paymentpb "github.com/rustbill/paymentd/gen/billing/payment"
	"github.com/rustbill/paymentd/internal/clustertest"
	"github.com/rustbill/paymentd/internal/fakes/epay"
	"github.com/rustbill/paymentd/internal/notify/notifytest"
	"github.com/rustbill/paymentd/internal/payment"
	"github.com/rustbill/paymentd/internal/testdb"
	"github.com/rustbill/paymentd/internal/testkit"
)

// An operator's upgrade from the release. The release's binary makes an
// empty database and fills it through its API with every kind of row it
// knows (fill), lets its background work come to rest, reads every row
// back over the API and stops on SIGTERM. This code then starts on that
// database and must serve it:
//
//   - every row reads back as the release answered, whole answers compared
//     (compareReadbacks), before this code writes anything and again after
//     its billing pass as of the release's last billing moment, which must
//     find nothing left to do;
//   - the release's credentials work: passwords, customer access tokens
//     and API keys, admin sessions and API keys within their scopes, TOTP
//     codes and recovery codes; its idempotency keys answer its outcomes;
//   - new work goes on on its rows: its pending payment settles, a new
//     customer pays, its payments are refunded, its pending refund is
//     resolved, a billing pass renews its recurring orders;
//   - nothing is logged at ERROR, and `paymentd verify` is clean.
//
// A start refused by the schema check fails the test, as any other: from
// the first release on, an upgrade from the release is served (issue 30
// was a start that served and failed later; issue 36 made serving the
// release's database the rule).
func TestUpgradeFromTheReleaseKeepsEveryRow(t *testing.T) {
	t.Parallel()
	began := time.Now()
	step := func(what string) { t.Logf("%s (%s so far)", what, time.Since(began).Round(100*time.Millisecond)) }
	from, err := clustertest.UpgradeFrom()
	require.NoError(t, err)
	release, err := clustertest.BuildCommit(t.Context(), from)
	require.NoError(t, err, "building the release named in %s", clustertest.UpgradeFromFile)
	oldBin := release.Binary
	step("built the release " + from[:12])

	fake := epay.New(epay.Options{})
	require.NoError(t, fake.Start())
	t.Cleanup(fake.Close)
	hook := notifytest.StartWebhook(t, "upgrade-webhook-secret-0001")
	dbURL := testdb.EmptyURL(t)
	port := testkit.FreePort(t)
	conf := upgradeConfig(t, hook, testkit.FreePort(t))
	providerDown := fmt.Sprintf("http://127.0.0.1:%d/api", testkit.FreePort(t))

	// The release makes the database, fills it and reads it back.
	rel := startPaymentd(t, "release", oldBin, upgradeEnv(dbURL, port, release.Plugins), "--config", conf)
	require.True(t, rel.waitReady(t), "the release did not start:\n%s", rel.logTail())
	api := newUpgradeAPI(rel.baseURL)
	made := api.fill(t, fake, providerDown)
	step("the release filled the database")
	api.settled(t, made.admin)
	was := api.read(t, made, readbackOpts{overview: true})
	opts := was.ids()
	rel.stop(t)
	step(fmt.Sprintf("the release read back %d answers and stopped", len(was.answers)))

	// This code on the release's database.
	self, err := os.Executable()
	require.NoError(t, err)
	env := append(upgradeEnv(dbURL, port, repoPlugins(t)), runMainEnv+"=1")
	cur := startPaymentd(t, "current", self, env, "--config", conf)
	if !cur.waitReady(t) {
		t.Fatalf("this build does not serve the release's database (exit %d): %s\n%s",
			cur.exitCode(), lastLine(cur.output()), cur.logTail())
	}
	step("this build serves the release's database")
	compareReadbacks(t, was.without("GetRenewalOverview"), api.read(t, made, opts))
	step("every answer reads back as the release gave it")

	// Its billing clock catches up with the release's (it starts at the
	// wall clock): a pass as of the same moment, give or take the seconds
	// the upgrade took, has nothing left to do.
	ahead := made.clock.ahead
	made.clock = billingClock{}
	pass := api.advanceBy(t, made.admin, &made.clock, ahead)
	require.True(t, pass.GetIssued()+pass.GetAutoPaid()+pass.GetOverdue()+pass.GetSuspended()+pass.GetTerminated()+pass.GetEnded() == 0,
		"a billing pass as of the release's last one found work left: %v", pass)
	opts.overview = true
	compareReadbacks(t, was, api.read(t, made, opts))
	step("a billing pass as of the release's clock changed nothing")
	checkRecurringRevenue(t, api, made.admin, dbURL)
	step("the recurring revenue's rollup, backfilled by migration 00015, is what the release's orders say")

	api.checkCredentials(t, made)
	api.checkReplays(t, made)
	bob := made.customers["bob"].id
	again, err := api.customers.GetCustomer(t.Context(), as(made.admin, &identitypb.GetCustomerRequest{Id: bob}))
	require.NoError(t, err)
	require.True(t, proto.Equal(was.answers["GetCustomer "+bob], again.Msg), "the replays moved no money: %v", again.Msg)
	step("the release's credentials and idempotency keys work")
	api.carryOn(t, fake, made)
	cur.stop(t)
	require.Empty(t, errorLines(cur.output()), "this build logged errors")

	verify := exec.Command(self, "verify")
	verify.Env = append(childEnv(upgradeEnv(dbURL, port, repoPlugins(t))), runMainEnv+"=1")
	out, err := verify.CombinedOutput()
	require.NoError(t, err, "paymentd verify after the upgrade:\n%s", out)
	step("upgraded from the release " + from[:12] + ": new work done, verify clean")
}

// upgradeEnv is the configuration both builds run with: keys both know.
// The billing test clock lets the test move a month and a half of
// renewals; failed events and notifications wait two hours or more for
// their retry, so that what the release leaves waiting is still waiting
// when the next build reads it.
func upgradeEnv(dbURL string, port int, plugins string) []string {
	return []string{
		"PAYMENTD_DB__URL=" + dbURL,
		"PAYMENTD_SERVER__HOST=127.0.0.1",
		"PAYMENTD_SERVER__PORT=" + strconv.Itoa(port),
		fmt.Sprintf("PAYMENTD_SERVER__PUBLIC_URL=http://127.0.0.1:%d", port),
		"PAYMENTD_JWT__SECRET=" + cliSecret,
		"PAYMENTD_BOOTSTRAP__ADMIN_PASSWORD=" + upgradeAdminPassword,
		"PAYMENTD_PLUGINS__DIR=" + plugins,
		"PAYMENTD_METRICS__ENABLED=false",
		"PAYMENTD_RATE_LIMIT__ENABLED=false",
		"PAYMENTD_LOG__FORMAT=json",
		// The merchant key is stored encrypted, as in production.
		"PAYMENTD_SECRETS__CURRENT=up1",
		"PAYMENTD_SECRETS__KEYS__UP1=" + b64Key(7),
		"PAYMENTD_BILLING__TEST_CLOCK=true",
		"PAYMENTD_EVENTS__RETRY_BASE=2h",
		"PAYMENTD_EVENTS__RETRY_MAX=4h",
		"PAYMENTD_NOTIFY__RETRY_BASE=2h",
		"PAYMENTD_NOTIFY__RETRY_MAX=4h",
	}
}

// upgradeConfig is the configuration file both builds read: two webhook
// endpoints, one that takes every notice and one that is down (its
// notices wait for a retry).
func upgradeConfig(t *testing.T, hook *notifytest.Webhook, downPort int) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "paymentd.toml")
	body := fmt.Sprintf(`[[notify.webhooks]]
name = "ops"
url = %q
secret = %q

[[notify.webhooks]]
name = "backup"
url = "http://127.0.0.1:%d/hooks"
secret = "backup-webhook-secret-0001"
`, hook.URL, hook.Secret, downPort)
	require.NoError(t, os.WriteFile(path, []byte(body), 0o600))
	return path
}

// childEnv is ours without PAYMENTD_* variables, then env.
func childEnv(env []string) []string {
	var out []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "PAYMENTD_") {
			out = append(out, kv)
		}
	}
	return append(out, env...)
}

// paymentdProcess is a paymentd serve started by the test.
type paymentdProcess struct {
	name    string
	baseURL string
	cmd     *exec.Cmd
	logPath string
	done    chan struct{}
	waitErr error
}

func startPaymentd(t *testing.T, name, bin string, env []string, args ...string) *paymentdProcess {
	t.Helper()
	dir := t.TempDir()
	p := &paymentdProcess{name: name, logPath: filepath.Join(dir, name+".log"), done: make(chan struct{})}
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, "PAYMENTD_SERVER__PUBLIC_URL="); ok {
			p.baseURL = v
		}
	}
	f, err := os.Create(p.logPath)
	require.NoError(t, err)
	p.cmd = exec.Command(bin, append([]string{"serve"}, args...)...)
	p.cmd.Dir = dir
	p.cmd.Env = childEnv(env)
	p.cmd.Stdout, p.cmd.Stderr = f, f
	require.NoError(t, p.cmd.Start())
	go func() {
		p.waitErr = p.cmd.Wait()
		_ = f.Close()
		close(p.done)
	}()
	t.Cleanup(func() {
		select {
		case <-p.done:
		default:
			_ = p.cmd.Process.Kill()
			<-p.done
		}
	})
	return p
}

// waitReady waits for /ready to answer 200 (true) or the process to exit
// (false).
func (p *paymentdProcess) waitReady(t *testing.T) bool {
	t.Helper()
	client := &http.Client{Timeout: time.Second}
	deadline := time.Now().Add(90 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case <-p.done:
			return false
		default:
		}
		if resp, err := client.Get(p.baseURL + "/ready"); err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return true
			}
		}
		select {
		case <-p.done:
			return false
		case <-time.After(50 * time.Millisecond):
		}
	}
	t.Fatalf("%s paymentd neither ready nor stopped within 90 s:\n%s", p.name, p.logTail())
	return false
}

// stop sends SIGTERM and requires a clean exit.
func (p *paymentdProcess) stop(t *testing.T) {
	t.Helper()
	require.NoError(t, p.cmd.Process.Signal(syscall.SIGTERM))
	select {
	case <-p.done:
	case <-time.After(60 * time.Second):
		t.Fatalf("%s paymentd did not stop within 60 s of SIGTERM:\n%s", p.name, p.logTail())
	}
	require.NoError(t, p.waitErr, "%s paymentd's exit:\n%s", p.name, p.logTail())
}

// exitCode is the code of an exited process.
func (p *paymentdProcess) exitCode() int {
	<-p.done
	return p.cmd.ProcessState.ExitCode()
}

func (p *paymentdProcess) output() string {
	b, _ := os.ReadFile(p.logPath)
	return string(b)
}

// logTail is the process's last 30 lines, after its race reports if it
// made any (this build runs with the test binary's race detector).
func (p *paymentdProcess) logTail() string {
	out := p.output()
	return testkit.RaceReports(out) + tail(out, 30)
}

// errorLines are the JSON log lines at level ERROR.
func errorLines(log string) []string {
	var out []string
	for _, l := range strings.Split(log, "\n") {
		var rec struct {
			Level string `json:"level"`
		}
		if json.Unmarshal([]byte(l), &rec) == nil && rec.Level == "ERROR" {
			out = append(out, l)
		}
	}
	return out
}

// checkRecurringRevenue: on the release's database, MRR now and the
// renewals due in the next 30 days, which migration 00015 backfilled from
// the orders and their periods, are what the orders say: the live
// recurring orders' renewal prices a month, and those whose paid service
// ends in the 30 days (each end at the start of its UTC quarter hour).
func checkRecurringRevenue(t *testing.T, api *upgradeAPI, admin cred, dbURL string) {
	t.Helper()
	ctx := t.Context()
	got, err := api.payAdmin.GetRecurringRevenue(ctx, as(admin, &paymentpb.GetRecurringRevenueRequest{}))
	require.NoError(t, err)
	asOf, err := time.Parse(time.RFC3339Nano, got.Msg.GetAsOf())
	require.NoError(t, err)
	conn, err := pgx.Connect(ctx, dbURL)
	require.NoError(t, err)
	defer conn.Close(ctx)
	rows, err := conn.Query(ctx, `
		SELECT currency, count(*),
		       sum(renewal_price * 100 * 12 / CASE billing_cycle WHEN 'monthly' THEN 1 WHEN 'quarterly' THEN 3 WHEN 'semi_annual' THEN 6 ELSE 12 END)::bigint,
		       count(*) FILTER (WHERE renews AND paid_until >= trend_quarter($1) AND paid_until < trend_quarter($1 + interval '30 days'))
		FROM orders WHERE status IN ('active', 'suspended') AND billing_cycle <> 'one_time'
		GROUP BY currency ORDER BY currency`, asOf)
	require.NoError(t, err)
	want := map[string][3]int64{}
	for rows.Next() {
		var c string
		var n, twelfths, due int64
		require.NoError(t, rows.Scan(&c, &n, &twelfths, &due))
		want[c] = [3]int64{n, twelfths, due}
	}
	require.NoError(t, rows.Err())
	require.NotEmpty(t, want, "the release made recurring orders")
	have := map[string][3]int64{}
	for _, c := range got.Msg.GetCurrencies() {
		var due int64
		for _, a := range c.GetAhead() {
			if a.GetDays() == 30 {
				due = int64(a.GetRenewals())
			}
		}
		have[c.GetCurrency()] = [3]int64{int64(c.GetEnd().GetServices()), 0, due}
		w := want[c.GetCurrency()]
		require.Equal(t, payment.Twelfths(w[1]).String(), c.GetEnd().GetAmount(), "MRR in %s", c.GetCurrency())
		w[1] = 0
		want[c.GetCurrency()] = w
	}
	require.Equal(t, want, have, "services in MRR and renewals due in 30 days, per currency")
}
