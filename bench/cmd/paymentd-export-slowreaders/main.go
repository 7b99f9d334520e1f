// Command paymentd-export-slowreaders measures what slow readers of the CSV
// export cost everyone else (issue 26, M1): on a fresh database it starts
// paymentd in this process (internal/app, default configuration: a pool of
// 20 connections, 30 slots of [server].max_concurrency), seeds --rows
// payments, and opens --readers connections that each download
// GET /export/payments.csv with an admin API key of scope read, reading one
// byte a second for --seconds. Meanwhile, once a second, it times one
// GetPayment with the same key and one GET /ready, and prints their
// latencies and answers, with the same figures before the readers for
// comparison, and what each reader got (its status, the bytes it read,
// whether the server cut it off).
//
//	paymentd-export-slowreaders [--rows 150000] [--readers 20] [--seconds 30] [--db postgres://…]
//
// Loopback only; the database is dropped afterwards. The configuration is
// the default one with the PAYMENTD_… environment variables applied
// (PAYMENTD_EXPORT__MAX_CONCURRENT=20 lets every reader stream).
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/rustbill/paymentd/bench/harness"
	"github.com/rustbill/paymentd/internal/app"
	"github.com/rustbill/paymentd/internal/config"
)

func main() { harness.Main("paymentd-export-slowreaders", run) }

func run(ctx context.Context, args []string, out io.Writer) error {
	fs := flag.NewFlagSet("paymentd-export-slowreaders", flag.ContinueOnError)
	rows := fs.Int("rows", 150_000, "payments to seed")
	readers := fs.Int("readers", 20, "slow readers of the export, each on its own connection")
	seconds := fs.Int("seconds", 30, "how long the readers read, one byte a second")
	dbURL := harness.DatabaseFlag(fs)
	if err := fs.Parse(args); err != nil {
		return err
	}
	// The defaults, and what PAYMENTD_… variables set (e.g.
	// PAYMENTD_EXPORT__MAX_CONCURRENT=20 to see the pages alone at work).
	cfg, err := config.Load("", os.Environ())
	if err != nil {
		return err
	}
	cfg.RateLimit.Enabled = false
	exportLog := &exportLines{began: time.Now(), first: map[string]time.Duration{}, n: map[string]int{}}
	svc, err := harness.StartFresh(ctx, cfg, harness.FreshOptions{Tool: "export-slowreaders", DB: *dbURL, Log: slog.New(exportLog)})
	if err != nil {
		return err
	}
	defer svc.Close()
	a, base := svc.App, svc.BaseURL

	began := time.Now()
	from, to, paymentID, err := seed(ctx, a, *rows)
	if err != nil {
		return fmt.Errorf("seed: %w", err)
	}
	fmt.Fprintf(out, "seeded %d payments in %s\n", *rows, time.Since(began).Round(time.Millisecond))
	cookie, err := harness.AdminCookie(ctx, base, svc.Config.Bootstrap.AdminPassword)
	if err != nil {
		return err
	}
	key, err := adminKey(ctx, base, cookie)
	if err != nil {
		return err
	}

	probe := newProber(base, key, paymentID)
	var before []sample
	for range 10 {
		before = append(before, probe.once(ctx))
		time.Sleep(200 * time.Millisecond)
	}
	fmt.Fprintln(out, "\nbefore the readers (10 rounds):")
	summarize(out, before)

	q := url.Values{"from": {from.Format(time.RFC3339)}, "to": {to.Format(time.RFC3339)}}
	results := make([]readerResult, *readers)
	var wg sync.WaitGroup
	readersBegan := time.Now()
	rctx, rcancel := context.WithTimeout(ctx, time.Duration(*seconds)*time.Second)
	defer rcancel()
	for i := range *readers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			results[i] = slowRead(rctx, base+"/export/payments.csv?"+q.Encode(), key)
		}()
	}
	// The readers have sent their requests and the server filled the
	// socket buffers; then probe once a second while they read.
	time.Sleep(2 * time.Second)
	var during []sample
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
loop:
	for {
		select {
		case <-rctx.Done():
			break loop
		case <-tick.C:
			during = append(during, probe.once(ctx))
		}
	}
	wg.Wait()
	fmt.Fprintf(out, "\nwhile %d readers read at 1 byte/s (%d rounds, from 2 s to %d s):\n", *readers, len(during), *seconds)
	summarize(out, during)
	fmt.Fprintf(out, "\nthe server's export lines (seconds after the readers started):\n%s", exportLog.report(readersBegan))
	fmt.Fprintln(out, "\nthe readers:")
	byOutcome := map[string]int{}
	for _, r := range results {
		byOutcome[r.String()]++
	}
	keys := make([]string, 0, len(byOutcome))
	for k := range byOutcome {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		fmt.Fprintf(out, "  %2d × %s\n", byOutcome[k], k)
	}
	return nil
}

type readerResult struct {
	status  int
	body    string
	read    int
	cutOff  time.Duration // when the server ended the response early; 0: it did not
	failure string
}

func (r readerResult) String() string {
	switch {
	case r.failure != "":
		return "request failed: " + r.failure
	case r.status != http.StatusOK:
		return fmt.Sprintf("%d %q", r.status, strings.TrimSpace(r.body))
	case r.cutOff > 0:
		return fmt.Sprintf("200, cut off by the server after ~%ds", int(r.cutOff.Seconds()))
	default:
		return "200, still reading at the end"
	}
}

