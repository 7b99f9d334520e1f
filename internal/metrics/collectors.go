package metrics

import (
	"context"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/rustbill/paymentd/internal/outbound"
	"github.com/rustbill/paymentd/internal/store"
)

func desc(name, help string, labels ...string) *prometheus.Desc {
	return prometheus.NewDesc(prometheus.BuildFQName(Namespace, "", name), help, labels, nil)
}

// collectorFunc is a prometheus.Collector from its descriptions and a
// function that reads the current values at scrape time.
type collectorFunc struct {
	descs   []*prometheus.Desc
	collect func(chan<- prometheus.Metric)
}

func (c collectorFunc) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range c.descs {
		ch <- d
	}
}

func (c collectorFunc) Collect(ch chan<- prometheus.Metric) { c.collect(ch) }

// RegisterPool exposes the pgx pool's statistics (pool.Stat() at scrape).
func (m *Metrics) RegisterPool(pool *pgxpool.Pool) error {
	conns := desc("db_pool_connections", "Connections of the database pool, by state: acquired (in use), idle, constructing.", "state")
	maxConns := desc("db_pool_max_connections", "The pool's [db].max_connections.")
	acquires := desc("db_pool_acquires_total", "Connections handed out by the pool.")
	empty := desc("db_pool_empty_acquires_total", "Acquires that had to wait because no idle connection was left: a pool too small for the load.")
	canceled := desc("db_pool_canceled_acquires_total", "Acquires given up (the request's context ended) while waiting for a connection.")
	wait := desc("db_pool_acquire_wait_seconds_total", "Total time spent acquiring connections.")
	created := desc("db_pool_new_connections_total", "Connections opened.")
	destroyed := desc("db_pool_closed_connections_total", "Connections closed by the pool, by reason: max_lifetime, max_idle.", "reason")
	return m.reg.Register(collectorFunc{
		descs: []*prometheus.Desc{conns, maxConns, acquires, empty, canceled, wait, created, destroyed},
		collect: func(ch chan<- prometheus.Metric) {
			s := pool.Stat()
			gauge := func(d *prometheus.Desc, v float64, labels ...string) {
				ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
			}
			counter := func(d *prometheus.Desc, v float64, labels ...string) {
				ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, v, labels...)
			}
			gauge(conns, float64(s.AcquiredConns()), "acquired")
			gauge(conns, float64(s.IdleConns()), "idle")
			gauge(conns, float64(s.ConstructingConns()), "constructing")
			gauge(maxConns, float64(s.MaxConns()))
			counter(acquires, float64(s.AcquireCount()))
			counter(empty, float64(s.EmptyAcquireCount()))
			counter(canceled, float64(s.CanceledAcquireCount()))
			counter(wait, s.AcquireDuration().Seconds())
			counter(created, float64(s.NewConnsCount()))
			counter(destroyed, float64(s.MaxLifetimeDestroyCount()), "max_lifetime")
			counter(destroyed, float64(s.MaxIdleDestroyCount()), "max_idle")
		},
	})
}

// Limiter is what the concurrency limiter reports.
type Limiter interface {
	Max() int
	InFlight() int
	Waiting() int
	// Left is how many requests left the queue without a slot, by
	// reason (deadline_exceeded, canceled, queue_timeout).
	Left(reason string) uint64
}

// RegisterLimiter exposes the FIFO concurrency limit of the request path.
func (m *Metrics) RegisterLimiter(l Limiter, reasons []string) error {
	inFlight := desc("concurrency_in_flight", "Requests being handled now (at most [server].max_concurrency).")
	waiting := desc("concurrency_waiting", "Requests queued for a slot of the concurrency limit.")
	limit := desc("concurrency_limit", "[server].max_concurrency.")
	left := desc("concurrency_queue_left_total", "Requests that left the concurrency queue without a slot: deadline_exceeded (the client's deadline), canceled (the client went away), queue_timeout ([server].queue_timeout_ms).", "reason")
	return m.reg.Register(collectorFunc{
		descs: []*prometheus.Desc{inFlight, waiting, limit, left},
		collect: func(ch chan<- prometheus.Metric) {
			for _, reason := range reasons {
				ch <- prometheus.MustNewConstMetric(left, prometheus.CounterValue, float64(l.Left(reason)), reason)
			}
			ch <- prometheus.MustNewConstMetric(inFlight, prometheus.GaugeValue, float64(l.InFlight()))
			ch <- prometheus.MustNewConstMetric(waiting, prometheus.GaugeValue, float64(l.Waiting()))
			ch <- prometheus.MustNewConstMetric(limit, prometheus.GaugeValue, float64(l.Max()))
		},
	})
}

