package telemetry

import (
	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
)

// Config says where metrics and spans go. A nil Config is valid: no
// metrics, no spans.
type Config struct {
	// Registerer receives the collectors (nil: no metrics).
	Registerer prometheus.Registerer
	// TracerProvider makes the spans (nil or a noop provider: no spans,
	// and no trace work at all on the hot paths).
	TracerProvider trace.TracerProvider
	// MessagingSystem is the messaging.system of the enqueue and run spans
	// ("nats", "redis"; "" leaves the attribute out), and Destination, if
	// set, the messaging.destination.name of a job of this kind and tool
	// (the NATS subject or Asynq queue its jobs go to).
	MessagingSystem string
	Destination     func(kind, tool string) string
}

// Telemetry is one process's metrics and tracer.
type Telemetry struct {
	m      *metrics     // nil: no metrics
	tracer trace.Tracer // nil: tracing off
	prop   propagation.TextMapPropagator
	system string
	dest   func(kind, tool string) string
}

// Propagator is the propagation the spans follow: W3C trace context and
// W3C baggage, in HTTP headers, in params._meta and in a job's Meta. The
// binaries make it the process's global one too (internal/cli.SetGlobalTracing).
func Propagator() propagation.TextMapPropagator {
	return propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{})
}

// instrumentation names the tracer (the OpenTelemetry scope).
const instrumentation = "github.com/mcpqueue/mcpqueue"

// New returns the telemetry of one process. Register it once per registry.
func New(cfg *Config) *Telemetry {
	var c Config
	if cfg != nil {
		c = *cfg
	}
	t := &Telemetry{prop: Propagator(), system: c.MessagingSystem, dest: c.Destination}
	if c.Registerer != nil {
		t.m = newMetrics(c.Registerer)
	}
	if tp := c.TracerProvider; tp != nil {
		if _, off := tp.(noop.TracerProvider); !off {
			t.tracer = tp.Tracer(instrumentation)
		}
	}
	return t
}

// tracing reports whether spans are being made.
func (t *Telemetry) tracing() bool { return t != nil && t.tracer != nil }
