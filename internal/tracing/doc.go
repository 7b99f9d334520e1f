// Package tracing sets up OpenTelemetry tracing from [tracing]: an OTLP
// exporter (gRPC or HTTP), a batching tracer provider sampling a share of
// new traces, and the W3C Trace Context propagator. It is off by default;
// off, the provider is a no-op, nothing is exported, and no traceparent
// header is sent anywhere.
//
// The provider is handed to whoever starts spans (the edge middleware, the
// otelconnect interceptor, the plugin registry, the outbound client); the
// process-wide otel globals are left alone, so that tests running several
// services side by side do not share one.
package tracing
