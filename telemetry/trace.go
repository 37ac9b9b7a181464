package telemetry

import (
	"context"
	"encoding/json"
	"net/http"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// Keys of the W3C trace context (and baggage), in HTTP headers, in a
// request's params._meta and in a job's Meta.
const (
	MetaTraceParent = "traceparent"
	MetaTraceState  = "tracestate"
	MetaBaggage     = "baggage"
)

// Where the server span finds the protocol version and the session.
const (
	headerVersion = "MCP-Protocol-Version"
	metaVersion   = "io.modelcontextprotocol/protocolVersion"
	headerSession = "Mcp-Session-Id"
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
	version := h.Get(headerVersion)
	if v := metaCarrier(p.Meta).Get(metaVersion); v != "" {
		version = v
	}
	if version != "" {
		attrs = append(attrs, attribute.String("mcp.protocol.version", version))
	}
	if sid := h.Get(headerSession); sid != "" {
		attrs = append(attrs, attribute.String("mcp.session.id", sid))
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
	delete(out, MetaBaggage)
	t.prop.Inject(ctx, metaCarrier(out))
	return out
}

// StartCreate starts the producer span of creating a task: its record
// written and its job sent to the queue (the job carries this span's trace
// context, see Inject). kind and tool are the job's ("" or "tool", or
// "prompt"; the tool or prompt name). end records err and ends it.
func (t *Telemetry) StartCreate(ctx context.Context, taskID, kind, tool string) (context.Context, func(err error)) {
	if !t.tracing() {
		return ctx, func(error) {}
	}
	attrs := append(t.messaging(taskID, kind, tool, "send"), attribute.String("mcpq.task.id", taskID))
	ctx, span := t.tracer.Start(ctx, "task.create", trace.WithSpanKind(trace.SpanKindProducer), trace.WithAttributes(attrs...))
	return ctx, endWith(span)
}

// StartRun starts the consumer span of one run of a task's job on a
// worker: kind and tool as for StartCreate, delivery the broker's count of
// deliveries (1 the first time), and meta the job's Meta, whose trace
// context (see Inject) the span continues. end ends it.
func (t *Telemetry) StartRun(ctx context.Context, taskID, kind, tool string, delivery int, meta map[string]json.RawMessage) (context.Context, func()) {
	if !t.tracing() {
		return ctx, func() {}
	}
	ctx = t.prop.Extract(ctx, metaCarrier(meta))
	attrs := append(t.messaging(taskID, kind, tool, "process"),
		attribute.String("mcpq.task.id", taskID),
		attribute.Int("mcpq.delivery", delivery))
	ctx, span := t.tracer.Start(ctx, "task.run "+tool, trace.WithSpanKind(trace.SpanKindConsumer), trace.WithAttributes(attrs...))
	return ctx, func() { span.End() }
}

// messaging is the messaging and MCP attributes of the job of a task.
func (t *Telemetry) messaging(taskID, kind, tool, op string) []attribute.KeyValue {
	method := "tools/call"
	if kind == "prompt" {
		method = "prompts/get"
	}
	attrs := []attribute.KeyValue{
		attribute.String("messaging.operation.type", op),
		attribute.String("messaging.operation.name", op),
		attribute.String("messaging.message.id", taskID),
		attribute.String("mcp.method.name", method),
		attribute.String("gen_ai.tool.name", tool),
	}
	if t.system != "" {
		attrs = append(attrs, attribute.String("messaging.system", t.system))
	}
	if t.dest != nil {
		attrs = append(attrs, attribute.String("messaging.destination.name", t.dest(kind, tool)))
	}
	return attrs
}

// LogFields are the trace_id and span_id of ctx's span as log fields (for
// zerolog's Fields), or nil without a span: every log line of a task then
// leads to its trace.
func LogFields(ctx context.Context) map[string]any {
	sc := trace.SpanContextFromContext(ctx)
	if !sc.IsValid() {
		return nil
	}
	return map[string]any{"trace_id": sc.TraceID().String(), "span_id": sc.SpanID().String()}
}

// StartWrite starts the span of one write of a task record. end takes the
// write's error: nil for a write that had nothing to change.
func (t *Telemetry) StartWrite(ctx context.Context, taskID string) (context.Context, func(err error)) {
	return t.StartSpan(ctx, "task.write", "mcpq.task.id", taskID)
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
