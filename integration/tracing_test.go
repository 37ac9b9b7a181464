package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/mcpqueue/mcpqueue/backend"
	"github.com/mcpqueue/mcpqueue/consumer"
	"github.com/mcpqueue/mcpqueue/integration/harness"
	"github.com/mcpqueue/mcpqueue/internal/cli"
	"github.com/mcpqueue/mcpqueue/internal/testenv"
	"github.com/mcpqueue/mcpqueue/mcpfront"
	"github.com/mcpqueue/mcpqueue/producer"
	"github.com/mcpqueue/mcpqueue/telemetry"
)

// tracedSystem is a front end and a worker in this process, on an embedded
// NATS, each on its own connections, sharing one TracerProvider that
// records every ended span.
type tracedSystem struct {
	url   string
	spans *tracetest.InMemoryExporter
	tp    *sdktrace.TracerProvider
	logs  *harness.SyncBuffer // the worker's and the api's log lines
	// calls receives the trace context of each HTTP request a "traced"
	// handler makes, as the server it calls reads it.
	calls chan trace.SpanContext
}

func newTracedSystem(t *testing.T) *tracedSystem {
	t.Helper()
	spans := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(spans))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	tel := telemetry.New(&telemetry.Config{Registerer: prometheus.NewRegistry(), TracerProvider: tp,
		MessagingSystem: "nats", Destination: func(_, tool string) string { return "dest." + tool }})
	logs := &harness.SyncBuffer{}
	log := zerolog.New(logs)

	// A server a handler calls, reading the trace context as an
	// instrumented server does: through the global propagator.
	calls := make(chan trace.SpanContext, 4)
	callee := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls <- trace.SpanContextFromContext(otel.GetTextMapPropagator().Extract(r.Context(), propagation.HeaderCarrier(r.Header)))
	}))
	t.Cleanup(callee.Close)

	n := testenv.StartNATS(t)
	ws := n.Connect(t) // the worker's connection; the front end has its own
	mux := consumer.NewMux()
	consumer.Handle(mux, consumer.Tool{Name: "echo", Description: "echoes text"},
		func(ctx context.Context, c *consumer.Call[struct {
			Text string `json:"text"`
		}]) (*consumer.Result, error) {
			return consumer.TextResult(c.Args.Text), nil
		})
	// Handler code as users write it: a span from the global tracer and an
	// HTTP call that carries the trace context, as otelhttp's transport does.
	consumer.Handle(mux, consumer.Tool{Name: "traced", Description: "makes a span and an HTTP call"},
		func(ctx context.Context, c *consumer.Call[struct{}]) (*consumer.Result, error) {
			ctx, span := otel.Tracer("handler-code").Start(ctx, "handler.work")
			defer span.End()
			req, _ := http.NewRequestWithContext(ctx, http.MethodGet, callee.URL, nil)
			otel.GetTextMapPropagator().Inject(ctx, propagation.HeaderCarrier(req.Header))
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				return nil, err
			}
			resp.Body.Close()
			c.Logger().Info().Msg("handler log line")
			return consumer.TextResult("ok"), nil
		})
	w := consumer.New(backend.Backend{Queue: ws.Queue, Store: ws.Store, Catalog: ws.Store, Bus: ws.Bus}, &consumer.Config{Concurrency: 2, ShutdownGrace: 100 * time.Millisecond, Telemetry: tel, Logger: log.With().Str("service", "worker").Logger()})
	testenv.RunWorker(t, w, mux)

	fs := n.Connect(t)
	fq, fst, fbus := fs.Queue, fs.Store, fs.Bus
	prod := producer.New(fst, producer.QueueExecutor{Queue: fq, Bus: fbus}, &producer.Config{Telemetry: tel, Logger: log.With().Str("service", "api").Logger()})
	front := mcpfront.New(prod, backend.Backend{Store: fst, Catalog: fst, Bus: fbus}, &mcpfront.Config{StateKey: []byte("k"), Telemetry: tel, InlineWait: -1}) // the test follows a task
	hs := httptest.NewServer(front)
	t.Cleanup(hs.Close)
	// The front end reads the worker's tools through its own connection.
	testenv.WaitTools(t, fst, mux)
	return &tracedSystem{url: hs.URL, spans: spans, tp: tp, logs: logs, calls: calls}
}

