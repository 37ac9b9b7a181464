package mcpfront_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/mcpqueue/mcpqueue/backend"
	"github.com/mcpqueue/mcpqueue/consumer"
	"github.com/mcpqueue/mcpqueue/internal/testenv"
	"github.com/mcpqueue/mcpqueue/mcpfront"
	"github.com/mcpqueue/mcpqueue/producer"
	"github.com/mcpqueue/mcpqueue/taskstate"
	"github.com/mcpqueue/mcpqueue/taskstate/natskv"
)

const (
	version     = "2026-07-28"
	tasksExt    = "io.modelcontextprotocol/tasks"
	metaVersion = "io.modelcontextprotocol/protocolVersion"
	metaCaps    = "io.modelcontextprotocol/clientCapabilities"
	metaInfo    = "io.modelcontextprotocol/clientInfo"
	serverInfo  = "io.modelcontextprotocol/serverInfo"
	maxBody     = 16 << 10
	taskTTL     = 10 * time.Minute
	pollEvery   = 100 * time.Millisecond
)

// ---- the system under test: front end + worker on an embedded NATS ----

type echoArgs struct {
	Text string `json:"text"`
}

type none struct{}

type napArgs struct {
	Ms int `json:"ms"`
}

// echoTool answers "echo: " and its text.
func echoTool(ctx context.Context, c *consumer.Call[echoArgs]) (*consumer.Result, error) {
	return consumer.TextResult("echo: " + c.Args.Text), nil
}

// askTool elicits a confirmation and answers with the action and the value.
func askTool(ctx context.Context, c *consumer.Call[none]) (*consumer.Result, error) {
	r, err := c.Elicit(ctx, "confirm", "Really?", map[string]any{
		"type": "object", "properties": map[string]any{"confirm": map[string]any{"type": "boolean"}},
	})
	if err != nil {
		return nil, err
	}
	return consumer.TextResult(fmt.Sprintf("action=%s confirm=%v", r.Action, r.Content["confirm"])), nil
}

// blockTool runs until it is cancelled.
func blockTool(ctx context.Context, _ *consumer.Call[none]) (*consumer.Result, error) {
	<-ctx.Done()
	return nil, ctx.Err()
}