// RequestBodies is what the server reports of the request bodies it reads
// before the concurrency limit.
type RequestBodies interface {
	SlowRequests() uint64
	TooLargeRequests() uint64
	BufferBusyRequests() uint64
}

// RegisterRequestBodies exposes the requests the server refused while it
// read their body, before the concurrency limit: cut off at
// [server].read_timeout_secs, too large, or refused for want of buffers.
func (m *Metrics) RegisterRequestBodies(b RequestBodies) error {
	slow := desc("http_slow_requests_total", "Requests cut off because their body did not arrive within [server].read_timeout_secs (408, DeadlineExceeded to RPC clients; the connection ends).")
	tooLarge := desc("http_body_too_large_total", "Requests refused before the concurrency limit because their body, declared or as sent, was over [server].max_request_bytes plus 64 KiB (413, ResourceExhausted to RPC clients).")
	busy := desc("http_body_buffers_busy_total", "Requests refused because the budget of request buffers stayed spent until their read deadline (503, Unavailable to RPC clients, with Retry-After).")
	return m.reg.Register(collectorFunc{
		descs: []*prometheus.Desc{slow, tooLarge, busy},
		collect: func(ch chan<- prometheus.Metric) {
			ch <- prometheus.MustNewConstMetric(slow, prometheus.CounterValue, float64(b.SlowRequests()))
			ch <- prometheus.MustNewConstMetric(tooLarge, prometheus.CounterValue, float64(b.TooLargeRequests()))
			ch <- prometheus.MustNewConstMetric(busy, prometheus.CounterValue, float64(b.BufferBusyRequests()))
		},
	})
}

// RegisterBreakers exposes the outbound client's circuit breakers, one per
// downstream host:port used since the start.
func (m *Metrics) RegisterBreakers(breakers func() []outbound.BreakerStatus) error {
	state := desc("outbound_breaker_state", "Circuit breaker per downstream host: 1 for its current state (closed, open, half_open), 0 for the others.", "host", "state")
	failures := desc("outbound_breaker_recent_failures", "Failures in the breaker's current window, per downstream host.", "host")
	states := []string{outbound.StateClosed, outbound.StateOpen, outbound.StateHalfOpen}
	return m.reg.Register(collectorFunc{
		descs: []*prometheus.Desc{state, failures},
		collect: func(ch chan<- prometheus.Metric) {
			for _, b := range breakers() {
				for _, s := range states {
					v := 0.0
					if b.State == s {
						v = 1
					}
					ch <- prometheus.MustNewConstMetric(state, prometheus.GaugeValue, v, b.Host, s)
				}
				ch <- prometheus.MustNewConstMetric(failures, prometheus.GaugeValue, float64(b.RecentFailures), b.Host)
			}
		},
	})
}

// RegisterLeaders exposes the leader roles this instance holds: 1 while it
// is the leader of the role, else 0.
func (m *Metrics) RegisterLeaders(roles map[string]func() bool) error {
	leader := desc("leader", "1 while this instance holds the leader role (billing, event_worker), else 0.", "role")
	return m.reg.Register(collectorFunc{
		descs: []*prometheus.Desc{leader},
		collect: func(ch chan<- prometheus.Metric) {
			for role, is := range roles {
				v := 0.0
				if is() {
					v = 1
				}
				ch <- prometheus.MustNewConstMetric(leader, prometheus.GaugeValue, v, role)
			}
		},
	})
}

