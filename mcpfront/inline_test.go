package mcpfront_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/mcpqueue/mcpqueue/mcpfront"
	"github.com/mcpqueue/mcpqueue/taskstate"
)

// inlineBound is generous: under -race on a loaded machine a short job
// still ends well within it, so its call is answered inline every time.
const inlineBound = 5 * time.Second

func withInline(d time.Duration) func(*mcpfront.Config) {
	return func(c *mcpfront.Config) { c.InlineWait = d }
}

// Adaptive completion: a task-capable call of a short optional tool gets its
// outcome; anything that must or may not end within the bound gets its handle.
func TestInlineCompletion(t *testing.T) {
	t.Parallel()
	e := newEnv(t, withInline(inlineBound))
	echo := map[string]any{"name": "echo", "arguments": map[string]any{"text": "hi"}}

	res := e.call(t, "tools/call", echo, true)
	if str(res["resultType"]) != "complete" || res["taskId"] != nil || resultText(t, mustJSON(res)) != "echo: hi" {
		t.Fatalf("echo with the tasks extension: want its result inline, got %v", res)
	}
	// It ran as a task all the same: a durable record, completed.
	if rec := e.waitRecord(t, "echo", func(tk *taskstate.Task) bool { return tk.Status == taskstate.Completed }); rec.Mode != taskstate.ModeTask {
		t.Fatalf("record of the inline-answered echo: mode %s", rec.Mode)
	}

	if res := e.call(t, "tools/call", map[string]any{"name": "tool_error", "arguments": map[string]any{}}, true); str(res["resultType"]) != "complete" || string(res["isError"]) != "true" {
		t.Fatalf("tool_error: want its isError result inline, got %v", res)
	}

	m, h := newRequest("tools/call", 7, map[string]any{"name": "protocol_fail", "arguments": map[string]any{}}, true)
	body, _ := json.Marshal(m)
	if r := e.send(t, h, body, sendOpts{}); r.err == nil || r.err.Code != -32050 {
		t.Fatalf("protocol_fail: want its JSON-RPC error -32050 inline, got %s", r)
	}

	handle := func(name string, args map[string]any) {
		t.Helper()
		start := time.Now()
		res := e.call(t, "tools/call", map[string]any{"name": name, "arguments": args}, true)
		if str(res["resultType"]) != "task" || str(res["taskId"]) == "" {
			t.Fatalf("%s: want a task handle, got %v", name, res)
		}
		if took := time.Since(start); took >= inlineBound {
			t.Fatalf("%s: the handle came after %s, the whole bound", name, took)
		}
	}
	handle("ask", map[string]any{})                  // input_required: the client answers through tasks/update
	handle("required_job", map[string]any{})         // required: always a task
	handle("echo_task", map[string]any{"text": "x"}) // the tool turned inline answers off
}

// A task still running when the bound ends gets its handle then, and a tool
// the api has seen take longer than the bound gets it at once.
func TestInlineBoundThenHandle(t *testing.T) {
	t.Parallel()
	const bound = 300 * time.Millisecond
	e := newEnv(t, withInline(bound))
	call := func() (string, time.Duration) {
		start := time.Now()
		res := e.call(t, "tools/call", map[string]any{"name": "nap", "arguments": map[string]any{"ms": 1500}}, true)
		took := time.Since(start)
		if str(res["resultType"]) != "task" || str(res["status"]) != "working" {
			t.Fatalf("nap 1500 ms: want a working handle, got %v", res)
		}
		return str(res["taskId"]), took
	}
	id, took := call()
	if took < bound {
		t.Fatalf("first nap: handle after %s, before the bound %s ended", took, bound)
	}
	e.waitStatus(t, id, "completed")
	if _, took := call(); took >= bound {
		t.Fatalf("nap, known to take 1.5 s: the handle after %s, want at once (bound %s)", took, bound)
	}
}

// The 2025-11-25 wire: a client that sent params.task asked for a handle.
func TestInlineNotOnLegacyWire(t *testing.T) {
	t.Parallel()
	e := newEnv(t, withInline(inlineBound))
	h := e.legacySession(t, nil)
	body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": map[string]any{
		"name": "echo", "arguments": map[string]any{"text": "hi"}, "task": map[string]any{},
	}})
	start := time.Now()
	r := e.send(t, h, body, sendOpts{})
	var res struct {
		Task map[string]json.RawMessage `json:"task"`
	}
	if r.status != 200 || r.err != nil || json.Unmarshal(r.result, &res) != nil || res.Task == nil {
		t.Fatalf("2025-11-25 task-augmented echo: want a CreateTaskResult, got %s", r)
	}
	if took := time.Since(start); took >= inlineBound {
		t.Fatalf("2025-11-25 handle after %s", took)
	}
}