// testTools are the worker's tools. Each covers one way a call can end.
func testTools() *consumer.Mux {
	mux := consumer.NewMux()
	consumer.Handle(mux, consumer.Tool{Name: "echo", Description: "echoes text"}, echoTool)
	consumer.Handle(mux, consumer.Tool{Name: "echo_task", InlineWait: -1}, echoTool) // never answered inline
	consumer.Handle(mux, consumer.Tool{Name: "inline_only", TaskSupport: consumer.TaskForbidden},
		func(ctx context.Context, c *consumer.Call[none]) (*consumer.Result, error) {
			return consumer.TextResult("inline"), nil
		})
	consumer.Handle(mux, consumer.Tool{Name: "required_job", TaskSupport: consumer.TaskRequired},
		func(ctx context.Context, c *consumer.Call[none]) (*consumer.Result, error) {
			return consumer.TextResult("required done"), nil
		})
	consumer.Handle(mux, consumer.Tool{Name: "ask"}, askTool)
	consumer.Handle(mux, consumer.Tool{Name: "protocol_fail"},
		func(ctx context.Context, c *consumer.Call[none]) (*consumer.Result, error) {
			return nil, &consumer.ProtocolError{Code: -32050, Message: "custom failure", Data: map[string]any{"why": "test"}}
		})
	consumer.Handle(mux, consumer.Tool{Name: "tool_error"},
		func(ctx context.Context, c *consumer.Call[none]) (*consumer.Result, error) {
			return nil, consumer.ToolError(errors.New("bad input, try again"))
		})
	consumer.Handle(mux, consumer.Tool{Name: "nap", Description: "takes ms milliseconds"},
		func(ctx context.Context, c *consumer.Call[napArgs]) (*consumer.Result, error) {
			select { // the tool's work: it takes this long
			case <-time.After(time.Duration(c.Args.Ms) * time.Millisecond):
				return consumer.TextResult("rested"), nil
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		})
	consumer.Handle(mux, consumer.Tool{Name: "block"}, blockTool)
	addCatalogFixtures(mux) // resources_test.go
	return mux
}

type env struct {
	url        string
	handler    http.Handler // the front end itself, for calls without HTTP
	js         jetstream.JetStream
	store      *natskv.Store  // the front end's store
	front      *testenv.Seams // the front end's connection
	taskBucket string
}

// tasksOf returns the records of tool's tasks, read straight from the bucket
// (a sync call never shows its task id).
func (e *env) tasksOf(t *testing.T, tool string) []*taskstate.Task {
	t.Helper()
	out, err := e.findTasks(t.Context(), tool)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func (e *env) findTasks(ctx context.Context, tool string) ([]*taskstate.Task, error) {
	kv, err := e.js.KeyValue(ctx, e.taskBucket)
	if err != nil {
		return nil, err
	}
	ids, err := kv.Keys(ctx)
	if errors.Is(err, jetstream.ErrNoKeysFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []*taskstate.Task
	for _, id := range ids {
		tk, err := e.store.Get(ctx, id)
		if err == nil && tk.Tool == tool {
			out = append(out, tk)
		}
	}
	return out, nil
}

// waitRecord polls the record of tool's only task until cond holds.
func (e *env) waitRecord(t *testing.T, tool string, cond func(*taskstate.Task) bool) *taskstate.Task {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		tasks := e.tasksOf(t, tool)
		if len(tasks) > 1 {
			t.Fatalf("%d tasks of %s, want one", len(tasks), tool)
		}
		if len(tasks) == 1 && cond(tasks[0]) {
			return tasks[0]
		}
		if time.Now().After(deadline) {
			t.Fatalf("the task of %s never reached the expected state: %+v", tool, tasks)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// system is what both test environments run: an embedded NATS, a worker
// on its own connection (as a separate process would have) and the front
// end on another, behind an httptest server.
type system struct {
	nats  *testenv.NATS
	front *testenv.Seams // the front end's connection
	srv   *mcpfront.Server
	url   string
}

// startSystem starts a system whose worker (called id, running
// concurrency handlers at once) serves mux and whose front end runs with
// fcfg, and returns once the front end's catalog lists the tools. The
// worker's lease is long and its tasks never park, so that no renewal or
// park writes a record during a test ("nothing changed" compares
// revisions or the whole bucket).
func startSystem(t testing.TB, mux *consumer.Mux, id string, concurrency int, fcfg *mcpfront.Config) *system {
	t.Helper()
	n := testenv.StartNATS(t)
	ws := n.Connect(t) // the worker's connection and seams
	w := consumer.New(backend.Backend{Queue: ws.Queue, Store: ws.Store, Catalog: ws.Store, Bus: ws.Bus}, &consumer.Config{
		Concurrency: concurrency, Lease: time.Hour, ShutdownGrace: 100 * time.Millisecond, ID: id, ParkAfter: -1,
	})
	testenv.RunWorker(t, w, mux)

	fs := n.Connect(t) // the front end's
	prod := producer.New(fs.Store, producer.QueueExecutor{Queue: fs.Queue, Bus: fs.Bus}, &producer.Config{TTL: taskTTL, PollInterval: pollEvery})
	front := mcpfront.New(prod, backend.Backend{Store: fs.Store, Catalog: fs.Store, Bus: fs.Bus}, fcfg)
	hs := httptest.NewServer(front)
	t.Cleanup(hs.Close)
	testenv.WaitTools(t, fs.Store, mux)
	return &system{nats: n, front: fs, srv: front, url: hs.URL}
}

// newEnv starts the system with the test tools and the front end
// configured by opts.
func newEnv(t testing.TB, opts ...func(*mcpfront.Config)) *env {
	t.Helper()
	fcfg := &mcpfront.Config{
		Name: "mcpfront-test", Version: "9.9.9",
		HandleAfter: 15 * time.Second, MaxBody: maxBody, StateKey: []byte("test-key"),
		InlineWait: -1, // tests look at the task a call starts; inline_test.go turns it on
	}
	for _, o := range opts {
		o(fcfg)
	}
	// A slot per route (tools, prompt, resources, completions) keeps a
	// pull open on each, so no job waits for the worker's sweep of the
	// routes it has no pull on.
	sys := startSystem(t, testTools(), "test-worker", 16, fcfg)
	return &env{url: sys.url, handler: sys.srv, js: sys.front.JS, store: sys.front.Store, front: sys.front, taskBucket: sys.nats.KV.TaskBucket}
}

// counts returns how many messages were ever written to the job stream and
// to the task bucket. Equal counts before and after a request mean it
// enqueued nothing and changed no record.
func (e *env) counts(t *testing.T) (jobs, records uint64) { return e.front.Counts(t) }

// ---- building and sending requests ----

func meta(ext bool) map[string]any {
	caps := map[string]any{"elicitation": map[string]any{}}
	if ext {
		caps["extensions"] = map[string]any{tasksExt: map[string]any{}}
	}
	return map[string]any{
		metaVersion: version,
		metaCaps:    caps,
		metaInfo:    map[string]any{"name": "mcpfront-test-client", "version": "0.0.1"},
	}
}

// newRequest returns a valid 2026-07-28 request (as a map, to be broken by
// the caller) and its headers.
func newRequest(method string, id any, params map[string]any, ext bool) (map[string]any, http.Header) {
	p := map[string]any{"_meta": meta(ext)}
	for k, v := range params {
		p[k] = v
	}
	m := map[string]any{"jsonrpc": "2.0", "id": id, "method": method, "params": p}
	h := http.Header{}
	h.Set("Content-Type", "application/json")
	h.Set("Accept", "application/json, text/event-stream")
	h.Set("MCP-Protocol-Version", version)
	h.Set("Mcp-Method", method)
	field := map[string]string{"tools/call": "name", "prompts/get": "name", "resources/read": "uri", "tasks/get": "taskId", "tasks/update": "taskId", "tasks/cancel": "taskId"}[method]
	if v, ok := params[field].(string); ok && field != "" {
		h.Set("Mcp-Name", v)
	}
	return m, h
}

type rpcError struct {
	Code    int             `json:"code"`
	Message string          `json:"message"`
	Data    json.RawMessage `json:"data"`
}

type reply struct {
	status int
	header http.Header
	body   []byte
	// The JSON-RPC message, when the body holds one.
	jsonrpc bool
	id      json.RawMessage
	result  json.RawMessage
	err     *rpcError
}

func (r reply) String() string {
	return fmt.Sprintf("HTTP %d %s %s", r.status, r.header.Get("Content-Type"), bytes.TrimSpace(r.body))
}

func readReply(resp *http.Response) (reply, error) {
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return reply{}, err
	}
	r := reply{status: resp.StatusCode, header: resp.Header, body: body}
	msg := body
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		// The response is the last data line of the stream.
		for _, line := range strings.Split(string(body), "\n") {
			if d, ok := strings.CutPrefix(line, "data: "); ok {
				msg = []byte(d)
			}
		}
	}
	var env struct {
		JSONRPC string          `json:"jsonrpc"`
		ID      json.RawMessage `json:"id"`
		Result  json.RawMessage `json:"result"`
		Error   *rpcError       `json:"error"`
	}
	if json.Unmarshal(msg, &env) == nil && env.JSONRPC == "2.0" {
		r.jsonrpc, r.id, r.result, r.err = true, env.ID, env.Result, env.Error
	}
	return r, nil
}

type sendOpts struct {
	verb    string // HTTP method; POST by default
	host    string // Host header override
	chunked bool   // send without Content-Length
}

func (e *env) send(t *testing.T, h http.Header, body []byte, o sendOpts) reply {
	t.Helper()
	verb := o.verb
	if verb == "" {
		verb = http.MethodPost
	}
	var rd io.Reader = bytes.NewReader(body)
	if o.chunked {
		rd = io.MultiReader(rd) // hides the length: the client sends it chunked
	}
	if verb == http.MethodGet || verb == http.MethodDelete {
		rd = nil
	}
	req, err := http.NewRequestWithContext(t.Context(), verb, e.url, rd)
	if err != nil {
		t.Fatal(err)
	}
	req.Header = h.Clone()
	if o.host != "" {
		req.Host = o.host
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", verb, e.url, err)
	}
	r, err := readReply(resp)
	if err != nil {
		t.Fatalf("reading reply: %v", err)
	}
	return r
}

// sendRaw writes the request bytes on a TCP connection itself, so headers
// can lie about the body, and reads the first response.
func (e *env) sendRaw(t *testing.T, head string, body []byte) reply {
	t.Helper()
	u, _ := url.Parse(e.url)
	conn, err := net.DialTimeout("tcp", u.Host, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
	go func() { // the server may answer before it has read everything
		_, _ = io.WriteString(conn, strings.ReplaceAll(head, "HOST", u.Host))
		_, _ = conn.Write(body)
	}()
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("raw request: no response: %v", err)
	}
	r, err := readReply(resp)
	if err != nil && !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("raw request: reading reply: %v", err)
	}
	return r
}

// legacySession opens a 2025-11-25 session, sending the headers of h (an
// Authorization, say), and returns the headers of a request in it.
func (e *env) legacySession(t *testing.T, h http.Header) http.Header {
	t.Helper()
	h = h.Clone()
	if h == nil {
		h = http.Header{}
	}
	h.Set("Content-Type", "application/json")
	h.Set("Accept", "application/json, text/event-stream")
	body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": map[string]any{
		"protocolVersion": "2025-11-25", "capabilities": map[string]any{}, "clientInfo": map[string]any{"name": "mcpfront-test", "version": "1"},
	}})
	r := e.send(t, h, body, sendOpts{})
	session := r.header.Get("Mcp-Session-Id")
	if r.status != 200 || session == "" {
		t.Fatalf("initialize: %s", r)
	}
	h.Set("MCP-Protocol-Version", "2025-11-25")
	h.Set("Mcp-Session-Id", session)
	return h
}