// slowRead downloads url on a connection of its own, one byte a second,
// until ctx ends or the server ends the response.
func slowRead(ctx context.Context, u, key string) readerResult {
	tr := &http.Transport{DisableKeepAlives: true}
	defer tr.CloseIdleConnections()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return readerResult{failure: err.Error()}
	}
	req.Header.Set("X-Api-Key", key)
	start := time.Now()
	res, err := (&http.Client{Transport: tr}).Do(req)
	if err != nil {
		return readerResult{failure: err.Error()}
	}
	defer res.Body.Close()
	r := readerResult{status: res.StatusCode}
	if res.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(res.Body, 200))
		r.body = string(b)
		return r
	}
	one := make([]byte, 1)
	for {
		n, err := res.Body.Read(one)
		r.read += n
		if err != nil {
			if ctx.Err() == nil {
				r.cutOff = time.Since(start)
			}
			return r
		}
		select {
		case <-ctx.Done():
			return r
		case <-time.After(time.Second):
		}
	}
}

// sample is one round: GetPayment and /ready, each timed.
type sample struct {
	rpc, ready         time.Duration
	rpcCode, readyCode string
}

type prober struct {
	client          *http.Client
	base, key, body string
}

func newProber(base, key, paymentID string) *prober {
	return &prober{
		client: &http.Client{Timeout: 15 * time.Second},
		base:   base, key: key,
		body: fmt.Sprintf(`{"id":%q}`, paymentID),
	}
}

func (p *prober) once(ctx context.Context) sample {
	var s sample
	s.rpc, s.rpcCode = p.do(ctx, http.MethodPost, "/billing.payment.PaymentService/GetPayment", p.body)
	s.ready, s.readyCode = p.do(ctx, http.MethodGet, "/ready", "")
	return s
}

func (p *prober) do(ctx context.Context, method, path, body string) (time.Duration, string) {
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, p.base+path, rd)
	if err != nil {
		return 0, err.Error()
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("X-Api-Key", p.key)
	}
	start := time.Now()
	res, err := p.client.Do(req)
	if err != nil {
		return time.Since(start), "error"
	}
	_, _ = io.Copy(io.Discard, res.Body)
	_ = res.Body.Close()
	return time.Since(start), fmt.Sprint(res.StatusCode)
}

func summarize(out io.Writer, ss []sample) {
	line := func(name string, d func(sample) time.Duration, code func(sample) string) {
		ds := make([]time.Duration, len(ss))
		codes := map[string]int{}
		for i, s := range ss {
			ds[i] = d(s)
			codes[code(s)]++
		}
		slices.Sort(ds)
		fmt.Fprintf(out, "  %-10s p50 %8s  max %8s  answers %v\n", name,
			ds[len(ds)/2].Round(100*time.Microsecond), ds[len(ds)-1].Round(100*time.Microsecond), codes)
	}
	line("GetPayment", func(s sample) time.Duration { return s.rpc }, func(s sample) string { return s.rpcCode })
	line("/ready", func(s sample) time.Duration { return s.ready }, func(s sample) string { return s.readyCode })
}

// seed inserts one customer, one paid order and n payments of it created a
// second apart; it returns the range that holds them all and one payment.
func seed(ctx context.Context, a *app.App, n int) (time.Time, time.Time, string, error) {
	from, to, err := harness.SeedExportPayments(ctx, a.Pool(), n, "export-slow", "card declined ", "")
	if err != nil {
		return from, to, "", err
	}
	var payment string
	err = a.Pool().QueryRow(ctx, `SELECT id FROM payments ORDER BY created_at DESC LIMIT 1`).Scan(&payment)
	return from, to, payment, err
}

// adminKey creates an admin API key of scope read and returns it.
func adminKey(ctx context.Context, base, cookie string) (string, error) {
	res, err := post(ctx, base+"/billing.identity.IdentityService/CreateAdminApiKey", `{"name":"slow readers","scope":"read"}`, cookie)
	if err != nil {
		return "", err
	}
	defer res.Body.Close()
	var got struct{ Key string }
	if err := json.NewDecoder(res.Body).Decode(&got); err != nil || got.Key == "" {
		return "", fmt.Errorf("CreateAdminApiKey answered %d: %v", res.StatusCode, err)
	}
	return got.Key, nil
}

func post(ctx context.Context, u, body, cookie string) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u, bytes.NewBufferString(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	if cookie != "" {
		req.Header.Set("Cookie", cookie)
	}
	return http.DefaultClient.Do(req)
}

// exportLines counts the server's "export …" log lines (the rest is
// discarded) and keeps when each kind came first and last.
type exportLines struct {
	mu          sync.Mutex
	began       time.Time
	first, last map[string]time.Duration
	n           map[string]int
}

func (e *exportLines) Enabled(context.Context, slog.Level) bool { return true }
func (e *exportLines) WithAttrs([]slog.Attr) slog.Handler       { return e }
func (e *exportLines) WithGroup(string) slog.Handler            { return e }

func (e *exportLines) Handle(_ context.Context, r slog.Record) error {
	if !strings.HasPrefix(r.Message, "export") {
		return nil
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	at := r.Time.Sub(e.began)
	if _, ok := e.first[r.Message]; !ok {
		e.first[r.Message] = at
	}
	if e.last == nil {
		e.last = map[string]time.Duration{}
	}
	e.last[r.Message] = at
	e.n[r.Message]++
	return nil
}

func (e *exportLines) report(since time.Time) string {
	e.mu.Lock()
	defer e.mu.Unlock()
	off := since.Sub(e.began)
	var b strings.Builder
	for msg, n := range e.n {
		fmt.Fprintf(&b, "  %2d × %q (first at %.1f s, last at %.1f s)\n", n, msg,
			(e.first[msg] - off).Seconds(), (e.last[msg] - off).Seconds())
	}
	if b.Len() == 0 {
		b.WriteString("  none\n")
	}
	return b.String()
}
