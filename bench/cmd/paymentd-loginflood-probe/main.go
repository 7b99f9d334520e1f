// Command paymentd-loginflood-probe measures what a flood of wrong-password
// logins does to everyone else (docs/security.md, "Login flood"): the
// latency of an authenticated GetMe, which needs no password, and how long
// a legitimate login takes to be answered, while attackers on several
// loopback addresses each stay under the per-address login limit.
//
//	paymentd-loginflood-probe [--db postgres://…] [--window 20s] [--only 2x32,16x4] [--rate 4.8]
//
// On a fresh database on the server of --db (default
// PAYMENTD_BENCH_DATABASE_URL, then PAYMENTD_TEST_DATABASE_URL, then
// postgres://postgres@127.0.0.1:5432/postgres; dropped afterwards) it starts
// paymentd in this process (internal/app, the whole stack, the default
// configuration: 30 slots of [server].max_concurrency, the rate limit on,
// counters in memory) on 127.0.0.1, registers one customer from 127.0.0.2,
// and runs each scenario in turn:
//
//   - 2x32: 2 addresses (127.0.0.10–11), 32 connections each;
//   - 16x4: 16 addresses (127.0.0.20–35), 4 connections each.
//
// Each address sends wrong-password Logins, each for an address nobody
// registered (a new one every attempt, so no per-account budget is
// reached), paced at --rate per second (under the 5/s per-address limit),
// on as many connections as it has; an attempt waits for its answer, so a
// connection has at most one in flight. While the attack runs for
// --window, two clients on 127.0.0.2 call GetMe with the customer's token
// back to back, and a client on 127.0.0.3 logs in with the right password
// every two seconds. Every client binds its local address, so the server
// sees each attacker as its own address. The attack then stops (its
// connections closed) and the next scenario starts after a pause.
//
// It prints, per scenario: GetMe's count, median, p99 and max; each
// legitimate login's time and answer; and the attackers' answers by kind
// (401, 429 with the message the limit gave, errors).
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rustbill/paymentd/bench/harness"
	"github.com/rustbill/paymentd/internal/config"
)

const (
	loginPath    = "/billing.identity.IdentityService/Login"
	registerPath = "/billing.identity.IdentityService/Register"
	getMePath    = "/billing.identity.IdentityService/GetMe"
)

func main() { harness.Main("paymentd-loginflood-probe", run) }

type scenario struct {
	name         string
	first, addrs int // 127.0.0.first … first+addrs-1
	conns        int // per address
}

var scenarios = map[string]scenario{
	"2x32": {name: "2x32", first: 10, addrs: 2, conns: 32},
	"16x4": {name: "16x4", first: 20, addrs: 16, conns: 4},
}

func run(ctx context.Context, args []string, out io.Writer) error {
	fs := flag.NewFlagSet("paymentd-loginflood-probe", flag.ContinueOnError)
	dbURL := harness.DatabaseFlag(fs)
	window := fs.Duration("window", 20*time.Second, "how long each attack runs and the other clients are measured")
	only := fs.String("only", "2x32,16x4", "the scenarios to run, comma-separated")
	rate := fs.Float64("rate", 4.8, "wrong logins per second from each attacking address (the limit is 5)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *window <= 0 || *window > time.Minute {
		return errors.New("--window must be between 0 and 1m")
	}
	if *rate <= 0 {
		return errors.New("--rate must be positive")
	}

	cfg := config.Default()
	cfg.Server.ShutdownTimeout = 2 * time.Second
	svc, err := harness.StartFresh(ctx, cfg, harness.FreshOptions{Tool: "loginflood-probe", DB: *dbURL})
	if err != nil {
		return err
	}
	defer svc.Close()
	base := svc.BaseURL

	const email, password = "customer@example.com", "the-right-password"
	user := clientFrom("127.0.0.2", 15*time.Second)
	status, body, err := call(ctx, user, base+registerPath, "", map[string]string{"email": email, "password": password, "name": "Customer"})
	if err != nil || status != http.StatusOK {
		return fmt.Errorf("register: %d %s %v", status, body, err)
	}
	var reg struct {
		AccessToken string `json:"accessToken"`
	}
	if err := json.Unmarshal(body, &reg); err != nil || reg.AccessToken == "" {
		return fmt.Errorf("register: no token in %s", body)
	}

	fmt.Fprintf(out, "GOMAXPROCS %d; window %s; attackers at %.1f wrong logins/s per address\n", runtime.GOMAXPROCS(0), *window, *rate)
	quiet := measure(ctx, base, reg.AccessToken, email, password, 3*time.Second)
	report(out, "none", quiet, nil)
	for _, name := range strings.Split(*only, ",") {
		sc, ok := scenarios[name]
		if !ok {
			return fmt.Errorf("--only: no scenario %q (2x32, 16x4)", name)
		}
		actx, stop := context.WithCancel(ctx)
		attack := startAttack(actx, base, sc, *rate)
		time.Sleep(time.Second) // the attack is in place
		m := measure(ctx, base, reg.AccessToken, email, password, *window)
		stop()
		report(out, sc.name, m, attack.wait())
		time.Sleep(3 * time.Second) // the server lets go of what the attack left
	}
	return nil
}

// clientFrom is an HTTP client whose connections leave from local, so that
// the server sees that address.
func clientFrom(local string, timeout time.Duration) *http.Client {
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(local)}, Timeout: 5 * time.Second}
	return &http.Client{Timeout: timeout, Transport: &http.Transport{
		DialContext: d.DialContext, MaxConnsPerHost: 1, MaxIdleConnsPerHost: 1,
	}}
}