// call sends a valid request and fails the test unless it gets a JSON-RPC
// result. It returns the result's fields.
func (e *env) call(t *testing.T, method string, params map[string]any, ext bool) map[string]json.RawMessage {
	t.Helper()
	m, h := newRequest(method, "call-"+method, params, ext)
	body, _ := json.Marshal(m)
	r := e.send(t, h, body, sendOpts{})
	if r.status != http.StatusOK || !r.jsonrpc || r.err != nil || r.result == nil {
		t.Fatalf("%s %v: want a result, got %s", method, params, r)
	}
	var out map[string]json.RawMessage
	if err := json.Unmarshal(r.result, &out); err != nil {
		t.Fatalf("%s: result is not an object: %s", method, r.result)
	}
	return out
}

func str(raw json.RawMessage) string {
	var s string
	_ = json.Unmarshal(raw, &s)
	return s
}

// startTask calls tool with the tasks extension and returns the task id.
func (e *env) startTask(t *testing.T, tool string, args any) string {
	t.Helper()
	res := e.call(t, "tools/call", map[string]any{"name": tool, "arguments": args}, true)
	if str(res["resultType"]) != "task" {
		t.Fatalf("tools/call %s: want a task handle, got %v", tool, res)
	}
	return str(res["taskId"])
}

// getTask is tasks/get.
func (e *env) getTask(t *testing.T, id string) map[string]json.RawMessage {
	t.Helper()
	return e.call(t, "tasks/get", map[string]any{"taskId": id}, true)
}

