// Command paymentd-export-bench measures the CSV export of many payments
// (`task bench-export`, docs/performance.md): does the server's memory stay
// flat while it streams a million rows?
//
//	paymentd-export-bench [--rows 1000000] [--db postgres://…] [--keep]
//
// On a fresh database on the server of --db (default
// PAYMENTD_BENCH_DATABASE_URL, then PAYMENTD_TEST_DATABASE_URL; dropped
// afterwards unless --keep) it starts paymentd in this process (internal/app,
// the whole stack), seeds --rows payments in one INSERT … SELECT
// generate_series, logs in as the bootstrap admin and downloads
// GET /export/payments.csv of all of them over HTTP, reading it as a client
// does. Meanwhile it samples, every 50 ms, the process's resident set
// (VmRSS) and the Go heap (runtime/metrics), and prints them against the
// rows received, with the figures before the export for comparison. The
// client side only counts lines into io.Discard, so what grows would be
// the server's.
package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"runtime/debug"
	"runtime/metrics"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/rustbill/paymentd/bench/harness"
	"github.com/rustbill/paymentd/internal/config"
)

func main() { harness.Main("paymentd-export-bench", run) }

func run(ctx context.Context, args []string, out io.Writer) error {
	fs := flag.NewFlagSet("paymentd-export-bench", flag.ContinueOnError)
	rows := fs.Int("rows", 1_000_000, "payments to seed and export")
	dbURL := fs.String("db", harness.FirstSet(os.Getenv("PAYMENTD_BENCH_DATABASE_URL"), os.Getenv("PAYMENTD_TEST_DATABASE_URL")),
		"a PostgreSQL URL whose server gets a fresh database for the run (default $PAYMENTD_BENCH_DATABASE_URL, then $PAYMENTD_TEST_DATABASE_URL)")
	keep := fs.Bool("keep", false, "keep the database afterwards")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *dbURL == "" {
		return errors.New("--db (or PAYMENTD_BENCH_DATABASE_URL) is required: a PostgreSQL server to create a database on")
	}
	if *rows < 1 {
		return errors.New("--rows must be at least 1")
	}

	cfg := config.Default()
	cfg.RateLimit.Enabled = false
	svc, err := harness.StartFresh(ctx, cfg, harness.FreshOptions{Tool: "export-bench", DB: *dbURL, Keep: *keep})
	if err != nil {
		return err
	}
	defer svc.Close()
	if *keep {
		fmt.Fprintf(out, "database kept: %s\n", redact(svc.Config.DB.URL))
	}
	a, base := svc.App, svc.BaseURL

	start := time.Now()
	from, to, err := harness.SeedExportPayments(ctx, a.Pool(), *rows, "export-bench", `=HYPERLINK("http://example.com/`, `")`)
	if err != nil {
		return fmt.Errorf("seed: %w", err)
	}
	fmt.Fprintf(out, "seeded %d payments in %s (INSERT … SELECT generate_series, then ANALYZE)\n", *rows, time.Since(start).Round(time.Millisecond))

	cookie, err := harness.AdminCookie(ctx, base, svc.Config.Bootstrap.AdminPassword)
	if err != nil {
		return err
	}

	// Before: the server started, migrated, seeded and idle.
	// What the seed left behind is returned to the OS first, so that the
	// figure is the idle server's.
	debug.FreeOSMemory()
	time.Sleep(200 * time.Millisecond)
	idle := sample()
	fmt.Fprintf(out, "before the export: RSS %s, Go heap %s\n", mib(idle.rss), mib(idle.heap))

	s := newSampler(50 * time.Millisecond)
	q := url.Values{"from": {from.Format(time.RFC3339)}, "to": {to.Format(time.RFC3339)}, "tz": {"Europe/Berlin"}}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/export/payments.csv?"+q.Encode(), nil)
	if err != nil {
		return err
	}
	req.Header.Set("Cookie", cookie)
	began := time.Now()
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		s.stop()
		return err
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		s.stop()
		b, _ := io.ReadAll(res.Body)
		return fmt.Errorf("export answered %d: %s", res.StatusCode, b)
	}
	r := bufio.NewReaderSize(res.Body, 64<<10)
	var lines, bytesRead int64
	marks := map[int64]bool{}
	for _, f := range []float64{0.1, 0.25, 0.5, 0.75, 0.9} {
		marks[int64(f*float64(*rows))] = true
	}
	fmt.Fprintf(out, "\n%10s %10s %12s %12s\n", "rows", "seconds", "RSS", "Go heap")
	for {
		line, err := r.ReadSlice('\n')
		bytesRead += int64(len(line))
		if errors.Is(err, bufio.ErrBufferFull) {
			continue // a long line: the rest comes with the next read
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			s.stop()
			return fmt.Errorf("reading the export after %d lines: %w", lines, err)
		}
		lines++
		if marks[lines-1] {
			now := sample()
			fmt.Fprintf(out, "%10d %10.1f %12s %12s\n", lines-1, time.Since(began).Seconds(), mib(now.rss), mib(now.heap))
		}
	}
	took := time.Since(began)
	peak := s.stop()
	if lines != int64(*rows)+1 {
		return fmt.Errorf("the export has %d lines, want a header and %d rows", lines, *rows)
	}
	fmt.Fprintf(out, "%10d %10.1f %12s %12s\n\n", lines-1, took.Seconds(), mib(sample().rss), mib(sample().heap))
	fmt.Fprintf(out, "exported %d rows, %s of CSV, in %s (%.0f rows/s, %.1f MiB/s)\n",
		lines-1, mib(uint64(bytesRead)), took.Round(time.Millisecond), float64(lines-1)/took.Seconds(), float64(bytesRead)/(1<<20)/took.Seconds())
	fmt.Fprintf(out, "peak during the export (%d samples): RSS %s (+%s over before), Go heap %s (+%s over before)\n",
		peak.n, mib(peak.rss), mib(sub(peak.rss, idle.rss)), mib(peak.heap), mib(sub(peak.heap, idle.heap)))
	return nil
}

