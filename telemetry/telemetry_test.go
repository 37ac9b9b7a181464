package telemetry_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/prometheus/client_golang/prometheus/testutil"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/mcpqueue/mcpqueue/telemetry"
)

// A nil *Telemetry, and one with a no-op provider, do nothing and change
// nothing: the hooks are called unconditionally on the hot paths.
func TestOffIsInert(t *testing.T) {
	t.Parallel()
	for name, tel := range map[string]*telemetry.Telemetry{"nil": nil, "noop": telemetry.New(&telemetry.Config{TracerProvider: noop.NewTracerProvider()})} {
		ctx := context.Background()
		meta := map[string]json.RawMessage{"traceparent": json.RawMessage(`"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"`)}
		if got, end := tel.StartRequest(ctx, http.Header{}, "tools/call", nil); got != ctx {
			t.Errorf("%s: StartRequest changed the context", name)
		} else {
			end()
		}
		if got := tel.Inject(ctx, meta); reflect.ValueOf(got).UnsafePointer() != reflect.ValueOf(meta).UnsafePointer() {
			t.Errorf("%s: Inject changed meta: %v", name, got)
		}
		r := httptest.NewRequest(http.MethodPost, "/mcp", nil)
		if got, end := tel.TraceRequest(r, "tools/call", nil); got != r {
			t.Errorf("%s: TraceRequest returned another request", name)
		} else {
			end()
		}
		_, endRun := tel.StartRun(ctx, "t", "tool", "x", 1, meta)
		endRun()
		_, endWrite := tel.StartWrite(ctx, "t")
		endWrite(errors.New("x"))
		tel.TaskCreated("x")
		tel.TaskFinished(ctx, "x", "completed")
		tel.TaskStarted("x", 2, time.Second)
		tel.TaskRan("x", time.Second)
		tel.InputWaited("x", time.Second)
		tel.LeaseExpired("x")
		tel.WatchQueue(nil, nil)
		h := http.NotFoundHandler()
		if name == "nil" && tel.InstrumentHTTP(h) == nil {
			t.Errorf("nil: InstrumentHTTP lost the handler")
		}
	}
}

func TestCounters(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewRegistry()
	tel := telemetry.New(&telemetry.Config{Registerer: reg})
	tel.TaskCreated("a")
	tel.TaskCreated("a")
	tel.TaskStarted("a", 1, 250*time.Millisecond) // first run: pickup latency
	tel.TaskStarted("a", 2, time.Hour)            // a re-run: a redelivery, no pickup
	tel.TaskRan("a", time.Second)
	tel.InputWaited("a", 3*time.Second)
	tel.TaskFinished(context.Background(), "a", "failed")
	tel.LeaseExpired("a")
	tel.FairShareDeferred("a", "tenant")
	tel.FairShareDeferred("a", "principal")
	tel.FairShareDeferred("a", "principal")

	want := `
# HELP mcpq_task_redeliveries_total Handler starts of a task that had run before (attempt > 1: a lost worker, a lost lease, a failed outcome write), by tool.
# TYPE mcpq_task_redeliveries_total counter
mcpq_task_redeliveries_total{tool="a"} 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "mcpq_task_redeliveries_total"); err != nil {
		t.Error(err)
	}
	for series, n := range map[string]int{
		"mcpq_tasks_created_total": 1, "mcpq_tasks_finished_total": 1, "mcpq_task_lease_expiries_total": 1,
		"mcpq_task_pickup_seconds": 1, "mcpq_task_run_seconds": 1, "mcpq_task_input_wait_seconds": 1,
	} {
		if got, err := testutil.GatherAndCount(reg, series); err != nil || got != n {
			t.Errorf("%s: %d series (%v), want %d", series, got, err, n)
		}
	}
	rec := httptest.NewRecorder()
	promhttp.HandlerFor(reg, promhttp.HandlerOpts{}).ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	for _, line := range []string{`mcpq_tasks_created_total{tool="a"} 2`, `mcpq_task_pickup_seconds_sum{tool="a"} 0.25`, `mcpq_task_pickup_seconds_count{tool="a"} 1`,
		`mcpq_tasks_finished_total{status="failed",tool="a"} 1`, `mcpq_task_input_wait_seconds_sum{tool="a"} 3`,
		`mcpq_fair_share_deferrals_total{level="principal",tool="a"} 2`, `mcpq_fair_share_deferrals_total{level="tenant",tool="a"} 1`} {
		if !strings.Contains(rec.Body.String(), line+"\n") {
			t.Errorf("missing %q in\n%s", line, rec.Body.String())
		}
	}
}

// The HTTP counter keeps http.Flusher (SSE) and counts method and code.
func TestInstrumentHTTP(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewRegistry()
	tel := telemetry.New(&telemetry.Config{Registerer: reg})
	h := tel.InstrumentHTTP(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		if _, ok := w.(http.Flusher); !ok {
			t.Error("the wrapped ResponseWriter lost http.Flusher")
		}
		w.WriteHeader(http.StatusTeapot)
	}))
	srv := httptest.NewServer(h)
	defer srv.Close()
	for range 2 {
		resp, err := http.Post(srv.URL, "application/json", nil)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	want := `
# HELP mcpq_http_requests_total HTTP requests served, by method and status code.
# TYPE mcpq_http_requests_total counter
mcpq_http_requests_total{code="418",method="post"} 2
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "mcpq_http_requests_total"); err != nil {
		t.Error(err)
	}
}