// waitStatus polls tasks/get until the task has one of the statuses.
func (e *env) waitStatus(t *testing.T, id string, statuses ...string) map[string]json.RawMessage {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		res := e.getTask(t, id)
		if slices.Contains(statuses, str(res["status"])) {
			return res
		}
		if time.Now().After(deadline) {
			t.Fatalf("task %s never reached %v; last tasks/get: %v", id, statuses, res)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// waitEnded waits until task id is terminal and returns its tasks/get.
func (e *env) waitEnded(t *testing.T, id string) map[string]json.RawMessage {
	t.Helper()
	return e.waitStatus(t, id, "completed", "failed", "cancelled")
}

// waitCompleted waits until task id is terminal and fails t unless it
// completed with the text want.
func (e *env) waitCompleted(t *testing.T, id, want string) {
	t.Helper()
	if done := e.waitEnded(t, id); str(done["status"]) != "completed" || resultText(t, done["result"]) != want {
		t.Fatalf("task %s: want completed with %q, got %v", id, want, done)
	}
}

func resultText(t *testing.T, raw json.RawMessage) string {
	t.Helper()
	var r consumer.Result
	if err := json.Unmarshal(raw, &r); err != nil || len(r.Content) == 0 || r.Content[0].Type != "text" {
		t.Fatalf("not a CallToolResult with text content: %s", raw)
	}
	if r.Content[0].Text == nil { // a text block without its text
		return ""
	}
	return *r.Content[0].Text
}

func keys(m map[string]json.RawMessage) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// ---- bad input ----

type badCase struct {
	name   string
	method string         // JSON-RPC method; tools/call by default
	params map[string]any // besides _meta; an echo call by default
	noExt  bool           // do not declare the tasks extension
	edit   func(m map[string]any, h http.Header)
	body   func(valid []byte) []byte // replaces the encoded body
	opts   sendOpts
	raw    func(valid []byte) (head string, body []byte) // send over raw TCP

	status int
	code   int  // expected JSON-RPC error code; 0: a result is expected
	noRPC  bool // the reply need not be JSON-RPC at all (403, 202)
	nullID bool // the request id cannot be known: the error carries null
	writes bool // a success that legitimately enqueues and writes
	check  func(r reply) []string
	// bug names a known server bug that makes this row fail: the row is
	// then skipped with what went wrong (side effects still fail it).
	bug string
}

func metaOf(m map[string]any) map[string]any {
	return m["params"].(map[string]any)["_meta"].(map[string]any)
}

func b64(s string) string { return "=?base64?" + base64.StdEncoding.EncodeToString([]byte(s)) + "?=" }

func wantData(path string, want any) func(r reply) []string {
	return func(r reply) []string {
		if r.err == nil {
			return []string{"no error"}
		}
		var data any
		_ = json.Unmarshal(r.err.Data, &data)
		cur := data
		for _, p := range strings.Split(path, ".") {
			m, ok := cur.(map[string]any)
			if !ok {
				return []string{fmt.Sprintf("error.data %s: no %q in %s", path, p, r.err.Data)}
			}
			cur = m[p]
		}
		gb, _ := json.Marshal(cur)
		wb, _ := json.Marshal(want)
		if string(gb) != string(wb) {
			return []string{fmt.Sprintf("error.data.%s = %s, want %s", path, gb, wb)}
		}
		return nil
	}
}

func all(checks ...func(r reply) []string) func(r reply) []string {
	return func(r reply) []string {
		var out []string
		for _, c := range checks {
			out = append(out, c(r)...)
		}
		return out
	}
}

var requiredTasksCap = map[string]any{"extensions": map[string]any{tasksExt: map[string]any{}}}

func resultIs(field, want string) func(r reply) []string {
	return func(r reply) []string {
		var m map[string]json.RawMessage
		_ = json.Unmarshal(r.result, &m)
		if got := str(m[field]); got != want {
			return []string{fmt.Sprintf("result.%s = %q, want %q (result %s)", field, got, want, r.result)}
		}
		return nil
	}
}

func isToolError(r reply) []string {
	var res struct {
		ResultType string `json:"resultType"`
		IsError    bool   `json:"isError"`
		Content    []any  `json:"content"`
		TaskID     string `json:"taskId"`
	}
	_ = json.Unmarshal(r.result, &res)
	if !res.IsError || res.ResultType != "complete" || len(res.Content) == 0 || res.TaskID != "" {
		return []string{fmt.Sprintf("want a complete CallToolResult with isError:true, got %s", r.result)}
	}
	return nil
}

func TestBadInput(t *testing.T) {
	t.Parallel()
	e := newEnv(t)

	// Fixtures: a task waiting for input, and a completed one.
	askID := e.startTask(t, "ask", map[string]any{})
	asking := e.waitStatus(t, askID, "input_required")
	var reqs map[string]json.RawMessage
	_ = json.Unmarshal(asking["inputRequests"], &reqs)
	if len(reqs) != 1 {
		t.Fatalf("ask: want one input request, got %s", asking["inputRequests"])
	}
	askKey := keys(reqs)[0]
	doneID := e.startTask(t, "echo", map[string]any{"text": "x"})
	e.waitStatus(t, doneID, "completed")
	unknownID := taskstate.NewID()

	big := strings.Repeat("x", 2*maxBody)
	update := func(responses any) map[string]any {
		return map[string]any{"taskId": askID, "inputResponses": responses}
	}

	cases := []badCase{
		// JSON-RPC framing.
		{name: "malformed JSON", body: func(b []byte) []byte { return b[:len(b)/2] }, status: 400, code: -32700, nullID: true},
		{name: "empty body", body: func([]byte) []byte { return nil }, status: 400, code: -32700, nullID: true},
		{name: "batch array", body: func(b []byte) []byte { return append(append([]byte("["), b...), ']') }, status: 400, code: -32600, nullID: true},
		{name: "jsonrpc 1.0", edit: func(m map[string]any, _ http.Header) { m["jsonrpc"] = "1.0" }, status: 400, code: -32600},
		{name: "jsonrpc missing", edit: func(m map[string]any, _ http.Header) { delete(m, "jsonrpc") }, status: 400, code: -32600},
		{name: "missing id is a notification: accepted, never run", edit: func(m map[string]any, _ http.Header) { delete(m, "id") }, status: 202, noRPC: true,
			check: func(r reply) []string {
				if len(bytes.TrimSpace(r.body)) != 0 {
					return []string{"a notification got a body: " + string(r.body)}
				}
				return nil
			}},
		{name: "null id", edit: func(m map[string]any, _ http.Header) { m["id"] = nil }, status: 400, code: -32600, nullID: true},
		// JSON-RPC 2.0 §5: an id that could not be detected is null in the error.
		{name: "object id", edit: func(m map[string]any, _ http.Header) { m["id"] = map[string]any{"a": 1} }, status: 400, code: -32600, nullID: true},
		{name: "boolean id", edit: func(m map[string]any, _ http.Header) { m["id"] = true }, status: 400, code: -32600, nullID: true},
		// Valid JSON that is not a valid request is -32600, not a parse error.
		{name: "method not a string", edit: func(m map[string]any, _ http.Header) { m["method"] = 5 }, status: 400, code: -32600, nullID: true},
		{name: "jsonrpc a number", edit: func(m map[string]any, _ http.Header) { m["jsonrpc"] = 2.0 }, status: 400, code: -32600, nullID: true},
		{name: "numeric id echoed", edit: func(m map[string]any, h http.Header) { m["id"] = 42; h.Del("Mcp-Name") }, status: 400, code: -32020},

		// HTTP.
		{name: "GET", opts: sendOpts{verb: http.MethodGet}, status: 405, code: -32600, nullID: true,
			check: func(r reply) []string {
				if r.header.Get("Allow") != "POST" {
					return []string{"405 without Allow: POST"}
				}
				return nil
			}},
		{name: "DELETE", opts: sendOpts{verb: http.MethodDelete}, status: 405, code: -32600, nullID: true},
		{name: "Content-Type text/plain", edit: func(_ map[string]any, h http.Header) { h.Set("Content-Type", "text/plain") }, status: 415, code: -32600, nullID: true},
		{name: "no Content-Type", edit: func(_ map[string]any, h http.Header) { h.Del("Content-Type") }, status: 415, code: -32600, nullID: true},
		{name: "Content-Type with charset accepted", method: "server/discover", params: map[string]any{},
			edit: func(_ map[string]any, h http.Header) { h.Set("Content-Type", "application/json; charset=utf-8") }, status: 200, check: resultIs("resultType", "complete")},
		{name: "Accept text/html only", edit: func(_ map[string]any, h http.Header) { h.Set("Accept", "text/html") }, status: 406, code: -32600},
		{name: "oversized body", params: map[string]any{"name": "echo", "arguments": map[string]any{"text": big}}, status: 413, code: -32600, nullID: true},
		{name: "oversized body, chunked (no Content-Length)", params: map[string]any{"name": "echo", "arguments": map[string]any{"text": big}},
			opts: sendOpts{chunked: true}, status: 413, code: -32600, nullID: true},
		{name: "oversized body, Content-Length claims more than is sent", params: map[string]any{"name": "echo", "arguments": map[string]any{"text": big}},
			raw: func(b []byte) (string, []byte) {
				return fmt.Sprintf("POST / HTTP/1.1\r\nHost: HOST\r\nContent-Type: application/json\r\nMCP-Protocol-Version: %s\r\nMcp-Method: tools/call\r\nMcp-Name: echo\r\nContent-Length: %d\r\n\r\n", version, 10*len(b)), b
			}, status: 413, code: -32600, nullID: true},
		{name: "Content-Length claims less than is sent: only that much is read", params: map[string]any{"name": "echo", "arguments": map[string]any{"text": big}},
			raw: func(b []byte) (string, []byte) {
				return fmt.Sprintf("POST / HTTP/1.1\r\nHost: HOST\r\nContent-Type: application/json\r\nMCP-Protocol-Version: %s\r\nMcp-Method: tools/call\r\nMcp-Name: echo\r\nContent-Length: 40\r\n\r\n", version), b
			}, status: 400, code: -32700, nullID: true},

		// _meta and the version.
		{name: "missing _meta", edit: func(m map[string]any, _ http.Header) { delete(m["params"].(map[string]any), "_meta") }, status: 400, code: -32602},
		{name: "missing params", edit: func(m map[string]any, _ http.Header) { delete(m, "params") }, status: 400, code: -32602},
		{name: "params not an object", edit: func(m map[string]any, _ http.Header) { m["params"] = []any{1} }, status: 400, code: -32602},
		{name: "_meta not an object", edit: func(m map[string]any, _ http.Header) { m["params"].(map[string]any)["_meta"] = "x" }, status: 400, code: -32602},
		{name: "missing protocolVersion", edit: func(m map[string]any, _ http.Header) { delete(metaOf(m), metaVersion) }, status: 400, code: -32602},
		{name: "protocolVersion not a string", edit: func(m map[string]any, _ http.Header) { metaOf(m)[metaVersion] = 20260728 }, status: 400, code: -32602},
		{name: "missing clientCapabilities", edit: func(m map[string]any, _ http.Header) { delete(metaOf(m), metaCaps) }, status: 400, code: -32602},
		{name: "clientCapabilities not an object", edit: func(m map[string]any, _ http.Header) { metaOf(m)[metaCaps] = "all" }, status: 400, code: -32602},
		{name: "missing MCP-Protocol-Version header", edit: func(_ map[string]any, h http.Header) { h.Del("MCP-Protocol-Version") }, status: 400, code: -32020},
		{name: "header 2025-11-25, _meta 2026-07-28", edit: func(_ map[string]any, h http.Header) { h.Set("MCP-Protocol-Version", "2025-11-25") }, status: 400, code: -32020},
		{name: "header 2026-07-28, _meta 2025-11-25", edit: func(m map[string]any, _ http.Header) { metaOf(m)[metaVersion] = "2025-11-25" }, status: 400, code: -32020},
		{name: "unsupported version in both", edit: func(m map[string]any, h http.Header) {
			metaOf(m)[metaVersion] = "2099-01-01"
			h.Set("MCP-Protocol-Version", "2099-01-01")
		}, status: 400, code: -32022, check: all(wantData("supported", []string{version}), wantData("requested", "2099-01-01"))},

		// Routing headers.
		{name: "missing Mcp-Method", edit: func(_ map[string]any, h http.Header) { h.Del("Mcp-Method") }, status: 400, code: -32020},
		{name: "Mcp-Method tasks/get on a tools/call body", edit: func(_ map[string]any, h http.Header) { h.Set("Mcp-Method", "tasks/get") }, status: 400, code: -32020},
		{name: "Mcp-Method differs in case", edit: func(_ map[string]any, h http.Header) { h.Set("Mcp-Method", "Tools/Call") }, status: 400, code: -32020},
		{name: "missing Mcp-Name on tools/call", edit: func(_ map[string]any, h http.Header) { h.Del("Mcp-Name") }, status: 400, code: -32020},
		{name: "Mcp-Name mismatch on tools/call", edit: func(_ map[string]any, h http.Header) { h.Set("Mcp-Name", "inline_only") }, status: 400, code: -32020},
		{name: "base64 Mcp-Name of another name", edit: func(_ map[string]any, h http.Header) { h.Set("Mcp-Name", b64("inline_only")) }, status: 400, code: -32020},
		{name: "missing Mcp-Name on tasks/get", method: "tasks/get", params: map[string]any{"taskId": askID},
			edit: func(_ map[string]any, h http.Header) { h.Del("Mcp-Name") }, status: 400, code: -32020},
		{name: "Mcp-Name mismatch on tasks/get", method: "tasks/get", params: map[string]any{"taskId": askID},
			edit: func(_ map[string]any, h http.Header) { h.Set("Mcp-Name", doneID) }, status: 400, code: -32020},
		{name: "Mcp-Name mismatch on tasks/cancel cancels nothing", method: "tasks/cancel", params: map[string]any{"taskId": askID},
			edit: func(_ map[string]any, h http.Header) { h.Set("Mcp-Name", doneID) }, status: 400, code: -32020},
		{name: "Mcp-Name mismatch on tasks/update answers nothing", method: "tasks/update",
			params: update(map[string]any{askKey: map[string]any{"action": "accept", "content": map[string]any{"confirm": true}}}),
			edit:   func(_ map[string]any, h http.Header) { h.Set("Mcp-Name", unknownID) }, status: 400, code: -32020},
		{name: "base64 Mcp-Name accepted on tasks/get", method: "tasks/get", params: map[string]any{"taskId": askID},
			edit: func(_ map[string]any, h http.Header) { h.Set("Mcp-Name", b64(askID)) }, status: 200,
			check: all(resultIs("taskId", askID), resultIs("status", "input_required"))},
		{name: "base64 Mcp-Name accepted on tools/call", params: map[string]any{"name": "echo", "arguments": map[string]any{"text": "b64"}}, noExt: true,
			edit: func(_ map[string]any, h http.Header) { h.Set("Mcp-Name", b64("echo")) }, status: 200, writes: true,
			check: resultIs("resultType", "complete")},

		// Methods.
		{name: "unknown method", method: "foo/bar", params: map[string]any{}, status: 404, code: -32601},
		{name: "ping (removed in 2026-07-28)", method: "ping", params: map[string]any{}, status: 404, code: -32601},
		{name: "initialize (2026 envelope)", method: "initialize", params: map[string]any{"protocolVersion": "2025-11-25", "capabilities": map[string]any{}}, status: 404, code: -32601},
		// initialize on the 2026-07-28 wire (its header and _meta) is a removed
		// method; a 2025-era initialize opens a session (legacy tests).
		{name: "initialize (2026-07-28 request)", method: "initialize", edit: func(m map[string]any, h http.Header) {
			p := m["params"].(map[string]any)
			p["protocolVersion"] = "2026-07-28"
		}, status: 404, code: -32601, check: wantData("supported", []string{version})},
		{name: "tasks/list", method: "tasks/list", params: map[string]any{}, status: 404, code: -32601},
		{name: "tasks/result", method: "tasks/result", params: map[string]any{"taskId": doneID}, status: 404, code: -32601},

		// Tasks extension gating and ids.
		{name: "tasks/get without the extension", method: "tasks/get", params: map[string]any{"taskId": doneID}, noExt: true,
			status: 400, code: -32021, check: wantData("requiredCapabilities", requiredTasksCap)},
		{name: "tasks/get without the extension, unknown id", method: "tasks/get", params: map[string]any{"taskId": unknownID}, noExt: true,
			status: 400, code: -32021, check: wantData("requiredCapabilities", requiredTasksCap)},
		{name: "tasks/cancel without the extension", method: "tasks/cancel", params: map[string]any{"taskId": askID}, noExt: true,
			status: 400, code: -32021, check: wantData("requiredCapabilities", requiredTasksCap)},
		{name: "tasks/update without the extension", method: "tasks/update",
			params: update(map[string]any{askKey: map[string]any{"action": "accept", "content": map[string]any{"confirm": true}}}), noExt: true,
			status: 400, code: -32021, check: wantData("requiredCapabilities", requiredTasksCap)},
		{name: "tasks/get unknown id", method: "tasks/get", params: map[string]any{"taskId": unknownID}, status: 200, code: -32602},
		{name: "tasks/get id no store could hold", method: "tasks/get", params: map[string]any{"taskId": "../x"}, status: 200, code: -32602},
		{name: "tasks/get without taskId", method: "tasks/get", params: map[string]any{},
			edit: func(_ map[string]any, h http.Header) { h.Set("Mcp-Name", "") }, status: 200, code: -32602},
		{name: "tasks/cancel unknown id", method: "tasks/cancel", params: map[string]any{"taskId": unknownID}, status: 200, code: -32602},
		{name: "tasks/update unknown id", method: "tasks/update", params: map[string]any{"taskId": unknownID, "inputResponses": map[string]any{}}, status: 200, code: -32602},

		// tools/call.
		{name: "unknown tool", params: map[string]any{"name": "no_such_tool", "arguments": map[string]any{}}, status: 200, code: -32602},
		{name: "unknown tool without the extension", params: map[string]any{"name": "no_such_tool", "arguments": map[string]any{}}, noExt: true, status: 200, code: -32602},
		{name: "arguments of the wrong type", params: map[string]any{"name": "echo", "arguments": map[string]any{"text": 5}}, status: 200, check: isToolError},
		{name: "arguments missing a required property", params: map[string]any{"name": "echo", "arguments": map[string]any{}}, status: 200, check: isToolError},
		{name: "arguments with an unknown property (sync)", params: map[string]any{"name": "echo", "arguments": map[string]any{"text": "a", "extra": 1}}, noExt: true, status: 200, check: isToolError},
		{name: "required-task tool without the extension", params: map[string]any{"name": "required_job", "arguments": map[string]any{}}, noExt: true,
			status: 400, code: -32021, check: wantData("requiredCapabilities", requiredTasksCap)},

		// tasks/update.
		{name: "tasks/update inputResponses null", method: "tasks/update", params: update(nil), status: 200, code: -32602},
		{name: "tasks/update without inputResponses", method: "tasks/update", params: map[string]any{"taskId": askID}, status: 200, code: -32602},
		{name: "tasks/update inputResponses an array", method: "tasks/update", params: update([]any{}), status: 200, code: -32602},
		{name: "tasks/update answer with a bad action", method: "tasks/update", params: update(map[string]any{askKey: map[string]any{"action": "maybe"}}), status: 200, code: -32602},
		{name: "tasks/update answer not an object", method: "tasks/update", params: update(map[string]any{askKey: "yes"}), status: 200, code: -32602},
		{name: "tasks/update answer content not an object", method: "tasks/update", params: update(map[string]any{askKey: map[string]any{"action": "accept", "content": "yes"}}), status: 200, code: -32602},
		{name: "tasks/update one good, one malformed answer changes nothing", method: "tasks/update",
			params: update(map[string]any{askKey: map[string]any{"action": "nope"}, "other-9": map[string]any{"action": "accept"}}), status: 200, code: -32602},
		{name: "tasks/update unknown keys: ack, nothing changes", method: "tasks/update",
			params: update(map[string]any{"not-asked-1": map[string]any{"action": "accept", "content": map[string]any{"confirm": true}}}), status: 200,
			check: func(r reply) []string {
				var m map[string]json.RawMessage
				_ = json.Unmarshal(r.result, &m)
				if str(m["resultType"]) != "complete" || m["taskId"] != nil || m["status"] != nil {
					return []string{"want an empty ack, got " + string(r.result)}
				}
				return nil
			}},

		// DNS rebinding / cross-site protection.
		{name: "Host not allowed", opts: sendOpts{host: "evil.example"}, status: 403, noRPC: true},
		{name: "Host that only starts with localhost", opts: sendOpts{host: "localhost.evil.example:80"}, status: 403, noRPC: true},
		{name: "cross-site Origin", edit: func(_ map[string]any, h http.Header) { h.Set("Origin", "https://evil.example") }, status: 403, noRPC: true},
		{name: "Origin that only starts with localhost", edit: func(_ map[string]any, h http.Header) { h.Set("Origin", "http://localhost.evil.example") }, status: 403, noRPC: true},
		{name: "Origin null", edit: func(_ map[string]any, h http.Header) { h.Set("Origin", "null") }, status: 403, noRPC: true},
		{name: "cross-site Origin on GET", opts: sendOpts{verb: http.MethodGet}, edit: func(_ map[string]any, h http.Header) { h.Set("Origin", "https://evil.example") }, status: 403, noRPC: true},
		{name: "loopback Origin localhost allowed", method: "server/discover", params: map[string]any{},
			edit: func(_ map[string]any, h http.Header) { h.Set("Origin", "http://localhost:5173") }, status: 200, check: resultIs("resultType", "complete")},
		{name: "loopback Origin 127.0.0.1 allowed", method: "tasks/get", params: map[string]any{"taskId": doneID},
			edit: func(_ map[string]any, h http.Header) { h.Set("Origin", "http://127.0.0.1:8080") }, status: 200, check: resultIs("status", "completed")},
		{name: "loopback Origin [::1] allowed", method: "server/discover", params: map[string]any{},
			edit: func(_ map[string]any, h http.Header) { h.Set("Origin", "http://[::1]:3000") }, status: 200, check: resultIs("resultType", "complete")},
		{name: "Host localhost allowed", method: "server/discover", params: map[string]any{}, opts: sendOpts{host: "localhost"}, status: 200, check: resultIs("resultType", "complete")},
	}

	e.runBadCases(t, cases)

	// After all of that, the waiting task still waits for its one answer.
	again := e.getTask(t, askID)
	if str(again["status"]) != "input_required" || string(again["inputRequests"]) != string(asking["inputRequests"]) {
		t.Errorf("the input_required task changed: %v", again)
	}
}

// runBadCases sends each case as a subtest and checks its reply and that it
// changed nothing (unless it may write).
func (e *env) runBadCases(t *testing.T, cases []badCase) {
	t.Helper()
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			method := c.method
			if method == "" {
				method = "tools/call"
			}
			params := c.params
			if params == nil {
				params = map[string]any{"name": "echo", "arguments": map[string]any{"text": "hi"}}
			}
			id := fmt.Sprintf("row-%d", i)
			m, h := newRequest(method, id, params, !c.noExt)
			if c.edit != nil {
				c.edit(m, h)
			}
			body, err := json.Marshal(m)
			if err != nil {
				t.Fatal(err)
			}
			if c.body != nil {
				body = c.body(body)
			}
			jobs0, recs0 := e.counts(t)
			var r reply
			if c.raw != nil {
				head, b := c.raw(body)
				r = e.sendRaw(t, head, b)
			} else {
				r = e.send(t, h, body, c.opts)
			}
			var bad []string
			if r.status != c.status {
				bad = append(bad, fmt.Sprintf("HTTP status %d, want %d", r.status, c.status))
			}
			switch {
			case c.noRPC:
			case !r.jsonrpc:
				bad = append(bad, "the body is not a JSON-RPC 2.0 message")
			case c.code != 0 && r.err == nil:
				bad = append(bad, fmt.Sprintf("want error %d, got a result", c.code))
			case c.code != 0 && r.err.Code != c.code:
				bad = append(bad, fmt.Sprintf("error code %d (%q), want %d", r.err.Code, r.err.Message, c.code))
			case c.code == 0 && (r.err != nil || r.result == nil):
				bad = append(bad, "want a result")
			}
			if r.jsonrpc && !c.noRPC {
				want := `"` + id + `"`
				if c.nullID {
					want = "null"
				} else if v, ok := m["id"]; ok {
					b, _ := json.Marshal(v)
					want = string(b)
				}
				if got := string(r.id); got != want {
					bad = append(bad, fmt.Sprintf("reply id %s, want %s", got, want))
				}
			}
			if c.check != nil && len(bad) == 0 {
				bad = append(bad, c.check(r)...)
			}
			if !c.writes {
				jobs1, recs1 := e.counts(t)
				if jobs1 != jobs0 {
					t.Errorf("%d job(s) enqueued\n  reply: %s", jobs1-jobs0, r)
				}
				if recs1 != recs0 {
					t.Errorf("%d task record write(s)\n  reply: %s", recs1-recs0, r)
				}
			}
			switch {
			case c.bug != "" && len(bad) > 0:
				t.Skipf("KNOWN SERVER BUG (%s): %s\n  reply: %s", c.bug, strings.Join(bad, "; "), r)
			case c.bug != "":
				t.Logf("known bug %q no longer reproduces: drop the annotation", c.bug)
			}
			for _, b := range bad {
				t.Errorf("%s\n  reply: %s", b, r)
			}
		})
	}
}

