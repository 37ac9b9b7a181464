package telemetry

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/mcpqueue/mcpqueue/broker"
	"github.com/mcpqueue/mcpqueue/taskstate"
)

// Keys of the W3C trace context, in HTTP headers, in a request's
// params._meta and in a job's Meta.
const (
	MetaTraceParent = "traceparent"
	MetaTraceState  = "tracestate"
)

// StartRequest starts the server span of one MCP request. Its parent is the
// trace context in params._meta (the MCP convention) or else in the HTTP
// headers (what an instrumented HTTP client sends); with neither it starts
// a trace. end ends the span. With tracing off it returns ctx as is.
func (t *Telemetry) StartRequest(ctx context.Context, h http.Header, method string, params json.RawMessage) (context.Context, func()) {
	if !t.tracing() {
		return ctx, func() {}
	}
	ctx = t.prop.Extract(ctx, propagation.HeaderCarrier(h))
	var p struct {
		Name string                     `json:"name"`
		Meta map[string]json.RawMessage `json:"_meta"`
	}
	_ = json.Unmarshal(params, &p) // best effort: the front end reports bad params
	ctx = t.prop.Extract(ctx, metaCarrier(p.Meta))
	name := method
	attrs := []attribute.KeyValue{attribute.String("mcp.method.name", method)}
	if p.Name != "" {
		name += " " + p.Name
		attrs = append(attrs, attribute.String("gen_ai.tool.name", p.Name))
	}
	ctx, span := t.tracer.Start(ctx, name, trace.WithSpanKind(trace.SpanKindServer), trace.WithAttributes(attrs...))
	return ctx, func() { span.End() }
}

// TraceRequest is StartRequest for an HTTP request: it returns r with the
// span in its context (r itself when tracing is off).
func (t *Telemetry) TraceRequest(r *http.Request, method string, params json.RawMessage) (*http.Request, func()) {
	if !t.tracing() {
		return r, func() {}
	}
	ctx, end := t.StartRequest(r.Context(), r.Header, method, params)
	return r.WithContext(ctx), end
}

// StartSpan starts an internal span under ctx's span, with attributes given
// as key, value pairs of strings. end records err (if not nil) and ends the
// span; calling it again does nothing.
func (t *Telemetry) StartSpan(ctx context.Context, name string, kv ...string) (context.Context, func(err error)) {
	if !t.tracing() {
		return ctx, func(error) {}
	}
	ctx, span := t.tracer.Start(ctx, name, trace.WithAttributes(pairs(kv)...))
	return ctx, endWith(span)
}

// Inject returns meta with the trace context of ctx's span added, so that
// the job carrying meta continues the trace. meta itself is not changed.
// Without a span (or with tracing off) it returns meta unchanged.
func (t *Telemetry) Inject(ctx context.Context, meta map[string]json.RawMessage) map[string]json.RawMessage {
	if !t.tracing() || !trace.SpanContextFromContext(ctx).IsValid() {
		return meta
	}
	out := make(map[string]json.RawMessage, len(meta)+2)
	for k, v := range meta {
		out[k] = v
	}
	delete(out, MetaTraceParent) // a stale parent must not survive a missing one
	delete(out, MetaTraceState)
	t.prop.Inject(ctx, metaCarrier(out))
	return out
}

// StartRun starts the span of one run of job on a worker, continuing the
// trace the job carries. end ends it.
func (t *Telemetry) StartRun(ctx context.Context, job *broker.Job, delivery int) (context.Context, func()) {
	if !t.tracing() {
		return ctx, func() {}
	}
	ctx = t.prop.Extract(ctx, metaCarrier(job.Meta))
	ctx, span := t.tracer.Start(ctx, "task.run "+job.Tool, trace.WithSpanKind(trace.SpanKindConsumer),
		trace.WithAttributes(
			attribute.String("mcpq.task.id", job.TaskID),
			attribute.String("gen_ai.tool.name", job.Tool),
			attribute.Int("mcpq.delivery", delivery),
		))
	return ctx, func() { span.End() }
}

// StartWrite starts the span of one write of a task record. end takes the
// write's error; taskstate.ErrSkip (nothing to change) is not one.
func (t *Telemetry) StartWrite(ctx context.Context, taskID string) (context.Context, func(err error)) {
	if !t.tracing() {
		return ctx, func(error) {}
	}
	ctx, end := t.StartSpan(ctx, "task.write", "mcpq.task.id", taskID)
	return ctx, func(err error) {
		if errors.Is(err, taskstate.ErrSkip) {
			err = nil
		}
		end(err)
	}
}

func endWith(span trace.Span) func(error) {
	return func(err error) {
		if err != nil {
			span.RecordError(err)
			span.SetStatus(codes.Error, err.Error())
		}
		span.End()
	}
}

func pairs(kv []string) []attribute.KeyValue {
	out := make([]attribute.KeyValue, 0, len(kv)/2)
	for i := 0; i+1 < len(kv); i += 2 {
		out = append(out, attribute.String(kv[i], kv[i+1]))
	}
	return out
}

// metaCarrier reads and writes trace context in a _meta or job Meta map,
// where each value is a JSON string.
type metaCarrier map[string]json.RawMessage

func (m metaCarrier) Get(key string) string {
	var s string
	if raw, ok := m[key]; ok && json.Unmarshal(raw, &s) == nil {
		return s
	}
	return ""
}

func (m metaCarrier) Set(key, value string) {
	if m != nil {
		m[key], _ = json.Marshal(value)
	}
}

func (m metaCarrier) Keys() []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}
