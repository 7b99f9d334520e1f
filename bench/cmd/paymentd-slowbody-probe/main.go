// Command paymentd-slowbody-probe measures what slow or oversized request
// bodies sent without credentials do to other clients (docs/performance.md,
// "Slow bodies"): the latency of an unauthenticated GetMe, which waits for a
// slot of the concurrency limit like every RPC, and of /ready, while an
// attack runs.
//
//	paymentd-slowbody-probe [--db postgres://…] [--window 9s] [--only a-h1,a-h2,b]
//
// On a fresh database on the server of --db (default
// PAYMENTD_BENCH_DATABASE_URL, then PAYMENTD_TEST_DATABASE_URL, then
// postgres://postgres@127.0.0.1:5432/postgres; dropped afterwards) it starts
// paymentd in this process (internal/app, the whole stack, the default
// [server] settings: 30 slots, a read timeout of 10 s, 1 MiB requests; the
// rate limit off, as every client here is 127.0.0.1), on loopback, and runs
// each attack in turn:
//
//   - a-h1: 32 HTTP/1.1 connections, each a GetMe declaring a body of
//     5,000,000 bytes and sending one byte of it;
//   - a-h2: one cleartext HTTP/2 connection with 32 such streams (gRPC);
//   - b: 66 connections declaring 1,114,111 bytes (the largest body the
//     reader buffered; the budget held 64) and sending nothing, then 32
//     declaring 1,000 and sending one byte.
//
// While one runs (for --window, less than the read timeout, after which
// the server cuts the attack off), four clients call GetMe back to back
// and one /ready; each attack ends by closing its connections. The
// attacking connections are bounded (at most 98 at once) and so is the
// run (about 12 s an attack).
package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"

	"github.com/rustbill/paymentd/bench/harness"
	"github.com/rustbill/paymentd/internal/config"
)

const getMe = "/billing.identity.IdentityService/GetMe"

func main() { harness.Main("paymentd-slowbody-probe", run) }

func run(ctx context.Context, args []string, out io.Writer) error {
	fs := flag.NewFlagSet("paymentd-slowbody-probe", flag.ContinueOnError)
	dbURL := harness.DatabaseFlag(fs)
	window := fs.Duration("window", 9*time.Second, "how long the other clients are measured during each attack (under the read timeout, 10 s)")
	only := fs.String("only", "a-h1,a-h2,b", "the attacks to run, comma-separated")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *window <= 0 || *window > 10*time.Second {
		return errors.New("--window must be between 0 and 10s")
	}

	cfg := config.Default()
	cfg.RateLimit.Enabled = false
	cfg.Server.ShutdownTimeout = 2 * time.Second
	svc, err := harness.StartFresh(ctx, cfg, harness.FreshOptions{Tool: "slowbody-probe", DB: *dbURL})
	if err != nil {
		return err
	}
	defer svc.Close()
	a, addr := svc.App, svc.Addr

	attacks := map[string]func(addr string) (func(), error){
		"a-h1": func(addr string) (func(), error) { return declareHTTP1(addr, 32, 5_000_000, "{") },
		"a-h2": func(addr string) (func(), error) { return declareH2C(addr, 32, 5_000_000) },
		"b": func(addr string) (func(), error) {
			stopBig, err := declareHTTP1(addr, 66, 1_114_111, "")
			if err != nil {
				return nil, err
			}
			time.Sleep(200 * time.Millisecond) // the big ones are read first
			stopSmall, err := declareHTTP1(addr, 32, 1000, "{")
			if err != nil {
				stopBig()
				return nil, err
			}
			return func() { stopSmall(); stopBig() }, nil
		},
	}
	fmt.Fprintf(out, "%-6s %-7s %6s %9s %9s %9s  %s\n", "attack", "call", "calls", "p50 ms", "p90 ms", "max ms", "answers")
	report(out, "none", measure(addr, 2*time.Second))
	for _, name := range strings.Split(*only, ",") {
		attack, ok := attacks[name]
		if !ok {
			return fmt.Errorf("--only: no attack %q (a-h1, a-h2, b)", name)
		}
		stop, err := attack(addr)
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		time.Sleep(300 * time.Millisecond) // the attack is in place
		report(out, name, measure(addr, *window))
		stop()
		time.Sleep(time.Second) // the server lets go of the closed connections
	}
	fmt.Fprintf(out, "cut off at the read timeout (paymentd_http_slow_requests_total): %d\n", a.Server().SlowRequests())
	return nil
}