// trace waits until the worker's run span of the task has ended, then
// returns the spans of traceID by name (the last of each name) and the
// task.write spans apart.
func (s *tracedSystem) trace(t *testing.T, traceID trace.TraceID, tool string) (byName map[string]tracetest.SpanStub, writes []tracetest.SpanStub) {
	t.Helper()
	harness.Eventually(t, 10*time.Second, func() (bool, string) {
		byName, writes = map[string]tracetest.SpanStub{}, nil
		for _, sp := range s.spans.GetSpans() {
			if sp.SpanContext.TraceID() != traceID {
				continue
			}
			if sp.Name == "task.write" {
				writes = append(writes, sp)
				continue
			}
			byName[sp.Name] = sp
		}
		_, ok := byName["task.run "+tool]
		return ok, fmt.Sprintf("no ended task.run span in trace %s; have %d spans", traceID, len(s.spans.GetSpans()))
	})
	return byName, writes
}

// One trace covers a task from the client's call through the api, the
// queue and the worker to its state writes, with each span the child of
// the one that caused it. The client's trace context comes in the MCP way
// (params._meta.traceparent) or as an HTTP header.
func TestTracingSpansAPIAndWorker(t *testing.T) {
	t.Parallel()
	s := newTracedSystem(t)
	c := harness.NewClient(s.url, true)

	for _, via := range []string{"_meta", "header"} {
		t.Run(via, func(t *testing.T) {
			traceID, _ := trace.TraceIDFromHex(strings.Repeat(map[string]string{"_meta": "a1", "header": "b2"}[via], 16))
			clientSpan, _ := trace.SpanIDFromHex("00f067aa0ba902b7")
			traceparent := fmt.Sprintf("00-%s-%s-01", traceID, clientSpan)

			var id string
			if via == "header" {
				hc := harness.NewClient(s.url, true)
				hc.HTTP.Transport = headerTransport{key: "traceparent", value: traceparent}
				id = hc.StartTask(t, "echo", map[string]any{"text": "hi"})
			} else {
				id = startTaskWithMeta(t, s.url, map[string]any{"traceparent": traceparent})
			}
			c.WaitStatus(t, id, 10*time.Second, "completed")

			spans, writes := s.trace(t, traceID, "echo")
			api, create, run := spans["tools/call echo"], spans["task.create"], spans["task.run echo"]
			for name, sp := range map[string]tracetest.SpanStub{"tools/call echo": api, "task.create": create, "task.run echo": run} {
				if !sp.SpanContext.IsValid() {
					t.Fatalf("no %q span in the client's trace; spans: %v", name, names(s.spans.GetSpans()))
				}
			}
			if api.Parent.SpanID() != clientSpan || !api.Parent.IsRemote() || api.SpanKind != trace.SpanKindServer {
				t.Errorf("api span: parent %s (remote %v), kind %v; want the client's span %s, server", api.Parent.SpanID(), api.Parent.IsRemote(), api.SpanKind, clientSpan)
			}
			if create.Parent.SpanID() != api.SpanContext.SpanID() {
				t.Errorf("task.create parent %s, want the api span %s", create.Parent.SpanID(), api.SpanContext.SpanID())
			}
			// The job carried the trace across the queue.
			if run.Parent.SpanID() != create.SpanContext.SpanID() || !run.Parent.IsRemote() || run.SpanKind != trace.SpanKindConsumer {
				t.Errorf("task.run parent %s (remote %v), kind %v; want task.create %s, consumer", run.Parent.SpanID(), run.Parent.IsRemote(), run.SpanKind, create.SpanContext.SpanID())
			}
			if !hasAttr(run, "mcpq.task.id", id) || !hasAttr(run, "mcpq.task.status", "completed") {
				t.Errorf("task.run attributes %v: want the task id %s and status completed", run.Attributes, id)
			}
			// Producer and consumer of the job, in the messaging semantic
			// conventions; the MCP attributes on all three.
			if create.SpanKind != trace.SpanKindProducer {
				t.Errorf("task.create kind %v, want producer", create.SpanKind)
			}
			for sp, op := range map[*tracetest.SpanStub]string{&create: "send", &run: "process"} {
				for k, v := range map[string]string{"messaging.system": "nats", "messaging.destination.name": "dest.echo",
					"messaging.operation.type": op, "messaging.message.id": id, "mcp.method.name": "tools/call", "gen_ai.tool.name": "echo"} {
					if !hasAttr(*sp, k, v) {
						t.Errorf("%s: no attribute %s=%s in %v", sp.Name, k, v, sp.Attributes)
					}
				}
			}
			for k, v := range map[string]string{"mcp.method.name": "tools/call", "gen_ai.tool.name": "echo", "mcp.protocol.version": "2026-07-28"} {
				if !hasAttr(api, k, v) {
					t.Errorf("%s: no attribute %s=%s in %v", api.Name, k, v, api.Attributes)
				}
			}
			var apiWrites, workerWrites int
			for _, w := range writes {
				switch w.Parent.SpanID() {
				case create.SpanContext.SpanID():
					apiWrites++
				case run.SpanContext.SpanID():
					workerWrites++
				}
				if !hasAttr(w, "mcpq.task.id", id) {
					t.Errorf("task.write of another task in this trace: %v", w.Attributes)
				}
			}
			// The api writes the record once; the worker writes the outcome,
			// which for a task as short as echo carries its take too (lazy
			// take), or the take and then the outcome.
			if apiWrites != 1 || workerWrites < 1 {
				t.Errorf("task.write spans: %d under task.create (want 1), %d under task.run (want at least 1)", apiWrites, workerWrites)
			}
		})
	}
}

