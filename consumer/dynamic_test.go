package consumer_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/mcpqueue/mcpqueue/consumer"
	"github.com/mcpqueue/mcpqueue/internal/testenv"
	"github.com/mcpqueue/mcpqueue/taskstate"
)

// rawTool is a HandleRaw tool answering with text.
func rawTool(m *consumer.Mux, name, text string) {
	consumer.HandleRaw(m, consumer.Tool{Name: name, InputSchema: json.RawMessage(`{"type":"object"}`)},
		func(ctx context.Context, c *consumer.Call[json.RawMessage]) (json.RawMessage, error) {
			return json.Marshal(map[string]any{"content": []any{map[string]any{"type": "text", "text": text}}})
		})
}

func keys(m *consumer.Mux) string {
	var out []string
	for _, t := range m.Tools() {
		out = append(out, t.Key())
	}
	return strings.Join(out, ",")
}

func TestReplaceSwapsAGroupOnly(t *testing.T) {
	t.Parallel()
	m := consumer.NewMux()
	rawTool(m, "static", "s")
	if _, err := m.Only("static", "b"); err == nil {
		t.Fatal("Only of a name not registered yet must fail")
	}

	g1 := consumer.NewMux()
	rawTool(g1, "a", "1")
	rawTool(g1, "b", "1")
	if err := m.Replace("one", g1); err != nil {
		t.Fatal(err)
	}
	narrowed, err := m.Only("static", "b")
	if err != nil {
		t.Fatal(err)
	}
	if got := keys(m); got != "a,b,static" {
		t.Fatalf("after Replace: %s", got)
	}

	// A second group may not take the first one's or a static tool.
	clash := consumer.NewMux()
	rawTool(clash, "static", "x")
	rawTool(clash, "a", "x")
	if err := m.Replace("two", clash); err == nil || !strings.Contains(err.Error(), "a, static") {
		t.Fatalf("Replace over other groups' tools: %v", err)
	}
	if got := keys(m); got != "a,b,static" {
		t.Fatalf("a refused Replace changed the Mux: %s", got)
	}

	// Replacing the group drops what the new set lacks.
	g2 := consumer.NewMux()
	rawTool(g2, "b", "2")
	rawTool(g2, "c", "2")
	if err := m.Replace("one", g2); err != nil {
		t.Fatal(err)
	}
	if got := keys(m); got != "b,c,static" {
		t.Fatalf("after the second Replace: %s", got)
	}
	// The narrowed Mux followed, within its names.
	if got := keys(narrowed); got != "b,static" {
		t.Fatalf("narrowed Mux after Replace: %s", got)
	}
	if err := m.Replace("one", consumer.NewMux()); err != nil {
		t.Fatal(err)
	}
	if got := keys(narrowed); got != "static" {
		t.Fatalf("narrowed Mux after the group emptied: %s", got)
	}
}

func TestHandleRawPassesResultThrough(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	mux := consumer.NewMux()
	// A content block the Result type does not model (resource_link) and
	// an output schema of its own must reach the record as sent.
	out := `{"type":"object","properties":{"n":{"type":"integer"}},"required":["n"]}`
	var gotArgs atomic.Value
	consumer.HandleRaw(mux, consumer.Tool{Name: "relay", Title: "Relay",
		InputSchema:  json.RawMessage(`{"type":"object","properties":{"x":{"type":"number"}}}`),
		OutputSchema: json.RawMessage(out)},
		func(ctx context.Context, c *consumer.Call[json.RawMessage]) (json.RawMessage, error) {
			gotArgs.Store(string(c.Args))
			return json.RawMessage(`{"content":[{"type":"resource_link","uri":"demo://r/1","name":"r1"}],"structuredContent":{"n":7}}`), nil
		})
	consumer.HandleRaw(mux, consumer.Tool{Name: "bad", InputSchema: json.RawMessage(`{"type":"object"}`)},
		func(ctx context.Context, c *consumer.Call[json.RawMessage]) (json.RawMessage, error) {
			return json.RawMessage(`[1]`), nil
		})
	if info := mux.Tools()[1]; info.Name != "relay" || string(info.OutputSchema) != out || info.Title != "Relay" {
		t.Fatalf("published %+v", info)
	}
	e.run(t, mux, nil)

	tk := e.waitFor(t, e.create(t, "relay", map[string]any{"x": 1.5}), terminal)
	if tk.Status != taskstate.Completed {
		t.Fatalf("relay ended %s: %+v", tk.Status, tk.Error)
	}
	var res map[string]any
	_ = json.Unmarshal(tk.Result, &res)
	if fmt.Sprint(res["content"]) != "[map[name:r1 type:resource_link uri:demo://r/1]]" || fmt.Sprint(res["structuredContent"]) != "map[n:7]" {
		t.Fatalf("result %s", tk.Result)
	}
	if gotArgs.Load() != `{"x":1.5}` {
		t.Fatalf("handler got arguments %v", gotArgs.Load())
	}

	tk = e.waitFor(t, e.create(t, "bad", map[string]any{}), terminal)
	if tk.Status != taskstate.Failed || !strings.Contains(tk.Error.Message, "not a JSON object") {
		t.Fatalf("a non-object result: %s %+v", tk.Status, tk.Error)
	}
}

