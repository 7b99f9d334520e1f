package metrics

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/rustbill/paymentd/internal/store"
)

// RegisterSyncReplication exposes the commits of the service's database
// that wait for a synchronous standby (pg_stat_activity's SyncRep wait):
// how many, and how long the oldest has waited. A primary whose
// synchronous_standby_names names a standby that is not there (a promoted
// standby keeps the old primary's setting) makes every commit wait
// forever; callbacks then hang until their clients give up, and nothing
// else says why.
//
// The question is asked over a connection of its own, opened from conn for
// each read and closed after it, never the pool's: when every commit hangs,
// the pool's connections are all held by them, and a scrape through the
// pool would only time out. Answers are reused for o.MaxAge.
func (m *Metrics) RegisterSyncReplication(conn *pgx.ConnConfig, o QueueOptions) error {
	if o.Timeout <= 0 {
		o.Timeout = 2 * time.Second
	}
	if o.MaxAge <= 0 {
		o.MaxAge = 10 * time.Second
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	c := &syncRepCollector{
		conn: conn, opts: o,
		waiting: desc("db_sync_replication_waiting", "Commits of the service's database waiting now for a synchronous standby to confirm them (wait_event SyncRep); they hang until one does."),
		oldest:  desc("db_sync_replication_oldest_wait_seconds", "How long the oldest commit waiting for a synchronous standby has waited; 0 when none waits."),
		up:      desc("db_sync_replication_stats_up", "1 when the last read of the waiting commits (over a connection of its own) succeeded, else 0."),
	}
	return m.reg.Register(c)
}

type syncRepCollector struct {
	conn *pgx.ConnConfig
	opts QueueOptions

	waiting, oldest, up *prometheus.Desc

	mu      sync.Mutex
	at      time.Time
	last    store.QueueStat
	ok      bool
	failing bool
}

func (c *syncRepCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.waiting
	ch <- c.oldest
	ch <- c.up
}

func (c *syncRepCollector) Collect(ch chan<- prometheus.Metric) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.at.IsZero() || time.Since(c.at) >= c.opts.MaxAge {
		c.refresh()
	}
	up := 0.0
	if c.ok {
		up = 1
		ch <- prometheus.MustNewConstMetric(c.waiting, prometheus.GaugeValue, float64(c.last.Count))
		ch <- prometheus.MustNewConstMetric(c.oldest, prometheus.GaugeValue, c.last.OldestAge.Seconds())
	}
	ch <- prometheus.MustNewConstMetric(c.up, prometheus.GaugeValue, up)
}

func (c *syncRepCollector) refresh() {
	ctx, cancel := context.WithTimeout(context.Background(), c.opts.Timeout)
	defer cancel()
	c.at = time.Now()
	last, err := c.read(ctx)
	if err != nil {
		if !c.failing {
			c.opts.Logger.Warn("metrics: cannot read the commits waiting for a synchronous standby", "err", err)
		}
		c.ok, c.failing = false, true
		return
	}
	if c.failing {
		c.opts.Logger.Info("metrics: commits waiting for a synchronous standby readable again")
	}
	c.last, c.ok, c.failing = last, true, false
}

func (c *syncRepCollector) read(ctx context.Context) (store.QueueStat, error) {
	conn, err := pgx.ConnectConfig(ctx, c.conn.Copy())
	if err != nil {
		return store.QueueStat{}, err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	return store.SyncReplicationWaits(ctx, conn)
}