func redact(s string) string {
	u, err := url.Parse(s)
	if err != nil {
		return "(unparsable)"
	}
	return u.Redacted()
}

// seed inserts one customer, one paid order and n payments of it created a
// second apart, most succeeded, every tenth failed with a reason a
// spreadsheet would run; it returns the range that holds them all.

// login signs the bootstrap admin in and returns the session cookie.

// memory is one sample: the process's resident set and the Go heap's
// objects (live and not yet swept), in bytes.
type memory struct {
	rss, heap uint64
	n         int
}

var heapMetric = []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}

func sample() memory {
	metrics.Read(heapMetric)
	return memory{rss: rss(), heap: heapMetric[0].Value.Uint64()}
}

// rss is VmRSS of /proc/self/status (Linux); 0 elsewhere.
func rss() uint64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, _ := strconv.ParseUint(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return kb << 10
		}
	}
	return 0
}

// sampler keeps the peaks of samples taken every interval until stop.
type sampler struct {
	mu   sync.Mutex
	peak memory
	done chan struct{}
	wg   sync.WaitGroup
}

func newSampler(every time.Duration) *sampler {
	s := &sampler{done: make(chan struct{})}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-s.done:
				return
			case <-t.C:
				m := sample()
				s.mu.Lock()
				s.peak.rss, s.peak.heap = max(s.peak.rss, m.rss), max(s.peak.heap, m.heap)
				s.peak.n++
				s.mu.Unlock()
			}
		}
	}()
	return s
}

func (s *sampler) stop() memory {
	close(s.done)
	s.wg.Wait()
	return s.peak
}

func mib(b uint64) string { return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20)) }

func sub(a, b uint64) uint64 {
	if a < b {
		return 0
	}
	return a - b
}