// ---- the happy paths ----

func TestDiscover(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	// server/discover needs no extension.
	res := e.call(t, "server/discover", map[string]any{}, false)
	if str(res["resultType"]) != "complete" {
		t.Errorf("resultType %s", res["resultType"])
	}
	var versions []string
	_ = json.Unmarshal(res["supportedVersions"], &versions)
	if !slices.Contains(versions, version) {
		t.Errorf("supportedVersions %s lacks %s", res["supportedVersions"], version)
	}
	var caps map[string]json.RawMessage
	if err := json.Unmarshal(res["capabilities"], &caps); err != nil {
		t.Fatalf("capabilities: %s", res["capabilities"])
	}
	if _, legacy := caps["tasks"]; legacy {
		t.Errorf("capabilities.tasks must not be advertised next to the extension: %s", res["capabilities"])
	}
	var ext map[string]json.RawMessage
	_ = json.Unmarshal(caps["extensions"], &ext)
	if got := string(ext[tasksExt]); got != "{}" {
		t.Errorf("capabilities.extensions[%q] = %q, want exactly {}", tasksExt, got)
	}
	var ttl int64
	if err := json.Unmarshal(res["ttlMs"], &ttl); err != nil || ttl <= 0 {
		t.Errorf("ttlMs %s: want a positive integer", res["ttlMs"])
	}
	if s := str(res["cacheScope"]); s != "public" && s != "private" {
		t.Errorf("cacheScope %q", s)
	}
	var m map[string]map[string]string
	_ = json.Unmarshal(res["_meta"], &m)
	if m[serverInfo]["name"] != "mcpfront-test" || m[serverInfo]["version"] != "9.9.9" {
		t.Errorf("_meta[%q] = %v", serverInfo, m[serverInfo])
	}
}

