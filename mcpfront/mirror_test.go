package mcpfront_test

import (
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mcpqueue/mcpqueue/consumer"
	"github.com/mcpqueue/mcpqueue/mcpfront"
	"github.com/mcpqueue/mcpqueue/taskstate"
)

// ---- clients without tasks: hand-over and the mirror tools (mirror.go) ----

const mirrorHandleAfter = 700 * time.Millisecond

type slowArgs struct {
	Ms int `json:"ms"`
}

// mirrorTools are the worker's tools for these tests: slow takes ms
// milliseconds and reports progress every 100 ms on the way.
func mirrorTools() *consumer.Mux {
	mux := consumer.NewMux()
	consumer.Handle(mux, consumer.Tool{Name: "slow"}, func(ctx context.Context, c *consumer.Call[slowArgs]) (*consumer.Result, error) {
		end := time.After(time.Duration(c.Args.Ms) * time.Millisecond)
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for i := 1; ; i++ {
			select {
			case <-end:
				return consumer.TextResult("slow done"), nil
			case <-tick.C:
				_ = c.Progress(ctx, float64(i), 0, "")
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}
	})
	consumer.Handle(mux, consumer.Tool{Name: "echo"}, echoTool)
	consumer.Handle(mux, consumer.Tool{Name: "ask"}, askTool)
	return mux
}

func newMirrorEnv(t *testing.T, opts ...func(*mcpfront.Config)) *env {
	t.Helper()
	cfg := &mcpfront.Config{HandleAfter: mirrorHandleAfter, StateKey: []byte("test-key"), InlineWait: -1, Auth: headerAuth{}}
	for _, o := range opts {
		o(cfg)
	}
	sys := startSystem(t, mirrorTools(), "mirror-worker", 4, cfg)
	return &env{url: sys.url, handler: sys.srv, js: sys.front.JS, store: sys.front.Store, front: sys.front, taskBucket: sys.nats.KV.TaskBucket}
}

// modernAs sends a 2026-07-28 request as principal who (headerAuth).
func (e *env) modernAs(t *testing.T, who, method string, params map[string]any, ext bool) reply {
	t.Helper()
	m, h := newRequest(method, "m-"+method, params, ext)
	h.Set("Authorization", "Bearer "+who)
	body, _ := json.Marshal(m)
	return e.send(t, h, body, sendOpts{})
}

// sessionAs opens a session of version with capabilities caps as who and
// returns the headers of a request in it.
func (e *env) sessionAs(t *testing.T, who, version string, caps map[string]any) http.Header {
	t.Helper()
	h := http.Header{}
	h.Set("Content-Type", "application/json")
	h.Set("Accept", "application/json, text/event-stream")
	h.Set("Authorization", "Bearer "+who)
	body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": map[string]any{
		"protocolVersion": version, "capabilities": caps, "clientInfo": map[string]any{"name": "mirror-test", "version": "1"},
	}})
	r := e.send(t, h, body, sendOpts{})
	if r.status != 200 || r.header.Get("Mcp-Session-Id") == "" {
		t.Fatalf("initialize %s: %s", version, r)
	}
	h.Set("MCP-Protocol-Version", version)
	h.Set("Mcp-Session-Id", r.header.Get("Mcp-Session-Id"))
	return h
}

func (e *env) legacySend(t *testing.T, h http.Header, method string, params map[string]any) reply {
	t.Helper()
	body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 7, "method": method, "params": params})
	return e.send(t, h, body, sendOpts{})
}

// toolNames are the names a tools/list reply lists.
func toolNames(t *testing.T, r reply) []string {
	t.Helper()
	var res struct {
		Tools []struct {
			Name string `json:"name"`
		} `json:"tools"`
	}
	if r.err != nil || json.Unmarshal(r.result, &res) != nil {
		t.Fatalf("tools/list: %s", r)
	}
	var out []string
	for _, tl := range res.Tools {
		out = append(out, tl.Name)
	}
	slices.Sort(out)
	return out
}