func TestReadyz(t *testing.T) {
	t.Parallel()
	ok := telemetry.Check{Name: "store", Fn: func(context.Context) error { return nil }}
	down := telemetry.Check{Name: "broker", Fn: func(context.Context) error { return errors.New("connection refused") }}
	slow := telemetry.Check{Name: "catalog", Fn: func(ctx context.Context) error { <-ctx.Done(); return ctx.Err() }}
	for _, tc := range []struct {
		checks []telemetry.Check
		code   int
		body   []string
	}{
		{[]telemetry.Check{ok}, 200, []string{"ready"}},
		{nil, 200, []string{"ready"}},
		{[]telemetry.Check{ok, down, slow}, 503, []string{"not ready", "broker: connection refused", "catalog: context deadline exceeded"}},
	} {
		rec := httptest.NewRecorder()
		telemetry.Readyz(50*time.Millisecond, tc.checks...).ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/readyz", nil))
		if rec.Code != tc.code {
			t.Errorf("%d checks: HTTP %d, want %d", len(tc.checks), rec.Code, tc.code)
		}
		for _, s := range tc.body {
			if !strings.Contains(rec.Body.String(), s) {
				t.Errorf("%d checks: body %q lacks %q", len(tc.checks), rec.Body.String(), s)
			}
		}
		if strings.Contains(rec.Body.String(), "store") {
			t.Errorf("a passing check is listed: %q", rec.Body.String())
		}
	}
}

// Inject replaces whatever trace context meta had with the current span's,
// without changing the caller's map; StartRun continues it.
func TestInjectAndContinue(t *testing.T) {
	t.Parallel()
	spans := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(spans))
	tel := telemetry.New(&telemetry.Config{TracerProvider: tp})

	stale := json.RawMessage(`"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"`)
	meta := map[string]json.RawMessage{"progressToken": json.RawMessage(`7`), telemetry.MetaTraceParent: stale, telemetry.MetaTraceState: json.RawMessage(`"x=1"`)}
	ctx, end := tel.StartSpan(context.Background(), "task.create")
	jobMeta := tel.Inject(ctx, meta)
	end(nil)
	if string(meta[telemetry.MetaTraceParent]) != string(stale) {
		t.Fatalf("Inject changed the caller's map")
	}
	if string(jobMeta["progressToken"]) != "7" || string(jobMeta[telemetry.MetaTraceParent]) == string(stale) {
		t.Fatalf("job meta %s", jobMeta)
	}
	if _, ok := jobMeta[telemetry.MetaTraceState]; ok {
		t.Errorf("a stale tracestate survived: %s", jobMeta)
	}
	created := trace.SpanContextFromContext(ctx)

	rctx, endRun := tel.StartRun(context.Background(), "T1", "", "echo", 3, jobMeta)
	_, endWrite := tel.StartWrite(rctx, "T1")
	endWrite(nil) // a write with nothing to change
	_, endWrite = tel.StartWrite(rctx, "T1")
	endWrite(errors.New("conflict"))
	endRun()

	got := spans.GetSpans()
	if len(got) != 4 {
		t.Fatalf("%d spans, want 4", len(got))
	}
	run := got[3]
	if run.Name != "task.run echo" || run.Parent.SpanID() != created.SpanID() || run.SpanContext.TraceID() != created.TraceID() {
		t.Errorf("run span %q parent %s trace %s; want the create span %s", run.Name, run.Parent.SpanID(), run.SpanContext.TraceID(), created.SpanID())
	}
	if skipped, conflict := got[1], got[2]; skipped.Status.Code != 0 || conflict.Status.Description == "" {
		t.Errorf("write span statuses: skipped %v, conflict %v; want unset and error", skipped.Status, conflict.Status)
	}
}

