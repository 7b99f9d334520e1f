package metrics

import (
	"context"

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
	c := &syncRepCollector{
		conn:    conn,
		cache:   newScrapeCache("the commits waiting for a synchronous standby", o),
		waiting: desc("db_sync_replication_waiting", "Commits of the service's database waiting now for a synchronous standby to confirm them (wait_event SyncRep); they hang until one does."),
		oldest:  desc("db_sync_replication_oldest_wait_seconds", "How long the oldest commit waiting for a synchronous standby has waited; 0 when none waits."),
		up:      desc("db_sync_replication_stats_up", "1 when the last read of the waiting commits (over a connection of its own) succeeded, else 0."),
	}
	return m.reg.Register(c)
}

type syncRepCollector struct {
	conn  *pgx.ConnConfig
	cache scrapeCache
	last  store.QueueStat // the last read's answer (under cache's lock)

	waiting, oldest, up *prometheus.Desc
}

func (c *syncRepCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.waiting
	ch <- c.oldest
	ch <- c.up
}

func (c *syncRepCollector) Collect(ch chan<- prometheus.Metric) {
	c.cache.collect(c.read, func(ok bool) {
		up := 0.0
		if ok {
			up = 1
			ch <- prometheus.MustNewConstMetric(c.waiting, prometheus.GaugeValue, float64(c.last.Count))
			ch <- prometheus.MustNewConstMetric(c.oldest, prometheus.GaugeValue, c.last.OldestAge.Seconds())
		}
		ch <- prometheus.MustNewConstMetric(c.up, prometheus.GaugeValue, up)
	})
}

func (c *syncRepCollector) read(ctx context.Context) error {
	conn, err := pgx.ConnectConfig(ctx, c.conn.Copy())
	if err != nil {
		return err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	c.last, err = store.SyncReplicationWaits(ctx, conn)
	return err
}