func TestMirrorToolsListedOnlyWithoutTasks(t *testing.T) {
	t.Parallel()
	e := newMirrorEnv(t)
	off := newMirrorEnv(t, func(c *mcpfront.Config) { c.MirrorToolsOff = true })
	withMirror := []string{"ask", "echo", "slow", "tasks_cancel", "tasks_result"}
	without := []string{"ask", "echo", "slow"}
	tasksCaps := map[string]any{"tasks": map[string]any{"requests": map[string]any{"tools": map[string]any{"call": map[string]any{}}}}}
	for _, c := range []struct {
		name string
		e    *env
		list func(e *env) reply
		want []string
	}{
		{"2026 without the extension", e, func(e *env) reply { return e.modernAs(t, "a", "tools/list", nil, false) }, withMirror},
		{"2026 with the extension", e, func(e *env) reply { return e.modernAs(t, "a", "tools/list", nil, true) }, without},
		{"2025-06-18", e, func(e *env) reply {
			return e.legacySend(t, e.sessionAs(t, "a", "2025-06-18", map[string]any{}), "tools/list", nil)
		}, withMirror},
		{"2025-11-25 without capabilities.tasks", e, func(e *env) reply {
			return e.legacySend(t, e.sessionAs(t, "a", "2025-11-25", map[string]any{"elicitation": map[string]any{}}), "tools/list", nil)
		}, withMirror},
		{"2025-11-25 with capabilities.tasks", e, func(e *env) reply {
			return e.legacySend(t, e.sessionAs(t, "a", "2025-11-25", tasksCaps), "tools/list", nil)
		}, without},
		{"2026 without the extension, mirror tools off", off, func(e *env) reply { return e.modernAs(t, "a", "tools/list", nil, false) }, without},
		{"2025-06-18, mirror tools off", off, func(e *env) reply {
			return e.legacySend(t, e.sessionAs(t, "a", "2025-06-18", map[string]any{}), "tools/list", nil)
		}, without},
	} {
		if got := toolNames(t, c.list(c.e)); !slices.Equal(got, c.want) {
			t.Errorf("%s: tools/list = %v, want %v", c.name, got, c.want)
		}
	}
	// A client that negotiated tasks cannot call them either: the name is
	// no tool of the catalog.
	if r := e.modernAs(t, "a", "tools/call", map[string]any{"name": "tasks_result", "arguments": map[string]any{"taskId": "x"}}, true); r.err == nil || r.err.Code != -32602 || !strings.Contains(r.err.Message, "tasks_result") {
		t.Errorf("tasks_result with the extension: want the unknown-tool error, got %s", r)
	}
}

// handedOver checks r is the hand-over CallToolResult and returns its taskId.
func handedOver(t *testing.T, r reply, resultType string) string {
	t.Helper()
	var res struct {
		ResultType string `json:"resultType"`
		IsError    *bool  `json:"isError"`
		Content    []struct {
			Type, Text string
		} `json:"content"`
		Structured *struct {
			TaskID      string `json:"taskId"`
			Status      string `json:"status"`
			PollAfterMs int64  `json:"pollAfterMs"`
		} `json:"structuredContent"`
	}
	if r.err != nil || json.Unmarshal(r.result, &res) != nil || res.Structured == nil {
		t.Fatalf("want the hand-over result, got %s", r)
	}
	if res.ResultType != resultType || res.IsError == nil || *res.IsError || res.Structured.TaskID == "" ||
		res.Structured.Status != "working" || res.Structured.PollAfterMs <= 0 || len(res.Content) != 1 ||
		!strings.Contains(res.Content[0].Text, `call the tool tasks_result with {"taskId":"`+res.Structured.TaskID+`"}`) {
		t.Fatalf("hand-over result malformed: %s", r.result)
	}
	return res.Structured.TaskID
}