// QueueOptions tune RegisterQueues.
type QueueOptions struct {
	// Timeout bounds the queries of one scrape (default 2 s).
	Timeout time.Duration
	// MaxAge is how long an answer is reused, so that several Prometheus
	// servers, or a scrape interval shorter than this, do not multiply the
	// queries (default 10 s).
	MaxAge time.Duration
	Logger *slog.Logger
	// PartlyPaidPastTermination counts the partly paid renewal invoices past
	// their termination day (renewal_partly_paid_past_termination). The
	// billing run gives it (renewal.Run.PartlyPaidPastTermination): it
	// knows the day, the billing clock and which orders are live. Nil: 0.
	PartlyPaidPastTermination func(context.Context) (int64, error)
}

// Every type and status the queues can hold: they are exposed as 0 when
// empty, so an alert on them sees a value rather than nothing.
var (
	eventTypes           = []string{"order_paid", "order_provisioned", "order_cancelled"}
	eventStatuses        = []string{"pending", "processing", "failed"}
	notificationChannels = []string{"webhook", "email"}
	notificationStatuses = []string{"pending", "failed"}
)

// RegisterQueues exposes the depth and the age of the oldest entry of the
// event queue (by type and status), of the notification queue (by channel
// and status) and of the pending refunds, read from the database at scrape
// time.
func (m *Metrics) RegisterQueues(db store.DB, o QueueOptions) error {
	q := &queueCollector{
		db: db, opts: o, cache: newScrapeCache("the queue statistics", o),
		eventDepth:  desc("event_queue_depth", "Events not done, by type and status (pending includes events waiting for a retry).", "type", "status"),
		eventAge:    desc("event_queue_oldest_age_seconds", "Age of the oldest event not done, by type and status; 0 when there is none.", "type", "status"),
		notifyDepth: desc("notification_queue_depth", "Notifications not sent, by channel and status.", "channel", "status"),
		notifyAge:   desc("notification_queue_oldest_age_seconds", "Age of the oldest notification not sent, by channel and status; 0 when there is none.", "channel", "status"),
		refundDepth: desc("refunds_pending", "Refunds waiting for the gateway to complete them or for an admin to record their outcome (ResolveRefund); their amounts stay reserved."),
		refundAge:   desc("refunds_pending_oldest_age_seconds", "Age of the oldest pending refund; 0 when there is none."),
		up:          desc("queue_stats_up", "1 when the last read of the queue statistics from the database succeeded, else 0."),
		partlyPaidDesc: desc("renewal_partly_paid_past_termination", "Renewal invoices partly paid and past their termination day ([billing].terminate_after_days) of services still running: "+
			"the billing run does not end them (cancelling would strand the money paid); an admin decides (GetRenewalOverview). 0 while the termination step is off."),
	}
	return m.reg.Register(q)
}

type queueCollector struct {
	db   store.DB
	opts QueueOptions

	eventDepth, eventAge, notifyDepth, notifyAge, refundDepth, refundAge, up, partlyPaidDesc *prometheus.Desc

	cache scrapeCache
	// What the last read found (under cache's lock).
	events     []store.QueueStat
	notes      []store.QueueStat
	refunds    store.QueueStat
	partlyPaid int64
}

func (q *queueCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- q.eventDepth
	ch <- q.eventAge
	ch <- q.notifyDepth
	ch <- q.notifyAge
	ch <- q.refundDepth
	ch <- q.refundAge
	ch <- q.up
	ch <- q.partlyPaidDesc
}

func (q *queueCollector) Collect(ch chan<- prometheus.Metric) {
	q.cache.collect(q.read, func(ok bool) {
		up := 0.0
		if ok {
			up = 1
			emitQueue(ch, q.eventDepth, q.eventAge, eventTypes, eventStatuses, q.events)
			emitQueue(ch, q.notifyDepth, q.notifyAge, notificationChannels, notificationStatuses, q.notes)
			ch <- prometheus.MustNewConstMetric(q.refundDepth, prometheus.GaugeValue, float64(q.refunds.Count))
			ch <- prometheus.MustNewConstMetric(q.refundAge, prometheus.GaugeValue, q.refunds.OldestAge.Seconds())
			ch <- prometheus.MustNewConstMetric(q.partlyPaidDesc, prometheus.GaugeValue, float64(q.partlyPaid))
		}
		ch <- prometheus.MustNewConstMetric(q.up, prometheus.GaugeValue, up)
	})
}