func TestToolsList(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	res := e.call(t, "tools/list", map[string]any{}, false)
	var tools []map[string]json.RawMessage
	if err := json.Unmarshal(res["tools"], &tools); err != nil {
		t.Fatalf("tools: %s", res["tools"])
	}
	var names []string
	for _, tool := range tools {
		names = append(names, str(tool["name"]))
		if tool["execution"] != nil {
			t.Errorf("tool %s carries execution (removed from the 2026-07-28 wire)", tool["name"])
		}
		if tool["inputSchema"] == nil {
			t.Errorf("tool %s has no inputSchema", tool["name"])
		}
	}
	// A client without the tasks extension also gets the mirror tools, last
	// (mirror_test.go).
	want := []string{"ask", "block", "echo", "echo_task", "inline_only", "nap", "protocol_fail", "required_job", "route", "tool_error", "tasks_result", "tasks_cancel"}
	if !slices.Equal(names, want) {
		t.Errorf("tools %v, want %v", names, want)
	}
	if str(res["resultType"]) != "complete" {
		t.Errorf("resultType %s", res["resultType"])
	}
}

func TestTaskPath(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	res := e.call(t, "tools/call", map[string]any{"name": "echo", "arguments": map[string]any{"text": "hi"}}, true)

	// A flat CreateTaskResult: the task fields and nothing of the result.
	allowed := []string{"resultType", "taskId", "status", "statusMessage", "createdAt", "lastUpdatedAt", "ttlMs", "pollIntervalMs", "_meta"}
	for k := range res {
		if !slices.Contains(allowed, k) {
			t.Errorf("CreateTaskResult has %q (forbidden or unknown): %v", k, res)
		}
	}
	id := str(res["taskId"])
	if str(res["resultType"]) != "task" || !taskstate.ValidID(id) || str(res["status"]) != "working" {
		t.Fatalf("handle: %v", res)
	}
	for _, k := range []string{"createdAt", "lastUpdatedAt"} {
		if _, err := time.Parse(time.RFC3339Nano, str(res[k])); err != nil {
			t.Errorf("%s %s: %v", k, res[k], err)
		}
	}
	if string(res["ttlMs"]) != fmt.Sprint(taskTTL.Milliseconds()) || string(res["pollIntervalMs"]) != fmt.Sprint(pollEvery.Milliseconds()) {
		t.Errorf("ttlMs=%s pollIntervalMs=%s, want %d and %d", res["ttlMs"], res["pollIntervalMs"], taskTTL.Milliseconds(), pollEvery.Milliseconds())
	}

	// Durable before the reply: an immediate tasks/get finds it.
	got := e.getTask(t, id)
	if str(got["taskId"]) != id || str(got["resultType"]) != "complete" {
		t.Fatalf("immediate tasks/get: %v", got)
	}

	done := e.waitEnded(t, id)
	if str(done["status"]) != "completed" || done["error"] != nil || done["inputRequests"] != nil {
		t.Fatalf("task ended %v", done)
	}
	var inner map[string]json.RawMessage
	_ = json.Unmarshal(done["result"], &inner)
	if str(inner["resultType"]) != "complete" {
		t.Errorf("inlined result has resultType %s, want complete: %s", inner["resultType"], done["result"])
	}
	if txt := resultText(t, done["result"]); txt != "echo: hi" {
		t.Errorf("result text %q", txt)
	}
	if strings.Contains(string(done["result"]), "related-task") {
		t.Errorf("inlined result carries related-task meta: %s", done["result"])
	}
}

