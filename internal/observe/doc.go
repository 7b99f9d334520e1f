// Package observe ties logs, metrics and traces to the request path:
//
//	request ─▶ Middleware (outermost, before /health and the console):
//	             request id (X-Request-Id kept when well-formed, else new;
//	             echoed), a logging.Scope, a server span when tracing is on
//	             (a new trace linked to the caller's traceparent), and one
//	             access line per request that no RPC line covers
//	        ─▶ … limiter, rate limit, credential layers …
//	        ─▶ Interceptor (first of every service's interceptors):
//	             procedure, principal and the payment/order/invoice ids of
//	             the message into the Scope; the span named after the
//	             procedure; rpc_requests_total and rpc_duration_seconds;
//	             one "rpc" access line
//	        ─▶ otelconnect (when tracing is on) ─▶ policy ─▶ validation ─▶ handler
//
// StartCall is the plugin registry's CallObserver: a span and the
// plugin_call_* metrics per plugin function.
//
// Nothing here logs a header, a query string or a message body: credentials
// travel in headers, signatures and amounts in callback queries.
package observe