func TestHandOverModern(t *testing.T) {
	t.Parallel()
	e := newMirrorEnv(t)
	start := time.Now()
	m, h := newRequest("tools/call", 1, map[string]any{"name": "slow", "arguments": map[string]any{"ms": 2500}}, false)
	m["params"].(map[string]any)["_meta"].(map[string]any)["progressToken"] = "p1"
	h.Set("Authorization", "Bearer alice")
	body, _ := json.Marshal(m)
	r := e.send(t, h, body, sendOpts{})
	took := time.Since(start)
	id := handedOver(t, r, "complete")
	if took < mirrorHandleAfter || took > 2*time.Second {
		t.Errorf("handed over after %s, want about %s", took, mirrorHandleAfter)
	}
	// Progress flowed while the call waited (hosts reset their timeouts on it).
	if !strings.Contains(string(r.body), `"method":"notifications/progress"`) || !strings.Contains(string(r.body), `"progressToken":"p1"`) {
		t.Errorf("no progress notification before the hand-over: %s", r.body)
	}
	if tk, err := e.store.Get(t.Context(), id); err != nil || tk.Status != taskstate.Working || !strings.HasSuffix(tk.Owner, "|alice") {
		t.Fatalf("handed-over task: %+v, %v; want alice's, working", tk, err)
	}

	// Another principal's tasks_result and tasks_cancel: an unknown id, and nothing changes.
	for _, tool := range []string{"tasks_result", "tasks_cancel"} {
		r := e.modernAs(t, "mallory", "tools/call", map[string]any{"name": tool, "arguments": map[string]any{"taskId": id}}, false)
		if r.err == nil || r.err.Code != -32602 || r.err.Message != "Task not found: "+id {
			t.Errorf("%s by another principal: want -32602 Task not found, got %s", tool, r)
		}
	}
	// Bad arguments name the field.
	r = e.modernAs(t, "alice", "tools/call", map[string]any{"name": "tasks_result", "arguments": map[string]any{"task": id}}, false)
	if r.err == nil || r.err.Code != -32602 || !strings.Contains(r.err.Message, "taskId") {
		t.Errorf("tasks_result without taskId: %s", r)
	}

	// The owner's tasks_result waits (up to HandleAfter each) and returns the
	// tool's own result.
	var done reply
	for i := 0; ; i++ {
		done = e.modernAs(t, "alice", "tools/call", map[string]any{"name": "tasks_result", "arguments": map[string]any{"taskId": id}}, false)
		if !strings.Contains(string(done.result), "structuredContent") || i > 10 {
			break
		}
		handedOver(t, done, "complete") // still running: the same answer
	}
	var res map[string]json.RawMessage
	if done.err != nil || json.Unmarshal(done.result, &res) != nil || str(res["resultType"]) != "complete" || resultText(t, done.result) != "slow done" {
		t.Fatalf("tasks_result: want the tool's result, got %s", done)
	}
	if tk, _ := e.store.Get(t.Context(), id); tk.Status != taskstate.Completed {
		t.Fatalf("task %s: %s, want completed (never cancelled)", id, tk.Status)
	}
}

func TestHandOverLegacyAndCancel(t *testing.T) {
	t.Parallel()
	e := newMirrorEnv(t)
	h := e.sessionAs(t, "bob", "2025-06-18", map[string]any{})
	start := time.Now()
	r := e.legacySend(t, h, "tools/call", map[string]any{"name": "slow", "arguments": map[string]any{"ms": 60000}})
	if took := time.Since(start); took < mirrorHandleAfter || took > 2*time.Second {
		t.Errorf("handed over after %s, want about %s", took, mirrorHandleAfter)
	}
	id := handedOver(t, r, "")

	// tasks_result waits HandleAfter and answers "still running" again.
	start = time.Now()
	r = e.legacySend(t, h, "tools/call", map[string]any{"name": "tasks_result", "arguments": map[string]any{"taskId": id}})
	if took := time.Since(start); took < mirrorHandleAfter {
		t.Errorf("tasks_result answered after %s, before the wait", took)
	}
	if handedOver(t, r, "") != id {
		t.Fatalf("tasks_result named another task: %s", r)
	}
	// Another session of the same principal is the same owner; another
	// principal's is not.
	other := e.sessionAs(t, "eve", "2025-06-18", map[string]any{})
	if r := e.legacySend(t, other, "tools/call", map[string]any{"name": "tasks_cancel", "arguments": map[string]any{"taskId": id}}); r.err == nil || r.err.Code != -32602 {
		t.Fatalf("tasks_cancel by another principal: want -32602, got %s", r)
	}
	if tk, _ := e.store.Get(t.Context(), id); tk.Status != taskstate.Working {
		t.Fatalf("another principal's tasks_cancel changed the task: %s", tk.Status)
	}
	r = e.legacySend(t, h, "tools/call", map[string]any{"name": "tasks_cancel", "arguments": map[string]any{"taskId": id}})
	if r.err != nil || !strings.Contains(string(r.result), `"status":"cancelled"`) {
		t.Fatalf("tasks_cancel: %s", r)
	}
	if tk, _ := e.store.Get(t.Context(), id); tk.Status != taskstate.Cancelled {
		t.Fatalf("after tasks_cancel: %s", tk.Status)
	}
}