// read asks the database for every figure; they are kept only when all
// were read.
func (q *queueCollector) read(ctx context.Context) error {
	events, err := store.EventQueueStats(ctx, q.db)
	if err != nil {
		return err
	}
	notes, err := store.NotificationQueueStats(ctx, q.db)
	if err != nil {
		return err
	}
	refunds, err := store.PendingRefundStats(ctx, q.db)
	if err != nil {
		return err
	}
	var partly int64
	if q.opts.PartlyPaidPastTermination != nil {
		if partly, err = q.opts.PartlyPaidPastTermination(ctx); err != nil {
			return err
		}
	}
	q.events, q.notes, q.refunds, q.partlyPaid = events, notes, refunds, partly
	return nil
}

// emitQueue writes depth and age for every known (kind, status), 0 for the
// empty ones, plus any the database knows that the lists do not.
func emitQueue(ch chan<- prometheus.Metric, depth, age *prometheus.Desc, kinds, statuses []string, rows []store.QueueStat) {
	type key struct{ kind, status string }
	got := make(map[key]store.QueueStat, len(rows))
	for _, r := range rows {
		got[key{r.Kind, r.Status}] = r
	}
	emit := func(k key) {
		r := got[k]
		ch <- prometheus.MustNewConstMetric(depth, prometheus.GaugeValue, float64(r.Count), k.kind, k.status)
		ch <- prometheus.MustNewConstMetric(age, prometheus.GaugeValue, r.OldestAge.Seconds(), k.kind, k.status)
		delete(got, k)
	}
	for _, kind := range kinds {
		for _, status := range statuses {
			emit(key{kind, status})
		}
	}
	for k := range got {
		emit(k)
	}
}

// Replica is what the read replica's watcher reports (internal/replica).
type Replica interface {
	InUse() bool
	Lag() (time.Duration, bool)
}

// RegisterReplica exposes the read replica of [db].replica_url: whether
// the heavy reads go to it, its lag at the last check (no series while it
// cannot be measured: down, not a standby), and its pool's connections.
// With r nil (no replica configured) the families are described but have
// no series, so that an alert on them never fires where there is none.
func (m *Metrics) RegisterReplica(r Replica, pool *pgxpool.Pool) error {
	inUse := desc("db_replica_in_use", "1 while the heavy reads (exports, trends, stats, admins' payment lists) go to the read replica, 0 while they go to the primary because the replica lags past [db].replica_max_lag, is down or is not a standby. No series without [db].replica_url.")
	lag := desc("db_replica_lag_seconds", "How far the read replica was behind the primary at its last check (every second); no series while the check fails or cannot tell.")
	conns := desc("db_replica_pool_connections", "Connections of the read replica's pool, by state: acquired (in use), idle, constructing.", "state")
	return m.reg.Register(collectorFunc{
		descs: []*prometheus.Desc{inUse, lag, conns},
		collect: func(ch chan<- prometheus.Metric) {
			if r == nil {
				return
			}
			v := 0.0
			if r.InUse() {
				v = 1
			}
			ch <- prometheus.MustNewConstMetric(inUse, prometheus.GaugeValue, v)
			if l, ok := r.Lag(); ok {
				ch <- prometheus.MustNewConstMetric(lag, prometheus.GaugeValue, l.Seconds())
			}
			s := pool.Stat()
			ch <- prometheus.MustNewConstMetric(conns, prometheus.GaugeValue, float64(s.AcquiredConns()), "acquired")
			ch <- prometheus.MustNewConstMetric(conns, prometheus.GaugeValue, float64(s.IdleConns()), "idle")
			ch <- prometheus.MustNewConstMetric(conns, prometheus.GaugeValue, float64(s.ConstructingConns()), "constructing")
		},
	})
}