func TestSyncPath(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	for _, c := range []struct {
		name   string
		params map[string]any
		ext    bool
		want   string
	}{
		{"optional tool, no extension", map[string]any{"name": "echo", "arguments": map[string]any{"text": "sync"}}, false, "echo: sync"},
		{"legacy task param does not make a task", map[string]any{"name": "echo", "arguments": map[string]any{"text": "t"}, "task": map[string]any{"ttl": 1000}}, false, "echo: t"},
		{"forbidden tool with the extension", map[string]any{"name": "inline_only", "arguments": map[string]any{}}, true, "inline"},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			res := e.call(t, "tools/call", c.params, c.ext)
			if str(res["resultType"]) != "complete" || res["taskId"] != nil {
				t.Fatalf("want the result inline, got %v", res)
			}
			if txt := resultText(t, mustJSON(res)); txt != c.want {
				t.Errorf("text %q, want %q", txt, c.want)
			}
		})
	}
}

func mustJSON(m map[string]json.RawMessage) json.RawMessage {
	b, _ := json.Marshal(m)
	return b
}

func TestRequiredToolWithExtensionRunsAsTask(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	id := e.startTask(t, "required_job", map[string]any{})
	e.waitCompleted(t, id, "required done")
}

func TestCancel(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	isAck := func(t *testing.T, res map[string]json.RawMessage) {
		t.Helper()
		if str(res["resultType"]) != "complete" || res["taskId"] != nil || res["status"] != nil {
			t.Errorf("tasks/cancel: want an empty ack, got %v", res)
		}
	}
	// cancelChangesNothing cancels task id, which must be acked without a
	// write: the record keeps its revision and status want.
	cancelChangesNothing := func(t *testing.T, id string, want taskstate.Status) {
		t.Helper()
		rec, err := e.store.Get(t.Context(), id)
		if err != nil {
			t.Fatal(err)
		}
		isAck(t, e.call(t, "tasks/cancel", map[string]any{"taskId": id}, true))
		after, err := e.store.Get(t.Context(), id)
		if err != nil {
			t.Fatal(err)
		}
		if after.Revision != rec.Revision || after.Status != want {
			t.Errorf("cancel of a %s task changed it: %+v (revision %d → %d)", want, after, rec.Revision, after.Revision)
		}
	}

	t.Run("working task", func(t *testing.T) {
		t.Parallel()
		id := e.startTask(t, "block", map[string]any{})
		isAck(t, e.call(t, "tasks/cancel", map[string]any{"taskId": id}, true))
		got := e.getTask(t, id) // the cancel is written before the ack
		if str(got["status"]) != "cancelled" {
			t.Fatalf("after cancel: %v", got)
		}
		// Idempotent: cancelling again is the same ack and writes nothing.
		cancelChangesNothing(t, id, taskstate.Cancelled)
	})

	t.Run("completed task", func(t *testing.T) {
		t.Parallel()
		id := e.startTask(t, "echo", map[string]any{"text": "x"})
		e.waitStatus(t, id, "completed")
		cancelChangesNothing(t, id, taskstate.Completed)
	})
}