// WatchQueue's gauges show what the depth function reports, each route
// the broker knows; without a depth function there are none.
func TestWatchQueue(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewRegistry()
	tel := telemetry.New(&telemetry.Config{Registerer: reg})
	var asked []string
	tel.WatchQueue(func(_ context.Context, routes []string) (map[string]telemetry.QueueDepth, error) {
		asked = routes
		return map[string]telemetry.QueueDepth{"echo": {Pending: 3, InFlight: 1}, "prompt/greet": {Pending: 2}}, nil
	}, func(context.Context) ([]string, error) { return []string{"echo", "prompt/greet", "unknown"}, nil })
	want := `
# HELP mcpq_queue_depth Jobs waiting for a worker (queued, not yet handed out) over every tool, read from the broker on scrape; the same figure on every process of one system.
# TYPE mcpq_queue_depth gauge
mcpq_queue_depth 5
# HELP mcpq_queue_pending Jobs of a tool queued and not yet handed to a worker (including retries waiting out their delay), read from the broker on scrape: the backlog an autoscaler of the tool's pool reads.
# TYPE mcpq_queue_pending gauge
mcpq_queue_pending{tool="echo"} 3
mcpq_queue_pending{tool="prompt/greet"} 2
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "mcpq_queue_depth", "mcpq_queue_pending"); err != nil {
		t.Error(err)
	}
	if !reflect.DeepEqual(asked, []string{"echo", "prompt/greet", "unknown"}) {
		t.Errorf("depth asked for %q", asked)
	}
	if n, err := testutil.GatherAndCount(reg, "mcpq_queue_inflight"); err != nil || n != 2 {
		t.Errorf("%d inflight gauges (%v), want 2", n, err)
	}

	reg = prometheus.NewRegistry()
	telemetry.New(&telemetry.Config{Registerer: reg}).WatchQueue(nil, nil)
	if n, err := testutil.GatherAndCount(reg); err != nil || n != 0 {
		t.Errorf("without a depth function: %d series (%v)", n, err)
	}
}

// The server span names the protocol version (from _meta, else the header)
// and the 2025-11-25 session; baggage rides on a job like the trace
// context; LogFields names the span.
func TestRequestAttributesBaggageAndLogFields(t *testing.T) {
	t.Parallel()
	spans := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(spans))
	tel := telemetry.New(&telemetry.Config{TracerProvider: tp})

	h := http.Header{"Mcp-Session-Id": {"S1"}, "Mcp-Protocol-Version": {"2025-11-25"}, "Baggage": {"tenant=acme"}}
	ctx, end := tel.StartRequest(context.Background(), h, "tools/call", json.RawMessage(`{"name":"echo"}`))
	if f := telemetry.LogFields(ctx); f["trace_id"] != trace.SpanContextFromContext(ctx).TraceID().String() || f["span_id"] != trace.SpanContextFromContext(ctx).SpanID().String() {
		t.Errorf("LogFields %v", f)
	}
	meta := tel.Inject(ctx, nil)
	end()
	if string(meta[telemetry.MetaBaggage]) != `"tenant=acme"` {
		t.Errorf("job meta %s: want the baggage", meta)
	}
	if f := telemetry.LogFields(context.Background()); f != nil {
		t.Errorf("LogFields without a span: %v", f)
	}
	_, end = tel.StartRequest(context.Background(), http.Header{"Mcp-Protocol-Version": {"2025-11-25"}}, "tasks/get",
		json.RawMessage(`{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}`))
	end()
	got := spans.GetSpans()
	want := []map[string]string{
		{"mcp.session.id": "S1", "mcp.protocol.version": "2025-11-25", "gen_ai.tool.name": "echo"},
		{"mcp.protocol.version": "2026-07-28", "mcp.method.name": "tasks/get"},
	}
	for i, w := range want {
		attrs := map[string]string{}
		for _, a := range got[i].Attributes {
			attrs[string(a.Key)] = a.Value.String()
		}
		for k, v := range w {
			if attrs[k] != v {
				t.Errorf("span %q: %s=%q, want %q (%v)", got[i].Name, k, attrs[k], v, attrs)
			}
		}
	}
}
