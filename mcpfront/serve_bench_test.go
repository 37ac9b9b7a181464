package mcpfront_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/mcpqueue/mcpqueue/backend"
	"github.com/mcpqueue/mcpqueue/broker/natsbroker"
	"github.com/mcpqueue/mcpqueue/internal/natstest"
	"github.com/mcpqueue/mcpqueue/mcpfront"
	"github.com/mcpqueue/mcpqueue/producer"
	"github.com/mcpqueue/mcpqueue/taskstate"
	"github.com/mcpqueue/mcpqueue/taskstate/natskv"
)

// benchFront is the front end alone on an embedded NATS (file storage, as
// deployed), with the bench's no-op tool in its catalog and no worker: the
// benchmarks measure one request's work in the api process.
type benchFront struct {
	h     http.Handler
	store *natskv.Store
}

func newBenchFront(b *testing.B) *benchFront {
	b.Helper()
	srv := natstest.Start(b)
	name := natstest.Name(b)
	nc, js := srv.Connect(b)
	ctx, cancel := context.WithTimeout(b.Context(), 10*time.Second)
	defer cancel()
	bcfg := &natsbroker.Config{Stream: name + "_JOBS", Subject: name + ".jobs", BusPrefix: name + ".bus"}
	q, err := natsbroker.NewQueue(ctx, js, bcfg)
	if err != nil {
		b.Fatal(err)
	}
	st, err := natskv.New(ctx, js, &natskv.Config{TaskBucket: name + "_tasks", ToolBucket: name + "_tools"})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = st.Close() })
	if err := st.PublishTool(ctx, &taskstate.ToolInfo{Name: "noop", InputSchema: json.RawMessage(`{"type":"object"}`), TaskSupport: taskstate.TaskOptional}); err != nil {
		b.Fatal(err)
	}
	bus := natsbroker.NewBus(nc, bcfg)
	prod := producer.New(st, producer.QueueExecutor{Queue: q, Bus: bus}, nil)
	front := mcpfront.New(prod, backend.Backend{Store: st, Catalog: st, Bus: bus}, &mcpfront.Config{StateKey: []byte("bench-key")})
	return &benchFront{h: front, store: st}
}

// completedTask stores a finished no-op task, as the worker leaves it.
func (f *benchFront) completedTask(b *testing.B) string {
	b.Helper()
	now := time.Now().UTC()
	t := &taskstate.Task{
		ID: taskstate.NewID(), Tool: "noop", Arguments: json.RawMessage(`{}`), Era: taskstate.Era20260728,
		Mode: taskstate.ModeTask, Status: taskstate.Working, CreatedAt: now, LastUpdatedAt: now,
		TTLMs: 3600000, PollIntervalMs: 500, Meta: map[string]json.RawMessage{"clientCapabilities": json.RawMessage(`{"extensions":{"io.modelcontextprotocol/tasks":{}}}`)},
	}
	if err := f.store.Create(b.Context(), t); err != nil {
		b.Fatal(err)
	}
	if _, err := taskstate.Mutate(b.Context(), f.store, t.ID, time.Now, func(t *taskstate.Task) error {
		t.Attempt = 1
		t.Status = taskstate.Completed
		t.Result = json.RawMessage(`{"content":[{"type":"text","text":"ok"}]}`)
		return nil
	}); err != nil {
		b.Fatal(err)
	}
	return t.ID
}

// benchRequest is a 2026-07-28 request as the bench client sends it.
func benchRequest(method, name, params string) (*http.Request, []byte) {
	body := `{"jsonrpc":"2.0","id":7,"method":"` + method + `","params":{` + params +
		`"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"elicitation":{},"sampling":{},"extensions":{"io.modelcontextprotocol/tasks":{}}}}}}`
	r := httptest.NewRequest(http.MethodPost, "http://127.0.0.1/mcp", nil)
	r.Header.Set("Content-Type", "application/json")
	r.Header.Set("Accept", "application/json, text/event-stream")
	r.Header.Set("Mcp-Protocol-Version", "2026-07-28")
	r.Header.Set("Mcp-Method", method)
	if name != "" {
		r.Header.Set("Mcp-Name", name)
	}
	return r, []byte(body)
}

// BenchmarkServe measures one request through ServeHTTP (no network between
// client and api): decode, checks, dispatch, the store and queue round trips
// the method needs, and the encoded reply.
//
//	tools/list: no round trip (the catalog is cached): decode and dispatch alone.
//	tasks/get:  one record read of a completed task, and its reply.
//	tools/call: the task path's create: record write and enqueue.
func BenchmarkServe(b *testing.B) {
	f := newBenchFront(b)
	id := f.completedTask(b)
	for _, c := range []struct {
		name, method, toolOrID, params, want string
	}{
		{"tools/list", "tools/list", "", "", `"name":"noop"`},
		{"tasks/get", "tasks/get", id, `"taskId":"` + id + `",`, `"status":"completed"`},
		{"tools/call", "tools/call", "noop", `"name":"noop","arguments":{},`, `"resultType":"task"`},
	} {
		b.Run(strings.ReplaceAll(c.name, "/", "_"), func(b *testing.B) {
			req, body := benchRequest(c.method, c.toolOrID, c.params)
			rd := bytes.NewReader(body)
			b.ReportAllocs()
			for b.Loop() {
				rd.Reset(body)
				r := req.Clone(b.Context())
				r.Body = readCloser{rd}
				r.ContentLength = int64(len(body))
				w := httptest.NewRecorder()
				f.h.ServeHTTP(w, r)
				if w.Code != 200 || !bytes.Contains(w.Body.Bytes(), []byte(c.want)) {
					b.Fatalf("HTTP %d %s", w.Code, w.Body.Bytes())
				}
			}
		})
	}
}

type readCloser struct{ *bytes.Reader }

func (readCloser) Close() error { return nil }
