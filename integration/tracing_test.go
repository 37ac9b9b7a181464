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
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/mcpqueue/mcpqueue/broker/natsbroker"
	"github.com/mcpqueue/mcpqueue/consumer"
	"github.com/mcpqueue/mcpqueue/integration/harness"
	"github.com/mcpqueue/mcpqueue/internal/natstest"
	"github.com/mcpqueue/mcpqueue/mcpfront"
	"github.com/mcpqueue/mcpqueue/producer"
	"github.com/mcpqueue/mcpqueue/taskstate/natskv"
	"github.com/mcpqueue/mcpqueue/telemetry"
)

// tracedSystem is a front end and a worker in this process, on an embedded
// NATS, each on its own connections, sharing one TracerProvider that
// records every ended span.
type tracedSystem struct {
	url   string
	spans *tracetest.InMemoryExporter
}

func newTracedSystem(t *testing.T) *tracedSystem {
	t.Helper()
	spans := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(spans))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	tel := telemetry.New(&telemetry.Config{Registerer: prometheus.NewRegistry(), TracerProvider: tp})

	srv := natstest.Start(t)
	name := natstest.Name(t)
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	bcfg := &natsbroker.Config{Stream: name + "_JOBS", Subject: name + ".jobs", BusPrefix: name + ".bus", Memory: true}
	kcfg := &natskv.Config{TaskBucket: name + "_tasks", ToolBucket: name + "_tools", Memory: true}
	connect := func() (*natsbroker.Queue, *natskv.Store, *natsbroker.Bus) {
		nc, js := srv.Connect(t)
		q, err := natsbroker.NewQueue(ctx, js, bcfg)
		if err != nil {
			t.Fatal(err)
		}
		st, err := natskv.New(ctx, js, kcfg)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = st.Close() })
		return q, st, natsbroker.NewBus(nc, bcfg)
	}

	wq, wst, wbus := connect()
	mux := consumer.NewMux()
	consumer.Handle(mux, consumer.Tool{Name: "echo", Description: "echoes text"},
		func(ctx context.Context, c *consumer.Call[struct {
			Text string `json:"text"`
		}]) (*consumer.Result, error) {
			return consumer.TextResult(c.Args.Text), nil
		})
	w := consumer.New(wq, wst, wst, wbus, &consumer.Config{Concurrency: 2, ShutdownGrace: 100 * time.Millisecond, Telemetry: tel})
	wctx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(wctx, mux) }()
	t.Cleanup(func() {
		stop()
		if err := <-done; err != nil {
			t.Errorf("worker Run: %v", err)
		}
	})
	select {
	case <-w.Ready():
	case err := <-done:
		t.Fatalf("worker Run: %v", err)
	}

	fq, fst, fbus := connect()
	prod := producer.New(fst, producer.QueueExecutor{Queue: fq, Bus: fbus}, &producer.Config{Telemetry: tel})
	front := mcpfront.New(prod, fst, fst, fbus, &mcpfront.Config{StateKey: []byte("k"), Telemetry: tel})
	hs := httptest.NewServer(front)
	t.Cleanup(hs.Close)
	// The worker published its tools before Ready; the front end reads
	// them through its own connection.
	harness.Eventually(t, 10*time.Second, func() (bool, string) {
		_, err := fst.Tool(ctx, "echo")
		return err == nil, fmt.Sprint("echo not in the catalog: ", err)
	})
	return &tracedSystem{url: hs.URL, spans: spans}
}

// trace waits until the worker's run span of the task has ended, then
// returns the spans of traceID by name (the last of each name) and the
// task.write spans apart.
func (s *tracedSystem) trace(t *testing.T, traceID trace.TraceID) (byName map[string]tracetest.SpanStub, writes []tracetest.SpanStub) {
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
		_, ok := byName["task.run echo"]
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

			spans, writes := s.trace(t, traceID)
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
			// The api writes the record once; the worker takes the lease and
			// writes the outcome.
			if apiWrites != 1 || workerWrites < 2 {
				t.Errorf("task.write spans: %d under task.create (want 1), %d under task.run (want at least 2)", apiWrites, workerWrites)
			}
		})
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
		if string(a.Key) == key && a.Value.Emit() == value {
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