// Handler code that uses the global OpenTelemetry API (otel.Tracer, the
// global propagator, as otelhttp does) joins the task's trace once the
// binaries' SetGlobalTracing ran, and the task's log lines carry its trace
// id. Not parallel: it sets the process's global tracer provider.
func TestTracingHandlerSpans(t *testing.T) {
	s := newTracedSystem(t)
	prevTP, prevProp := otel.GetTracerProvider(), otel.GetTextMapPropagator()
	cli.SetGlobalTracing(s.tp)
	t.Cleanup(func() { otel.SetTracerProvider(prevTP); otel.SetTextMapPropagator(prevProp) })

	c := harness.NewClient(s.url, true)
	traceID, _ := trace.TraceIDFromHex(strings.Repeat("c3", 16))
	hc := harness.NewClient(s.url, true)
	hc.HTTP.Transport = headerTransport{key: "traceparent", value: fmt.Sprintf("00-%s-00f067aa0ba902b7-01", traceID)}
	id := hc.StartTask(t, "traced", map[string]any{})
	c.WaitStatus(t, id, 10*time.Second, "completed")

	spans, _ := s.trace(t, traceID, "traced")
	run, work := spans["task.run traced"], spans["handler.work"]
	if !work.SpanContext.IsValid() {
		t.Fatalf("no handler.work span in the task's trace; spans: %v", names(s.spans.GetSpans()))
	}
	if work.Parent.SpanID() != run.SpanContext.SpanID() {
		t.Errorf("handler.work parent %s, want task.run %s", work.Parent.SpanID(), run.SpanContext.SpanID())
	}
	select {
	case got := <-s.calls:
		if got.TraceID() != traceID || got.SpanID() != work.SpanContext.SpanID() {
			t.Errorf("the handler's HTTP call carried trace %s span %s, want %s span %s", got.TraceID(), got.SpanID(), traceID, work.SpanContext.SpanID())
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the handler made no HTTP call")
	}
	// Every log line of the task, the api's and the worker's, the handler's
	// own included, leads to the trace.
	for _, msg := range []string{"task created", "task running", "handler log line", "task finished"} {
		var line map[string]any
		for _, l := range strings.Split(s.logs.String(), "\n") {
			if strings.Contains(l, `"message":"`+msg+`"`) && strings.Contains(l, id) {
				_ = json.Unmarshal([]byte(l), &line)
			}
		}
		if line == nil {
			t.Errorf("no %q log line of task %s:\n%s", msg, id, s.logs.String())
		} else if line["trace_id"] != traceID.String() {
			t.Errorf("%q log line: trace_id %v, want %s", msg, line["trace_id"], traceID)
		}
	}
}

// The same through the real binaries: api and worker export spans to
// standard output (OTEL_TRACES_EXPORTER=stdout); the demo tool's own
// "render page" span, made with otel.Tracer, is a child of the worker's
// task.run span in the client's trace, and the worker's log lines of the
// task carry the trace id.
func TestTracingBinaries(t *testing.T) {
	t.Parallel()
	b := harness.Build(t)
	prefix := "ittracebin"
	be := harness.NewBackend(t, b, "nats", prefix)
	env := []string{"OTEL_TRACES_EXPORTER=stdout", "OTEL_BSP_SCHEDULE_DELAY=100"}
	url, _ := harness.APILogged(t, b, be, prefix, "api", "", env)
	w := harness.WorkerEnv(t, harness.LogDir(t), b.Worker, "worker", env, be, prefix)

	traceID, _ := trace.TraceIDFromHex(strings.Repeat("d4", 16))
	hc := harness.NewClient(url, true)
	hc.HTTP.Transport = headerTransport{key: "traceparent", value: fmt.Sprintf("00-%s-00f067aa0ba902b7-01", traceID)}
	id := hc.StartTask(t, "render_report", map[string]any{"title": "traced", "pages": 1})
	hc.WaitStatus(t, id, 20*time.Second, "completed")

	type stub struct {
		Name                string
		SpanContext, Parent struct{ TraceID, SpanID string }
	}
	var run, page stub
	harness.Eventually(t, 20*time.Second, func() (bool, string) {
		for _, l := range strings.Split(w.Output(), "\n") {
			var sp stub
			if !strings.HasPrefix(l, `{"Name":`) || json.Unmarshal([]byte(l), &sp) != nil || sp.SpanContext.TraceID != traceID.String() {
				continue
			}
			switch sp.Name {
			case "task.run render_report":
				run = sp
			case "render page":
				page = sp
			}
		}
		return run.Name != "" && page.Name != "", "the worker has not exported both spans of the task yet"
	})
	if page.Parent.SpanID != run.SpanContext.SpanID {
		t.Errorf("render page parent %s, want task.run %s", page.Parent.SpanID, run.SpanContext.SpanID)
	}
	var logged bool
	for _, l := range strings.Split(w.Output(), "\n") {
		var line struct {
			Message string `json:"message"`
			Task    string `json:"task"`
			TraceID string `json:"trace_id"`
			SpanID  string `json:"span_id"`
		}
		if json.Unmarshal([]byte(l), &line) == nil && line.Message == "task running" && line.Task == id {
			logged = line.TraceID == traceID.String() && line.SpanID == run.SpanContext.SpanID
		}
	}
	if !logged {
		t.Errorf("the worker's \"task running\" line does not carry trace %s span %s:\n%s", traceID, run.SpanContext.SpanID, w.Output())
	}
}

func startTaskWithMeta(t *testing.T, url string, extra map[string]any) string {
	t.Helper()
	meta := map[string]any{
		"io.modelcontextprotocol/protocolVersion":    "2026-07-28",
		"io.modelcontextprotocol/clientCapabilities": map[string]any{"extensions": map[string]any{"io.modelcontextprotocol/tasks": map[string]any{}}},
	}
	for k, v := range extra {
		meta[k] = v
	}
	body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "method": "tools/call",
		"params": map[string]any{"name": "echo", "arguments": map[string]any{"text": "hi"}, "_meta": meta}})
	req, _ := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
	for k, v := range map[string]string{"Content-Type": "application/json", "Accept": "application/json, text/event-stream",
		"MCP-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/call", "Mcp-Name": "echo"} {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out struct {
		Result struct {
			TaskID string `json:"taskId"`
		} `json:"result"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil || out.Result.TaskID == "" {
		t.Fatalf("tools/call: HTTP %d, %v, %+v", resp.StatusCode, err, out)
	}
	return out.Result.TaskID
}

type headerTransport struct{ key, value string }

func (h headerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set(h.key, h.value)
	return http.DefaultTransport.RoundTrip(r)
}

func hasAttr(sp tracetest.SpanStub, key, value string) bool {
	for _, a := range sp.Attributes {
		if string(a.Key) == key && a.Value.String() == value {
			return true
		}
	}
	return false
}

func names(spans tracetest.SpanStubs) []string {
	out := make([]string, len(spans))
	for i, sp := range spans {
		out[i] = sp.Name + "@" + sp.SpanContext.TraceID().String()
	}
	return out
}
