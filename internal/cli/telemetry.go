package cli

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/rs/zerolog"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/exporters/stdout/stdouttrace"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/mcpqueue/mcpqueue/backend"
	"github.com/mcpqueue/mcpqueue/broker"
	"github.com/mcpqueue/mcpqueue/taskstate"
	"github.com/mcpqueue/mcpqueue/telemetry"
)

// TracerProvider builds what --otel-exporter asks for: none (a no-op
// provider: tracing costs nothing), stdout (spans as JSON on standard
// output) or otlp (OTLP over HTTP; endpoint, headers and TLS from the
// OTEL_EXPORTER_OTLP_* environment, default http://localhost:4318). The
// service name is mcpqueue-<service> unless OTEL_SERVICE_NAME says
// otherwise; sampling follows OTEL_TRACES_SAMPLER (default: always, or as
// the caller's trace says). shutdown flushes buffered spans.
func (o *Options) TracerProvider(ctx context.Context, service string) (tp trace.TracerProvider, shutdown func(context.Context) error, err error) {
	var exp sdktrace.SpanExporter
	switch o.OTelExporter {
	case "", "none":
		return noop.NewTracerProvider(), func(context.Context) error { return nil }, nil
	case "stdout", "console":
		exp, err = stdouttrace.New(stdouttrace.WithWriter(os.Stdout))
	case "otlp":
		exp, err = otlptracehttp.New(ctx)
	default:
		return nil, nil, fmt.Errorf("cli: unknown --otel-exporter %q (use none, stdout or otlp)", o.OTelExporter)
	}
	if err != nil {
		return nil, nil, fmt.Errorf("cli: --otel-exporter %s: %w", o.OTelExporter, err)
	}
	res, err := resource.New(ctx,
		resource.WithAttributes(attribute.String("service.name", "mcpqueue-"+service)),
		resource.WithFromEnv(), // OTEL_SERVICE_NAME, OTEL_RESOURCE_ATTRIBUTES win
		resource.WithTelemetrySDK(),
	)
	if err != nil && res == nil {
		return nil, nil, fmt.Errorf("cli: trace resource: %w", err)
	}
	p := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res))
	return p, p.Shutdown, nil
}

// SetGlobalTracing makes tp and telemetry.Propagator (W3C trace context
// and baggage) the process's OpenTelemetry globals, so that handler code
// using otel.Tracer, and instrumented clients (otelhttp and the like) that
// read the global propagator, join the task's trace and pass it on.
// worker.Main and api call it with the provider of TracerProvider; a
// program with an OpenTelemetry setup of its own need not.
func SetGlobalTracing(tp trace.TracerProvider) {
	otel.SetTracerProvider(tp)
	otel.SetTextMapPropagator(telemetry.Propagator())
}

// Telemetry is the telemetry of a process on b: metrics in reg, spans from
// tp, the messaging attributes of b's broker (b.Messaging).
func Telemetry(b *backend.Backend, reg prometheus.Registerer, tp trace.TracerProvider) *telemetry.Telemetry {
	var dest func(kind, tool string) string
	if d := b.Messaging.Destination; d != nil {
		dest = func(kind, tool string) string { return d((&broker.Job{Kind: kind, Tool: tool}).Route()) }
	}
	return telemetry.New(&telemetry.Config{Registerer: reg, TracerProvider: tp, MessagingSystem: b.Messaging.System, Destination: dest})
}

// QueueDepth reads the depth of b's queue for telemetry.WatchQueue; it is
// nil when the broker cannot tell (its Queue is no broker.Depth).
func QueueDepth(b *backend.Backend) telemetry.DepthFunc {
	d, ok := b.Queue.(broker.Depth)
	if !ok {
		return nil
	}
	return func(ctx context.Context, routes []string) (map[string]telemetry.QueueDepth, error) {
		by, err := d.Depth(ctx, routes)
		if err != nil {
			return nil, err
		}
		out := make(map[string]telemetry.QueueDepth, len(by))
		for r, td := range by {
			out[r] = telemetry.QueueDepth{Pending: td.Pending, InFlight: td.InFlight}
		}
		return out, nil
	}
}

// NewRegistry is a Prometheus registry with the Go runtime and process
// collectors.
func NewRegistry() *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return reg
}

// AdminMux serves /healthz (alive), /readyz (every check passes) and
// /metrics (reg).
func AdminMux(reg *prometheus.Registry, checks ...telemetry.Check) *http.ServeMux {
	mux := http.NewServeMux()
	mux.Handle("/healthz", telemetry.Healthz())
	mux.Handle("/readyz", telemetry.Readyz(3*time.Second, checks...))
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	return mux
}

// Checks are the readiness checks of the backend: the broker answers (when
// its queue can tell its depth) and the store answers a read.
func Checks(b *backend.Backend) []telemetry.Check {
	var out []telemetry.Check
	if d, ok := b.Queue.(broker.Depth); ok {
		out = append(out, telemetry.Check{Name: "broker", Fn: func(ctx context.Context) error {
			_, err := d.Depth(ctx, nil)
			return err
		}})
	}
	out = append(out, telemetry.Check{Name: "store", Fn: func(ctx context.Context) error {
		// A random id: not found proves the store answered.
		if _, err := b.Store.Get(ctx, taskstate.NewID()); !errors.Is(err, taskstate.ErrNotFound) {
			return err
		}
		return nil
	}})
	return out
}

// FlushSpans sends the spans still buffered, within a bound.
func FlushSpans(flush func(context.Context) error, log zerolog.Logger) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := flush(ctx); err != nil {
		log.Warn().Err(err).Msg("flushing trace spans")
	}
}
