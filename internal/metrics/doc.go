// Package metrics is paymentd's Prometheus instrumentation: one registry per
// process (never the global default one, so that tests running several
// services side by side do not collide), the counters and histograms the
// request path and the payment domain feed, and collectors that read the
// state of the pool, the limiter, the breakers, the leader roles and the
// queues when Prometheus scrapes.
//
//	request ─▶ observe middleware ─▶ RPC interceptor ─▶ payment domain ─▶ plugin registry
//	             │ http_requests         │ rpc_requests      │ payment_transitions   │ plugin_call_*
//	             │                       │ rpc_duration      │ callbacks, refunds    │
//	             ▼                       ▼                   ▼                       ▼
//	                        Metrics (its own prometheus.Registry)
//	                                     ▲
//	  scrape ─▶ collectors: db pool, concurrency limiter, breakers, leaders,
//	            event and notification queues (one cached query, 2 s timeout)
//
// docs/operations.md lists every family and the alerts worth having. Money
// is counted in cents: a counter is a float64, exact up to 2^53 cents, and
// never used for anything but monitoring.
package metrics
