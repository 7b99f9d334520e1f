package tracing

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
)

// InstrumentationName names paymentd's own tracers.
const InstrumentationName = "github.com/rustbill/paymentd"

// Tracing is the tracer provider and propagator of the process.
type Tracing struct {
	provider   trace.TracerProvider
	propagator propagation.TextMapPropagator
	shutdown   func(context.Context) error
}

// The defaults New applies to a zero option; config.Default() starts
// [tracing] from the same values.
const (
	DefaultEndpoint    = "127.0.0.1:4317"
	DefaultProtocol    = "grpc"
	DefaultServiceName = "paymentd"
)

// DefaultSampleRatio is the share of new traces config.Default() records.
// New does not apply it: a zero ratio is a valid setting (record none).
const DefaultSampleRatio = 1.0

// Options are what New builds tracing from: the export ([tracing], mapped
// by config.Tracing.Options) and what internal/app adds.
type Options struct {
	// Enabled: false makes New return Off().
	Enabled bool
	// Endpoint is the collector's host:port.
	Endpoint string
	// Protocol is grpc or http (OTLP over HTTP, path /v1/traces).
	Protocol string
	// Insecure sends without TLS.
	Insecure bool
	// SampleRatio is the share of new traces that are recorded (0 to 1).
	SampleRatio float64
	// ServiceName is the service.name of every span's resource.
	ServiceName string
	// Version is the service version recorded on every span's resource.
	Version string
	// Instance names this process (the cluster node id).
	Instance string
	Logger   *slog.Logger
	// Exporter replaces the OTLP exporter (tests record spans in memory).
	Exporter sdktrace.SpanExporter
}

// Off is tracing switched off: a no-op provider and no propagator.
func Off() *Tracing {
	return &Tracing{provider: noop.NewTracerProvider(), shutdown: func(context.Context) error { return nil }}
}

// New builds tracing as o says; Off() when it is not enabled. The
// exporter connects lazily: an unreachable collector is logged when spans
// are exported, it never stops the service.
func New(ctx context.Context, o Options) (*Tracing, error) {
	if !o.Enabled {
		return Off(), nil
	}
	o.Endpoint = cmp.Or(o.Endpoint, DefaultEndpoint)
	o.Protocol = cmp.Or(o.Protocol, DefaultProtocol)
	o.ServiceName = cmp.Or(o.ServiceName, DefaultServiceName)
	exp := o.Exporter
	if exp == nil {
		var err error
		switch o.Protocol {
		case "http":
			opts := []otlptracehttp.Option{otlptracehttp.WithEndpoint(o.Endpoint)}
			if o.Insecure {
				opts = append(opts, otlptracehttp.WithInsecure())
			}
			exp, err = otlptracehttp.New(ctx, opts...)
		default:
			opts := []otlptracegrpc.Option{otlptracegrpc.WithEndpoint(o.Endpoint)}
			if o.Insecure {
				opts = append(opts, otlptracegrpc.WithInsecure())
			}
			exp, err = otlptracegrpc.New(ctx, opts...)
		}
		if err != nil {
			return nil, fmt.Errorf("[tracing]: OTLP exporter: %w", err)
		}
	}
	attrs := []attribute.KeyValue{
		attribute.String("service.name", o.ServiceName),
		attribute.String("service.version", o.Version),
	}
	if o.Instance != "" {
		attrs = append(attrs, attribute.String("service.instance.id", o.Instance))
	}
	if h, err := os.Hostname(); err == nil {
		attrs = append(attrs, attribute.String("host.name", h))
	}
	// OTEL_RESOURCE_ATTRIBUTES and OTEL_SERVICE_NAME still apply (resource.Default),
	// the configuration's values win.
	res, err := resource.Merge(resource.Default(), resource.NewSchemaless(attrs...))
	if err != nil {
		res = resource.NewSchemaless(attrs...)
	}
	tp := sdktrace.NewTracerProvider(
		sdktrace.WithBatcher(exp),
		sdktrace.WithResource(res),
		sdktrace.WithSampler(sdktrace.ParentBased(sdktrace.TraceIDRatioBased(o.SampleRatio))),
	)
	if o.Logger != nil {
		log := o.Logger
		// The exporter reports its failures (collector unreachable) through
		// the global handler; there is only one, so the last service
		// started in a process gets them.
		otel.SetErrorHandler(otel.ErrorHandlerFunc(func(err error) {
			log.Warn("tracing: export failed", "err", err)
		}))
		log.Info("tracing on", "endpoint", o.Endpoint, "protocol", o.Protocol, "sample_ratio", o.SampleRatio)
	}
	return &Tracing{provider: tp, propagator: propagation.TraceContext{}, shutdown: tp.Shutdown}, nil
}

// Enabled reports whether spans are recorded and exported.
func (t *Tracing) Enabled() bool { return t.propagator != nil }

// Provider is the tracer provider (a no-op one when tracing is off).
func (t *Tracing) Provider() trace.TracerProvider { return t.provider }

// Tracer is paymentd's tracer.
func (t *Tracing) Tracer() trace.Tracer { return t.provider.Tracer(InstrumentationName) }

// Propagator is the W3C Trace Context propagator, nil when tracing is off
// (nothing is extracted from requests nor injected into outbound calls).
func (t *Tracing) Propagator() propagation.TextMapPropagator { return t.propagator }

// Shutdown exports what is buffered and stops the exporter.
func (t *Tracing) Shutdown(ctx context.Context) error {
	if err := t.shutdown(ctx); err != nil && !errors.Is(err, context.Canceled) {
		return fmt.Errorf("tracing shutdown: %w", err)
	}
	return nil
}