// call posts a Connect JSON request and returns the status and body.
func call(ctx context.Context, c *http.Client, url, token string, msg any) (int, []byte, error) {
	b, err := json.Marshal(msg)
	if err != nil {
		return 0, nil, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(b))
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	res, err := c.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer res.Body.Close()
	body, err := io.ReadAll(res.Body)
	return res.StatusCode, body, err
}

// kind names an answer for the counts: the status and, for a refusal, the
// limit's message without its retry delay.
func kind(status int, body []byte, err error) string {
	if err != nil {
		if errors.Is(err, context.Canceled) {
			return ""
		}
		return "error"
	}
	if status == http.StatusTooManyRequests {
		var e struct {
			Message string `json:"message"`
		}
		_ = json.Unmarshal(body, &e)
		msg, _, _ := strings.Cut(e.Message, ", retry after")
		return fmt.Sprintf("429 %q", msg)
	}
	return fmt.Sprint(status)
}

type attack struct {
	wg      sync.WaitGroup
	mu      sync.Mutex
	answers map[string]int
}

func (a *attack) count(k string) {
	if k == "" {
		return
	}
	a.mu.Lock()
	a.answers[k]++
	a.mu.Unlock()
}

func (a *attack) wait() map[string]int {
	a.wg.Wait()
	return a.answers
}

var attempt atomic.Int64

// startAttack starts sc's attackers until ctx ends: per address, a pacer
// hands out rate attempts a second to the address's connections.
func startAttack(ctx context.Context, base string, sc scenario, rate float64) *attack {
	a := &attack{answers: map[string]int{}}
	for i := range sc.addrs {
		ip := fmt.Sprintf("127.0.0.%d", sc.first+i)
		tickets := make(chan struct{})
		a.wg.Go(func() {
			t := time.NewTicker(time.Duration(float64(time.Second) / rate))
			defer t.Stop()
			for {
				select {
				case <-ctx.Done():
					return
				case <-t.C:
					select {
					case tickets <- struct{}{}:
					case <-t.C: // every connection is busy: the tick is lost
					case <-ctx.Done():
						return
					}
				}
			}
		})
		for range sc.conns {
			a.wg.Go(func() {
				c := clientFrom(ip, 30*time.Second)
				defer c.CloseIdleConnections()
				for {
					select {
					case <-ctx.Done():
						return
					case <-tickets:
					}
					n := attempt.Add(1)
					status, body, err := call(ctx, c, base+loginPath, "", map[string]string{
						"email": fmt.Sprintf("nobody-%d@example.com", n), "password": "a-wrong-password",
					})
					a.count(kind(status, body, err))
				}
			})
		}
	}
	return a
}

type sample struct {
	took   time.Duration
	answer string
}

type measured struct {
	getMe, login []sample
}

// measure runs, for d, two GetMe clients back to back from 127.0.0.2 and a
// legitimate login every two seconds from 127.0.0.3.
func measure(ctx context.Context, base, token, email, password string, d time.Duration) measured {
	end := time.Now().Add(d)
	var mu sync.Mutex
	var m measured
	var wg sync.WaitGroup
	for range 2 {
		wg.Go(func() {
			c := clientFrom("127.0.0.2", 30*time.Second)
			defer c.CloseIdleConnections()
			for time.Now().Before(end) && ctx.Err() == nil {
				began := time.Now()
				status, body, err := call(ctx, c, base+getMePath, token, map[string]string{})
				s := sample{took: time.Since(began), answer: kind(status, body, err)}
				mu.Lock()
				m.getMe = append(m.getMe, s)
				mu.Unlock()
			}
		})
	}
	wg.Go(func() {
		c := clientFrom("127.0.0.3", 30*time.Second)
		defer c.CloseIdleConnections()
		for time.Now().Before(end) && ctx.Err() == nil {
			began := time.Now()
			status, body, err := call(ctx, c, base+loginPath, "", map[string]string{"email": email, "password": password})
			s := sample{took: time.Since(began), answer: kind(status, body, err)}
			mu.Lock()
			m.login = append(m.login, s)
			mu.Unlock()
			time.Sleep(max(0, 2*time.Second-s.took))
		}
	})
	wg.Wait()
	return m
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

func counts(samples []sample) string {
	n := map[string]int{}
	for _, s := range samples {
		n[s.answer]++
	}
	return join(n)
}

func join(n map[string]int) string {
	var keys []string
	for k, v := range n {
		keys = append(keys, fmt.Sprintf("%s×%d", k, v))
	}
	slices.Sort(keys)
	return strings.Join(keys, " ")
}

func report(out io.Writer, name string, m measured, attackers map[string]int) {
	took := make([]time.Duration, 0, len(m.getMe))
	for _, s := range m.getMe {
		took = append(took, s.took)
	}
	slices.Sort(took)
	if len(took) > 0 {
		fmt.Fprintf(out, "%-5s GetMe  %6d calls  p50 %8.1f ms  p99 %8.1f ms  max %8.1f ms  %s\n", name, len(took),
			ms(took[len(took)/2]), ms(took[len(took)*99/100]), ms(took[len(took)-1]), counts(m.getMe))
	}
	var logins []string
	var worst time.Duration
	for _, s := range m.login {
		logins = append(logins, fmt.Sprintf("%.0fms:%s", ms(s.took), s.answer))
		worst = max(worst, s.took)
	}
	fmt.Fprintf(out, "%-5s Login  %6d calls  max %8.1f ms  %s\n", name, len(m.login), ms(worst), strings.Join(logins, " "))
	if attackers != nil {
		total := 0
		for _, v := range attackers {
			total += v
		}
		fmt.Fprintf(out, "%-5s attack %6d answers  %s\n", name, total, join(attackers))
	}
}
