package harness

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// waitInterval is how often the wait sampler (--waits) reads
// pg_stat_activity: often enough for a 1 s measurement to give a hundred
// samples, rarely enough that its own backend is a small part of
// PostgreSQL's CPU (each read costs it some 100 µs).
const waitInterval = 10 * time.Millisecond

// Waits is where the requests of one measurement waited (--waits): inside
// PostgreSQL, sampled from pg_stat_activity, and in paymentd's pool, from
// its metrics.
type Waits struct {
	// Backends is, per state of the service database's client backends,
	// how many were in it on average over the samples: "CPU" (active,
	// waiting for nothing: running or runnable), "idle in transaction"
	// (a transaction open while paymentd works or the next statement
	// travels), and "Type:Event" for an active backend waiting (a lock, a
	// lightweight lock such as WALWrite, the WAL flush, the client).
	Backends map[string]float64 `json:"backends"`
	Samples  int                `json:"samples"`
	// PoolWaitMs is paymentd's pool acquire time per request, and
	// EmptyAcquires the share of acquires that found no idle connection
	// (both from db_pool_acquire_wait_seconds_total and
	// db_pool_empty_acquires_total); -1 when paymentd has no metrics.
	PoolWaitMs    float64 `json:"pool_wait_ms_per_req"`
	EmptyAcquires float64 `json:"empty_acquire_share"`
	// QueueWaiting is how many requests waited for a [server].
	// max_concurrency slot, on average over the metrics samples.
	QueueWaiting float64 `json:"queue_waiting"`
}

// waitSampler samples pg_stat_activity on a connection of its own until
// stopped.
type waitSampler struct {
	stop chan struct{}
	done chan Waits
}

// sampleWaits starts sampling the backends of the database of url, and
// paymentd's metrics at metricsURL ("" for none).
func sampleWaits(url, metricsURL string) (*waitSampler, error) {
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		return nil, err
	}
	s := &waitSampler{stop: make(chan struct{}), done: make(chan Waits, 1)}
	before, _ := scrapePool(metricsURL)
	go func() {
		defer conn.Close(ctx)
		counts := map[string]int{}
		samples, queueSum, queueSamples := 0, 0.0, 0
		t := time.NewTicker(waitInterval)
		defer t.Stop()
		for i := 0; ; i++ {
			select {
			case <-s.stop:
				w := Waits{Backends: map[string]float64{}, Samples: samples, PoolWaitMs: -1}
				for k, n := range counts {
					if samples > 0 {
						w.Backends[k] = float64(n) / float64(samples)
					}
				}
				if after, ok := scrapePool(metricsURL); ok && before.ok {
					if n := after.acquires - before.acquires; n > 0 {
						w.EmptyAcquires = (after.empty - before.empty) / n
					}
					w.PoolWaitMs = (after.waitSecs - before.waitSecs) * 1000 // per request: divided in load
				}
				if queueSamples > 0 {
					w.QueueWaiting = queueSum / float64(queueSamples)
				}
				s.done <- w
				return
			case <-t.C:
			}
			rows, err := conn.Query(ctx, `
				SELECT CASE WHEN state = 'active' AND wait_event IS NULL THEN 'CPU'
				            WHEN state = 'active' THEN wait_event_type || ':' || wait_event
				            ELSE state END
				FROM pg_stat_activity
				WHERE datname = current_database() AND backend_type = 'client backend'
				  AND pid <> pg_backend_pid() AND state <> 'idle'`)
			if err != nil {
				continue
			}
			for rows.Next() {
				var k string
				if rows.Scan(&k) == nil {
					counts[k]++
				}
			}
			rows.Close()
			samples++
			// The concurrency queue, every tenth sample (the metrics
			// page reads the event queue's depth from the database).
			if i%10 == 0 {
				if p, ok := scrapePool(metricsURL); ok {
					queueSum += p.queueWaiting
					queueSamples++
				}
			}
		}
	}()
	return s, nil
}

// result stops the sampler and returns what it saw, the pool's wait
// divided over requests.
func (s *waitSampler) result(requests int) Waits {
	close(s.stop)
	w := <-s.done
	if w.PoolWaitMs >= 0 && requests > 0 {
		w.PoolWaitMs /= float64(requests)
	}
	return w
}

// poolCounters are the pool and queue series of paymentd's metrics page.
type poolCounters struct {
	ok                        bool
	acquires, empty, waitSecs float64
	queueWaiting              float64
}

func scrapePool(metricsURL string) (poolCounters, bool) {
	if metricsURL == "" {
		return poolCounters{}, false
	}
	c := http.Client{Timeout: 2 * time.Second}
	resp, err := c.Get(metricsURL)
	if err != nil {
		return poolCounters{}, false
	}
	defer resp.Body.Close()
	var p poolCounters
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 0, 64*1024), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "#") {
			continue
		}
		name, value, ok := strings.Cut(line, " ")
		if !ok {
			continue
		}
		v, err := strconv.ParseFloat(strings.TrimSpace(value), 64)
		if err != nil {
			continue
		}
		switch {
		case strings.HasSuffix(name, "db_pool_acquires_total"):
			p.acquires = v
		case strings.HasSuffix(name, "db_pool_empty_acquires_total"):
			p.empty = v
		case strings.HasSuffix(name, "db_pool_acquire_wait_seconds_total"):
			p.waitSecs = v
		case strings.HasSuffix(name, "concurrency_waiting"):
			p.queueWaiting = v
		}
	}
	p.ok = sc.Err() == nil && resp.StatusCode == http.StatusOK
	return p, p.ok
}

// text is the waits in one line: the backends' states, most first, then
// the pool and the queue.
func (w Waits) text() string {
	type kv struct {
		k string
		v float64
	}
	var xs []kv
	total := 0.0
	for k, v := range w.Backends {
		xs = append(xs, kv{k, v})
		total += v
	}
	sort.Slice(xs, func(i, j int) bool { return xs[i].v > xs[j].v || xs[i].v == xs[j].v && xs[i].k < xs[j].k })
	var parts []string
	for _, x := range xs {
		if x.v < 0.05 {
			continue
		}
		parts = append(parts, fmt.Sprintf("%s %.1f", x.k, x.v))
	}
	s := fmt.Sprintf("backends busy %.1f (%s)", total, strings.Join(parts, ", "))
	if w.PoolWaitMs >= 0 {
		s += fmt.Sprintf("; pool wait %.2f ms/req, %.0f%% of acquires waited; concurrency queue %.1f", w.PoolWaitMs, 100*w.EmptyAcquires, w.QueueWaiting)
	}
	return s
}
