package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"connectrpc.com/connect"

	"github.com/rustbill/paymentd/internal/clustertest"
	"github.com/rustbill/paymentd/internal/fakes/epay"
	"github.com/rustbill/paymentd/internal/pgcluster"
)

// overloadCapacity is [server].max_concurrency of the overloaded node; the
// load is five times as many clients, each with a deadline.
const overloadCapacity = 4

// overload runs one node at [server].max_concurrency = 4 under 20 clients
// that order and create a payment, each call under a client deadline, for
// o.overloadFor. It prints the latency of the calls served and the error
// codes of the others, fails if any of those is not a clean refusal, then
// runs the money check: a request that left the
// queue at its deadline must have written nothing, and one cut short in
// its handler must have rolled back whole.
func overload(ctx context.Context, o options) error {
	dir, err := os.MkdirTemp("", "paymentd-overload-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	if err := os.Chmod(dir, 0o755); err != nil {
		return err
	}
	logs := filepath.Join(dir, "logs")
	if err := os.MkdirAll(logs, 0o755); err != nil {
		return err
	}
	bin, err := clustertest.Build(ctx)
	if err != nil {
		return err
	}
	defer clustertest.RemoveBuilt()
	dbURL := ""
	if o.dbURL == "" {
		pgDir := filepath.Join(dir, "postgres")
		if dbURL, err = pgcluster.Ensure(ctx, pgDir, "paymentd", logf); err != nil {
			return err
		}
		defer func() {
			sctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			_ = pgcluster.Stop(sctx, pgDir)
		}()
	} else {
		name := fmt.Sprintf("paymentd_overload_%d", time.Now().Unix())
		if dbURL, err = createDatabase(ctx, o.dbURL, name); err != nil {
			return err
		}
		defer dropDatabase(o.dbURL, name)
	}
	fake := epay.New(epay.Options{NotifyScale: 0.01})
	if err := fake.Start(); err != nil {
		return err
	}
	defer fake.Close()
	c, err := clustertest.Start(ctx, clustertest.Options{Binary: bin, Nodes: 1, DatabaseURL: dbURL, Dir: logs, Logf: logf,
		Env: []string{
			fmt.Sprintf("PAYMENTD_SERVER__MAX_CONCURRENCY=%d", overloadCapacity),
			fmt.Sprintf("PAYMENTD_SERVER__QUEUE_TIMEOUT_MS=%d", o.overloadQueue.Milliseconds()),
		}})
	if err != nil {
		return err
	}
	defer func() { _ = c.Close() }()
	w, err := clustertest.Setup(ctx, c, fake)
	if err != nil {
		return err
	}
	defer w.Close()
	// The buyer is registered once, before the load.
	if _, err := w.CreatePayment(ctx, c.Nodes[0]); err != nil {
		return fmt.Errorf("first payment: %w", err)
	}

	clients := 5 * overloadCapacity
	logf("overload: %d clients against max_concurrency %d for %s, deadline %s per call, queue_timeout_ms %d",
		clients, overloadCapacity, o.overloadFor, o.overloadDeadline, o.overloadQueue.Milliseconds())
	var (
		mu     sync.Mutex
		served []time.Duration
		failed = map[string]int{}
		// unexpected holds one message per code overloaded calls must
		// never answer: anything but a clean refusal (see cleanRefusal).
		unexpected = map[string]string{}
	)
	began := time.Now()
	loadCtx, stop := context.WithTimeout(ctx, o.overloadFor)
	defer stop()
	var wg sync.WaitGroup
	for range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for loadCtx.Err() == nil {
				cctx, cancel := context.WithTimeout(loadCtx, o.overloadDeadline)
				start := time.Now()
				_, err := w.CreatePayment(cctx, c.Nodes[0])
				took := time.Since(start)
				cancel()
				if loadCtx.Err() != nil && err != nil {
					return // the run ended under the call: not counted
				}
				mu.Lock()
				if err == nil {
					served = append(served, took)
				} else {
					code := connect.CodeOf(err)
					failed[code.String()]++
					if !cleanRefusal(err) {
						unexpected[code.String()] = err.Error()
					}
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	loadTook := time.Since(began).Round(time.Millisecond)

	slices.Sort(served)
	pct := func(p float64) time.Duration {
		if len(served) == 0 {
			return 0
		}
		return served[min(len(served)-1, int(p*float64(len(served))))].Round(time.Millisecond)
	}
	calls := len(served)
	for _, n := range failed {
		calls += n
	}
	fmt.Printf("OVERLOAD: %d calls in %s: served %d (p50 %s, p99 %s, max %s); errors by code %v\n",
		calls, loadTook, len(served), pct(0.5), pct(0.99), pct(1), failed)

	if err := w.Settle(ctx, 2*time.Minute); err != nil {
		logf("%v", err)
	}
	res, err := w.Check(ctx)
	if err != nil {
		return err
	}
	fmt.Println(res.String())
	if !res.OK() {
		return fmt.Errorf("overload: the money check failed")
	}
	if len(unexpected) > 0 {
		return fmt.Errorf("overload: calls answered codes other than a clean refusal (deadline_exceeded, resource_exhausted, unavailable \"database busy, retry\"): %v", unexpected)
	}
	if len(served) > 0 && served[len(served)-1] > o.overloadDeadline+time.Second {
		return fmt.Errorf("overload: a served call took %s, past its deadline %s", served[len(served)-1], o.overloadDeadline)
	}
	fmt.Println("OVERLOAD PASSED: served calls within their deadline, the rest clean errors, nothing half-written")
	return nil
}

// cleanRefusal reports whether err is an answer an overloaded service may
// give a call instead of serving it: the client's deadline passed
// (DeadlineExceeded, from the queue or the client itself), the queue
// timeout or a rate limit (ResourceExhausted), or no pooled connection
// within [db].acquire_timeout_secs (Unavailable "database busy, retry").
// Anything else — Internal, Unknown, an Unavailable that is a transport
// failure, Canceled — is a defect under load.
func cleanRefusal(err error) bool {
	switch connect.CodeOf(err) {
	case connect.CodeDeadlineExceeded, connect.CodeResourceExhausted:
		return true
	case connect.CodeUnavailable:
		var ce *connect.Error
		return errors.As(err, &ce) && strings.Contains(ce.Message(), "database busy")
	}
	return false
}