// declareHTTP1 opens n connections, each a GetMe (Connect JSON) declaring
// length bytes of body and sending start of it. The returned function
// closes them.
func declareHTTP1(addr string, n, length int, start string) (func(), error) {
	var conns []net.Conn
	closeAll := func() {
		for _, c := range conns {
			_ = c.Close()
		}
	}
	for range n {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			closeAll()
			return nil, err
		}
		conns = append(conns, c)
		if _, err := fmt.Fprintf(c, "POST %s HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", getMe, addr, length, start); err != nil {
			closeAll()
			return nil, err
		}
		go func() { _, _ = io.Copy(io.Discard, c) }()
	}
	return closeAll, nil
}

// declareH2C opens one cleartext HTTP/2 connection with n gRPC GetMe
// streams, each declaring length bytes and sending one.
func declareH2C(addr string, n, length int) (func(), error) {
	c, err := net.Dial("tcp", addr)
	if err != nil {
		return nil, err
	}
	if _, err := io.WriteString(c, http2.ClientPreface); err != nil {
		_ = c.Close()
		return nil, err
	}
	fr := http2.NewFramer(c, c)
	var mu sync.Mutex // the framer's writes: the streams and the acks
	if err := fr.WriteSettings(); err != nil {
		_ = c.Close()
		return nil, err
	}
	go func() {
		for {
			f, err := fr.ReadFrame()
			if err != nil {
				return
			}
			mu.Lock()
			switch f := f.(type) {
			case *http2.SettingsFrame:
				if !f.IsAck() {
					_ = fr.WriteSettingsAck()
				}
			case *http2.PingFrame:
				if !f.IsAck() {
					_ = fr.WritePing(true, f.Data)
				}
			}
			mu.Unlock()
		}
	}()
	var block bytes.Buffer
	enc := hpack.NewEncoder(&block)
	mu.Lock()
	defer mu.Unlock()
	for i := range n {
		block.Reset()
		for _, f := range [][2]string{
			{":method", "POST"}, {":scheme", "http"}, {":authority", addr}, {":path", getMe},
			{"content-type", "application/grpc"}, {"te", "trailers"}, {"content-length", fmt.Sprint(length)},
		} {
			_ = enc.WriteField(hpack.HeaderField{Name: f[0], Value: f[1]})
		}
		id := uint32(2*i + 1)
		if err := fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: block.Bytes(), EndHeaders: true}); err != nil {
			_ = c.Close()
			return nil, err
		}
		if err := fr.WriteData(id, false, []byte{0}); err != nil {
			_ = c.Close()
			return nil, err
		}
	}
	return func() { _ = c.Close() }, nil
}

type sample struct {
	call   string
	took   time.Duration
	answer string
}

// measure calls GetMe without credentials from four clients and /ready
// from one, back to back, for d.
func measure(addr string, d time.Duration) []sample {
	base := "http://" + addr
	end := time.Now().Add(d)
	var mu sync.Mutex
	var samples []sample
	var wg sync.WaitGroup
	loop := func(call string, do func(*http.Client) string) {
		wg.Go(func() {
			client := &http.Client{Timeout: 15 * time.Second, Transport: &http.Transport{}}
			defer client.CloseIdleConnections()
			for time.Now().Before(end) {
				began := time.Now()
				answer := do(client)
				mu.Lock()
				samples = append(samples, sample{call: call, took: time.Since(began), answer: answer})
				mu.Unlock()
			}
		})
	}
	for range 4 {
		loop("GetMe", func(c *http.Client) string {
			resp, err := c.Post(base+getMe, "application/json", strings.NewReader("{}"))
			return answer(resp, err)
		})
	}
	loop("/ready", func(c *http.Client) string {
		resp, err := c.Get(base + "/ready")
		return answer(resp, err)
	})
	wg.Wait()
	return samples
}

func answer(resp *http.Response, err error) string {
	if err != nil {
		return "error"
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	_ = resp.Body.Close()
	return fmt.Sprint(resp.StatusCode)
}

func report(out io.Writer, attack string, samples []sample) {
	for _, call := range []string{"GetMe", "/ready"} {
		var took []time.Duration
		answers := map[string]int{}
		for _, s := range samples {
			if s.call == call {
				took = append(took, s.took)
				answers[s.answer]++
			}
		}
		if len(took) == 0 {
			continue
		}
		slices.Sort(took)
		ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
		var keys []string
		for k, v := range answers {
			keys = append(keys, fmt.Sprintf("%s×%d", k, v))
		}
		slices.Sort(keys)
		fmt.Fprintf(out, "%-6s %-7s %6d %9.1f %9.1f %9.1f  %s\n", attack, call, len(took),
			ms(took[len(took)/2]), ms(took[len(took)*9/10]), ms(took[len(took)-1]), strings.Join(keys, " "))
	}
}
