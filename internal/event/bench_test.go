package event_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/rustbill/paymentd/internal/event"
)

// BenchmarkInsertToHandleLatencyWithNotify measures how long an event
// waits between its insert and its handler starting, with a 10 s poll:
// what it shows is the NOTIFY path (insert trigger → commit → listener →
// claim → handler), one event at a time. ns/op is the mean from sending
// the INSERT (autocommit) to the handler's first line; insert-ms is the
// INSERT's own round trip, so commit → handler is about the difference.
// p50-ms and p99-ms are percentiles of the whole interval.
func BenchmarkInsertToHandleLatencyWithNotify(b *testing.B) {
	w := newWorld(b)
	type start struct {
		id uuid.UUID
		at time.Time
	}
	started := make(chan start, 16)
	h := event.HandlerFunc(func(_ context.Context, e event.Event) error {
		started <- start{e.ID, time.Now()}
		return nil
	})
	n := startNode(b, w.pool, "bench", nodeOptions{handler: h, worker: event.WorkerOptions{PollInterval: 10 * time.Second}})
	waitLeader(b, 5*time.Second, n)
	n.rounds.Wait(b, 1, "the new leader's first claim round") // the inserts below are woken, not found by it
	orders := make([]uuid.UUID, 32)
	for i := range orders {
		orders[i] = w.order(b)
	}

	var total, inserts []time.Duration
	i := 0
	for b.Loop() {
		t0 := time.Now()
		e := w.insert(b, "order_paid", orders[i%len(orders)])
		inserts = append(inserts, time.Since(t0))
		for s := range started {
			if s.id == e.ID {
				total = append(total, s.at.Sub(t0))
				break
			}
		}
		i++
	}
	slices.Sort(total)
	slices.Sort(inserts)
	if len(total) > 0 {
		ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
		b.ReportMetric(ms(total[len(total)/2]), "p50-ms")
		b.ReportMetric(ms(total[len(total)*99/100]), "p99-ms")
		b.ReportMetric(ms(inserts[len(inserts)/2]), "insert-ms")
	}
}