func TestTasksGetInlinesOutcome(t *testing.T) {
	t.Parallel()
	e := newEnv(t)

	t.Run("error of a failed task", func(t *testing.T) {
		t.Parallel()
		id := e.startTask(t, "protocol_fail", map[string]any{})
		got := e.waitEnded(t, id)
		if str(got["status"]) != "failed" || got["result"] != nil {
			t.Fatalf("want failed without result, got %v", got)
		}
		var er rpcError
		if err := json.Unmarshal(got["error"], &er); err != nil || er.Code != -32050 || er.Message != "custom failure" || string(er.Data) != `{"why":"test"}` {
			t.Errorf("error %s", got["error"])
		}
		if str(got["statusMessage"]) == "" {
			t.Errorf("failed task without statusMessage: %v", got)
		}
		if str(got["resultType"]) != "complete" {
			t.Errorf("tasks/get resultType %s, want complete", got["resultType"])
		}
	})

	t.Run("tool error completes with isError", func(t *testing.T) {
		t.Parallel()
		id := e.startTask(t, "tool_error", map[string]any{})
		got := e.waitEnded(t, id)
		var res struct {
			IsError    bool   `json:"isError"`
			ResultType string `json:"resultType"`
		}
		_ = json.Unmarshal(got["result"], &res)
		if str(got["status"]) != "completed" || !res.IsError || res.ResultType != "complete" || got["error"] != nil {
			t.Fatalf("want completed with result.isError, got %v", got)
		}
		if txt := resultText(t, got["result"]); txt != "bad input, try again" {
			t.Errorf("text %q", txt)
		}
	})

	t.Run("input requests, answered by tasks/update", func(t *testing.T) {
		t.Parallel()
		id := e.startTask(t, "ask", map[string]any{})
		got := e.waitStatus(t, id, "input_required")
		var reqs map[string]struct {
			Method string `json:"method"`
			Params struct {
				Message         string         `json:"message"`
				RequestedSchema map[string]any `json:"requestedSchema"`
			} `json:"params"`
		}
		if err := json.Unmarshal(got["inputRequests"], &reqs); err != nil || len(reqs) != 1 {
			t.Fatalf("inputRequests %s", got["inputRequests"])
		}
		var key string
		for k, r := range reqs {
			key = k
			if r.Method != "elicitation/create" || r.Params.Message != "Really?" || r.Params.RequestedSchema["type"] != "object" {
				t.Errorf("input request %s: %+v", k, r)
			}
		}
		if got["result"] != nil || got["error"] != nil {
			t.Errorf("input_required task carries result/error: %v", got)
		}
		ack := e.call(t, "tasks/update", map[string]any{"taskId": id, "inputResponses": map[string]any{
			key: map[string]any{"action": "accept", "content": map[string]any{"confirm": true}},
		}}, true)
		if str(ack["resultType"]) != "complete" || ack["taskId"] != nil {
			t.Errorf("tasks/update: want an empty ack, got %v", ack)
		}
		e.waitCompleted(t, id, "action=accept confirm=true")
	})
}

func TestSyncOutcomes(t *testing.T) {
	t.Parallel()
	e := newEnv(t)

	t.Run("protocol error is the JSON-RPC error", func(t *testing.T) {
		t.Parallel()
		m, h := newRequest("tools/call", 7, map[string]any{"name": "protocol_fail", "arguments": map[string]any{}}, false)
		body, _ := json.Marshal(m)
		r := e.send(t, h, body, sendOpts{})
		if r.err == nil || r.err.Code != -32050 || r.err.Message != "custom failure" || string(r.err.Data) != `{"why":"test"}` || string(r.id) != "7" {
			t.Fatalf("want error -32050 with data for id 7, got %s", r)
		}
	})

	t.Run("tool error is a result with isError", func(t *testing.T) {
		t.Parallel()
		res := e.call(t, "tools/call", map[string]any{"name": "tool_error", "arguments": map[string]any{}}, false)
		if str(res["resultType"]) != "complete" || string(res["isError"]) != "true" {
			t.Fatalf("want isError result, got %v", res)
		}
	})

	t.Run("input required: MRTR round trip", func(t *testing.T) {
		t.Parallel()
		res := e.call(t, "tools/call", map[string]any{"name": "ask", "arguments": map[string]any{}}, false)
		if str(res["resultType"]) != "input_required" || res["taskId"] != nil {
			t.Fatalf("round 1: want input_required, got %v", res)
		}
		var reqs map[string]struct {
			Method string `json:"method"`
		}
		if err := json.Unmarshal(res["inputRequests"], &reqs); err != nil || len(reqs) != 1 || reqs["confirm"].Method != "elicitation/create" {
			t.Fatalf("round 1 inputRequests %s", res["inputRequests"])
		}
		state := str(res["requestState"])
		if state == "" {
			t.Fatalf("round 1 has no requestState: %v", res)
		}
		answer := map[string]any{"confirm": map[string]any{"action": "accept", "content": map[string]any{"confirm": true}}}

		// A forged state is refused before anything runs.
		jobs0, recs0 := e.counts(t)
		m, h := newRequest("tools/call", "forged", map[string]any{"name": "ask", "arguments": map[string]any{}, "inputResponses": answer, "requestState": state + "x"}, false)
		body, _ := json.Marshal(m)
		if r := e.send(t, h, body, sendOpts{}); r.err == nil || r.err.Code != -32602 {
			t.Errorf("forged requestState: want -32602, got %s", r)
		}
		if jobs1, recs1 := e.counts(t); jobs1 != jobs0 || recs1 != recs0 {
			t.Errorf("forged requestState enqueued %d job(s), wrote %d record(s)", jobs1-jobs0, recs1-recs0)
		}

		res = e.call(t, "tools/call", map[string]any{"name": "ask", "arguments": map[string]any{}, "inputResponses": answer, "requestState": state}, false)
		if str(res["resultType"]) != "complete" || resultText(t, mustJSON(res)) != "action=accept confirm=true" {
			t.Fatalf("round 2: %v", res)
		}
	})
}

// TestHandleAfterCancelsWithoutMirrorTools: a client without tasks and no
// mirror tools has no way to follow a handed-over call, so past HandleAfter
// the call is cancelled, as before (mirror_test.go has the hand-over).
func TestHandleAfterCancelsWithoutMirrorTools(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(c *mcpfront.Config) { c.HandleAfter, c.MirrorToolsOff = 300*time.Millisecond, true })
	m, h := newRequest("tools/call", "slow", map[string]any{"name": "block", "arguments": map[string]any{}}, false)
	body, _ := json.Marshal(m)
	r := e.send(t, h, body, sendOpts{})
	if r.err == nil || r.err.Code != -32603 || !strings.Contains(r.err.Message, "did not finish") {
		t.Fatalf("want -32603 after the sync timeout, got %s", r)
	}
	e.waitRecord(t, "block", func(tk *taskstate.Task) bool { return tk.Status == taskstate.Cancelled })
}

func TestSyncClientGoneCancelsTheTask(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	m, h := newRequest("tools/call", "gone", map[string]any{"name": "block", "arguments": map[string]any{}}, false)
	body, _ := json.Marshal(m)
	// Leave once the task exists and runs.
	ctx, cancel := context.WithCancel(t.Context())
	go func() {
		defer cancel()
		deadline := time.Now().Add(10 * time.Second)
		for time.Now().Before(deadline) {
			if tasks, _ := e.findTasks(ctx, "block"); len(tasks) == 1 && tasks[0].Lease != nil {
				return
			}
			time.Sleep(20 * time.Millisecond)
		}
	}()
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, e.url, bytes.NewReader(body))
	req.Header = h
	if resp, err := http.DefaultClient.Do(req); err == nil {
		resp.Body.Close()
		t.Fatalf("the blocking call answered %d", resp.StatusCode)
	}
	e.waitRecord(t, "block", func(tk *taskstate.Task) bool { return tk.Status == taskstate.Cancelled })
}