func TestRetryableRunsAgainThenFails(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	mux := consumer.NewMux()
	var runs atomic.Int32
	consumer.Handle(mux, consumer.Tool{Name: "flaky", MaxAttempts: 3},
		func(ctx context.Context, c *consumer.Call[none]) (*consumer.Result, error) {
			n := runs.Add(1)
			if n == 1 {
				return nil, consumer.Retryable(errors.New("child died: signal: killed"))
			}
			return consumer.TextResult(fmt.Sprintf("attempt %d", c.Attempt())), nil
		})
	consumer.Handle(mux, consumer.Tool{Name: "dead", MaxAttempts: 2},
		func(ctx context.Context, c *consumer.Call[none]) (*consumer.Result, error) {
			return nil, consumer.Retryable(errors.New(`mcp server "x" exited: signal: killed`))
		})
	e.run(t, mux, nil)

	id := e.create(t, "flaky", none{})
	retrying := e.waitFor(t, id, func(tk *taskstate.Task) bool {
		return tk.Status.Terminal() || strings.HasPrefix(tk.StatusMessage, "attempt 1 of 3 failed")
	})
	if retrying.Status.Terminal() {
		t.Fatalf("never saw the retry message; ended %s", retrying.Status)
	}
	tk := e.waitFor(t, id, terminal)
	if tk.Status != taskstate.Completed || tk.Attempt != 2 || !strings.Contains(string(tk.Result), "attempt 2") {
		t.Fatalf("flaky ended %s after %d attempts: %s %+v", tk.Status, tk.Attempt, tk.Result, tk.Error)
	}

	tk = e.waitFor(t, e.create(t, "dead", none{}), terminal)
	if tk.Status != taskstate.Failed || tk.Attempt != 2 || tk.Error.Message != `mcp server "x" exited: signal: killed (attempt 2 of 2)` {
		t.Fatalf("dead ended %s after %d attempts: %+v", tk.Status, tk.Attempt, tk.Error)
	}
}

// A running Worker follows Replace: a tool added later is published and
// its jobs run; a removed one leaves the catalog and its jobs stay queued
// (nobody pulls them) until it comes back.
func TestWorkerFollowsReplace(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	mux := consumer.NewMux()
	rawTool(mux, "base", "base")
	var noHandler atomic.Value // the worker's log message saying it has no handler for a job
	logger := zerolog.New(io.Discard).Hook(zerolog.HookFunc(func(_ *zerolog.Event, _ zerolog.Level, msg string) {
		if strings.Contains(msg, "no handler") {
			noHandler.Store(msg)
		}
	}))
	e.run(t, mux, &consumer.Config{Heartbeat: time.Hour, Logger: logger}) // only changes publish
	ctx := context.Background()
	inCatalog := func(key string) bool {
		_, err := e.store.Tool(ctx, key)
		return err == nil
	}
	testenv.Eventually(t, 15*time.Second, "base published", func() bool { return inCatalog("base") })

	g := consumer.NewMux()
	rawTool(g, "late", "late v1")
	if err := mux.Replace("srv", g); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 15*time.Second, "late published", func() bool { return inCatalog("late") })
	tk := e.waitFor(t, e.create(t, "late", map[string]any{}), terminal)
	if tk.Status != taskstate.Completed || !strings.Contains(string(tk.Result), "late v1") {
		t.Fatalf("late ended %s: %s", tk.Status, tk.Result)
	}

	// Gone: out of the catalog, and its job is not pulled.
	if err := mux.Replace("srv", consumer.NewMux()); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 15*time.Second, "late removed from the catalog", func() bool { return !inCatalog("late") })
	id := e.create(t, "late", map[string]any{})
	for end := time.Now().Add(1500 * time.Millisecond); time.Now().Before(end); time.Sleep(50 * time.Millisecond) {
		if msg := noHandler.Load(); msg != nil {
			t.Fatalf("a removed tool's job reached the worker: %s", msg)
		}
	}
	if tk, _ := e.store.Get(ctx, id); tk.Status != taskstate.Working || tk.Attempt != 0 {
		t.Fatalf("the removed tool's task ran: %s attempt %d", tk.Status, tk.Attempt)
	}

	// Back, changed: the queued job runs with the new handler.
	g = consumer.NewMux()
	rawTool(g, "late", "late v2")
	if err := mux.Replace("srv", g); err != nil {
		t.Fatal(err)
	}
	tk = e.waitFor(t, id, terminal)
	if tk.Status != taskstate.Completed || !strings.Contains(string(tk.Result), "late v2") {
		t.Fatalf("late after coming back ended %s: %s", tk.Status, tk.Result)
	}
	if tk := e.waitFor(t, e.create(t, "base", map[string]any{}), terminal); tk.Status != taskstate.Completed {
		t.Fatalf("base ended %s", tk.Status)
	}
}

// A run in progress keeps its job while the routes change around it.
func TestRunSurvivesReplace(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	mux := consumer.NewMux()
	release := make(chan struct{})
	started := make(chan struct{}, 1)
	consumer.Handle(mux, consumer.Tool{Name: "long"},
		func(ctx context.Context, c *consumer.Call[none]) (*consumer.Result, error) {
			started <- struct{}{}
			select {
			case <-release:
				return consumer.TextResult("done"), nil
			case <-ctx.Done():
				return nil, context.Cause(ctx)
			}
		})
	e.run(t, mux, nil)
	id := e.create(t, "long", none{})
	<-started
	for i := range 3 {
		g := consumer.NewMux()
		rawTool(g, fmt.Sprintf("t%d", i), "x")
		if err := mux.Replace("srv", g); err != nil {
			t.Fatal(err)
		}
	}
	testenv.Eventually(t, 15*time.Second, "t2 published", func() bool { _, err := e.store.Tool(context.Background(), "t2"); return err == nil })
	close(release)
	tk := e.waitFor(t, id, terminal)
	if tk.Status != taskstate.Completed || tk.Attempt != 1 {
		t.Fatalf("long ended %s after %d attempts: %+v", tk.Status, tk.Attempt, tk.Error)
	}
	if tk := e.waitFor(t, e.create(t, "t2", map[string]any{}), terminal); tk.Status != taskstate.Completed {
		t.Fatalf("t2 ended %s", tk.Status)
	}
}