// TestHandOverTaskClient: a 2025-11-25 client that negotiated tasks but
// called inline is handed over too, pointed at tasks/get (it has no mirror
// tools).
func TestHandOverTaskClient(t *testing.T) {
	t.Parallel()
	e := newMirrorEnv(t)
	h := e.sessionAs(t, "carol", "2025-11-25", map[string]any{"tasks": map[string]any{}})
	r := e.legacySend(t, h, "tools/call", map[string]any{"name": "slow", "arguments": map[string]any{"ms": 60000}})
	var res struct {
		Content []struct{ Text string } `json:"content"`
		S       struct {
			TaskID string `json:"taskId"`
		} `json:"structuredContent"`
	}
	if r.err != nil || json.Unmarshal(r.result, &res) != nil || res.S.TaskID == "" || len(res.Content) != 1 || !strings.Contains(res.Content[0].Text, "tasks/get") {
		t.Fatalf("want a hand-over pointing at tasks/get, got %s", r)
	}
	g := e.legacySend(t, h, "tasks/get", map[string]any{"taskId": res.S.TaskID})
	if g.err != nil || !strings.Contains(string(g.result), `"status":"working"`) {
		t.Fatalf("tasks/get of the handed-over task: %s", g)
	}
}

// sseRequests are the server-to-client requests an SSE reply body carries.
func sseRequests(body []byte) []map[string]json.RawMessage {
	var out []map[string]json.RawMessage
	for _, line := range strings.Split(string(body), "\n") {
		d, ok := strings.CutPrefix(line, "data: ")
		var m map[string]json.RawMessage
		if ok && json.Unmarshal([]byte(d), &m) == nil && m["method"] != nil && m["id"] != nil {
			out = append(out, m)
		}
	}
	return out
}

// TestHandOverKeepsElicitation: a 2025-06-18 client that declared
// elicitation is asked on its own stream while the call waits; handed over
// unanswered, the question comes again on the tasks_result stream, and the
// answer (a POSTed response) lets tasks_result return the tool's result.
func TestHandOverKeepsElicitation(t *testing.T) {
	t.Parallel()
	e := newMirrorEnv(t)
	h := e.sessionAs(t, "dora", "2025-06-18", map[string]any{"elicitation": map[string]any{}})
	r := e.legacySend(t, h, "tools/call", map[string]any{"name": "ask", "arguments": map[string]any{}})
	if len(sseRequests(r.body)) != 1 {
		t.Fatalf("the inline call did not ask on its stream: %s", r.body)
	}
	var res struct {
		S struct{ TaskID, Status string } `json:"structuredContent"`
	}
	if r.err != nil || json.Unmarshal(r.result, &res) != nil || res.S.Status != "input_required" {
		t.Fatalf("want a hand-over with status input_required, got %s", r)
	}
	r = e.legacySend(t, h, "tools/call", map[string]any{"name": "tasks_result", "arguments": map[string]any{"taskId": res.S.TaskID}})
	asked := sseRequests(r.body)
	if len(asked) != 1 || str(asked[0]["method"]) != "elicitation/create" {
		t.Fatalf("tasks_result did not ask again: %s", r.body)
	}
	answer, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": asked[0]["id"], "result": map[string]any{"action": "accept", "content": map[string]any{"confirm": true}}})
	if a := e.send(t, h, answer, sendOpts{}); a.status != http.StatusAccepted {
		t.Fatalf("the answer: %s", a)
	}
	r = e.legacySend(t, h, "tools/call", map[string]any{"name": "tasks_result", "arguments": map[string]any{"taskId": res.S.TaskID}})
	if r.err != nil || resultText(t, r.result) != "action=accept confirm=true" {
		t.Fatalf("tasks_result after the answer: %s", r)
	}
}
