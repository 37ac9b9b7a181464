package mcpfront_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mcpqueue/mcpqueue/auth"
	"github.com/mcpqueue/mcpqueue/auth/authtest"
	"github.com/mcpqueue/mcpqueue/mcpfront"
)

// ---- limits and strict decoding ----

// headerAuth is an Authenticator for tests: "Authorization: Bearer NAME"
// is principal NAME; no header is an anonymous request.
type headerAuth struct{}

func (headerAuth) Authenticate(r *http.Request) (auth.Principal, error) {
	name, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if !ok {
		return auth.Principal{}, nil
	}
	return auth.Principal{Issuer: "test", Subject: name}, nil
}

const (
	limitArgs      = 4 << 10
	limitInputKeys = 4
)

// nested is n levels of {"a": …} around a value.
func nested(n int) any {
	var v any = 1
	for range n {
		v = map[string]any{"a": v}
	}
	return v
}

// replaceOnce edits the encoded body; the test fails when old is absent.
func replaceOnce(old, new string) func([]byte) []byte {
	return func(b []byte) []byte {
		if !bytes.Contains(b, []byte(old)) {
			panic(fmt.Sprintf("body %s has no %s", b, old))
		}
		return bytes.Replace(b, []byte(old), []byte(new), 1)
	}
}

func errorSays(part string) func(r reply) []string {
	return func(r reply) []string {
		if r.err == nil || !strings.Contains(r.err.Message, part) {
			return []string{fmt.Sprintf("want an error saying %q", part)}
		}
		return nil
	}
}

func TestBadInputLimits(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(c *mcpfront.Config) {
		c.MaxArgs = limitArgs
		c.MaxInputKeys = limitInputKeys
	})
	askID := e.startTask(t, "ask", map[string]any{})
	asking := e.waitStatus(t, askID, "input_required")

	answers := func(n int) map[string]any {
		m := map[string]any{}
		for i := range n {
			m[fmt.Sprintf("not-asked-%d", i)] = map[string]any{"action": "decline"}
		}
		return m
	}
	huge := strings.Repeat("x", limitArgs)
	rawHead := func(contentLength int) string {
		return fmt.Sprintf("POST / HTTP/1.1\r\nHost: HOST\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nMCP-Protocol-Version: %s\r\nMcp-Method: tools/call\r\nMcp-Name: echo\r\nContent-Length: %d\r\n\r\n", version, contentLength)
	}

	cases := []badCase{
		// Nesting: envelope, params and _meta are three levels.
		{name: "nesting at the limit is served", method: "server/discover", params: map[string]any{},
			edit: func(m map[string]any, _ http.Header) { metaOf(m)["deep"] = nested(61) }, status: 200, check: resultIs("resultType", "complete")},
		{name: "nesting past the limit", method: "server/discover", params: map[string]any{},
			edit: func(m map[string]any, _ http.Header) { metaOf(m)["deep"] = nested(62) }, status: 400, code: -32600, check: errorSays("nesting deeper than 64")},
		{name: "deep nesting in arguments", params: map[string]any{"name": "echo", "arguments": map[string]any{"text": "a", "x": nested(100)}},
			status: 400, code: -32600, check: errorSays("nesting deeper than 64")},
		{name: "nesting bomb that fills the body", body: func([]byte) []byte { return bytes.Repeat([]byte(`{"a":`), maxBody/5-1) },
			status: 400, code: -32600, nullID: true, check: errorSays("nesting deeper than 64")},

		// Argument size and answers.
		{name: "huge arguments", params: map[string]any{"name": "echo", "arguments": map[string]any{"text": huge}},
			status: 200, code: -32602, check: errorSays(fmt.Sprintf("over the limit of %d bytes (--max-args)", limitArgs))},
		{name: "huge arguments, inline call", params: map[string]any{"name": "echo", "arguments": map[string]any{"text": huge}}, noExt: true,
			status: 200, code: -32602, check: errorSays("over the limit of")},
		{name: "huge arguments of an unknown tool", params: map[string]any{"name": "no_such_tool", "arguments": map[string]any{"text": huge}},
			status: 200, code: -32602, check: errorSays("over the limit of")},
		{name: "arguments just under the limit are checked as usual", params: map[string]any{"name": "echo", "arguments": map[string]any{"text": huge[:limitArgs-40], "extra": 1}},
			status: 200, check: isToolError},
		{name: "too many input keys on tasks/update", method: "tasks/update", params: map[string]any{"taskId": askID, "inputResponses": answers(limitInputKeys + 1)},
			status: 200, code: -32602, check: errorSays("inputResponses has 5 keys")},
		{name: "input keys at the limit on tasks/update", method: "tasks/update", params: map[string]any{"taskId": askID, "inputResponses": answers(limitInputKeys)},
			status: 200, check: resultIs("resultType", "complete")},
		{name: "too many input keys on an MRTR retry", noExt: true,
			params: map[string]any{"name": "ask", "arguments": map[string]any{}, "inputResponses": answers(limitInputKeys + 1)},
			status: 200, code: -32602, check: errorSays("inputResponses has 5 keys")},

		// Duplicate and case-variant keys.
		{name: "duplicate method", body: replaceOnce(`"method":"tools/call"`, `"method":"tools/call","method":"tasks/cancel"`),
			status: 400, code: -32600, check: errorSays(`duplicate key "method"`)},
		{name: "duplicate id", body: replaceOnce(`"id":"row-`, `"id":"other","id":"row-`),
			status: 400, code: -32600, nullID: true, check: errorSays(`duplicate key "id"`)},
		{name: "duplicate jsonrpc", body: replaceOnce(`"jsonrpc":"2.0"`, `"jsonrpc":"2.0","jsonrpc":"1.0"`), status: 400, code: -32600},
		{name: "duplicate params", body: replaceOnce(`"params":{`, `"params":{},"params":{`), status: 400, code: -32600, check: errorSays(`duplicate key "params"`)},
		{name: "duplicate tool name", body: replaceOnce(`"name":"echo"`, `"name":"echo","name":"block"`),
			status: 400, code: -32600, check: errorSays(`duplicate key "name" in params`)},
		{name: "duplicate arguments", body: replaceOnce(`"arguments":{`, `"arguments":{},"arguments":{`),
			status: 400, code: -32600, check: errorSays(`duplicate key "arguments" in params`)},
		{name: "duplicate key inside arguments", body: replaceOnce(`"text":"hi"`, `"text":"hi","text":"bye"`),
			status: 400, code: -32600, check: errorSays(`duplicate key "text" in params.arguments`)},
		{name: "duplicate _meta", body: replaceOnce(`"_meta":{`, `"_meta":{},"_meta":{`), status: 400, code: -32600},
		{name: "duplicate protocolVersion in _meta", body: replaceOnce(`"io.modelcontextprotocol/protocolVersion":"2026-07-28"`, `"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/protocolVersion":"2099-01-01"`),
			status: 400, code: -32600, check: errorSays("in params._meta")},
		{name: "duplicate taskId", method: "tasks/cancel", params: map[string]any{"taskId": askID},
			body: replaceOnce(`"taskId":"`, `"taskId":"`+askID+`","taskId":"`), status: 400, code: -32600, check: errorSays(`duplicate key "taskId"`)},
		{name: "duplicate inputResponses", method: "tasks/update", params: map[string]any{"taskId": askID, "inputResponses": answers(1)},
			body: replaceOnce(`"inputResponses":{`, `"inputResponses":{},"inputResponses":{`), status: 400, code: -32600, check: errorSays(`duplicate key "inputResponses"`)},
		{name: "duplicate key in an answer", method: "tasks/update", params: map[string]any{"taskId": askID, "inputResponses": answers(1)},
			body: replaceOnce(`"action":"decline"`, `"action":"decline","action":"accept"`), status: 400, code: -32600, check: errorSays("in params.inputResponses")},
		{name: "duplicate spelled with an escape", body: replaceOnce(`"method":"tools/call"`, `"method":"tools/call","\u006dethod":"tasks/cancel"`),
			status: 400, code: -32600, check: errorSays(`duplicate key "method"`)},
		{name: "case-variant method", body: replaceOnce(`"method":"tools/call"`, `"method":"tools/call","Method":"tasks/cancel"`),
			status: 400, code: -32600, check: errorSays(`key "Method" differs only in case from key "method"`)},
		{name: "lone case-variant method", edit: func(m map[string]any, _ http.Header) { m["METHOD"] = m["method"]; delete(m, "method") },
			status: 400, code: -32600, nullID: true, // "METHOD" sorts before "id": the id is not read yet
			check: errorSays(`key "METHOD" must be spelled "method"`)},
		{name: "case-variant name in params", body: replaceOnce(`"name":"echo"`, `"name":"echo","Name":"block"`), status: 400, code: -32600},
		{name: "case-variant taskId", method: "tasks/cancel", params: map[string]any{"taskId": askID},
			body: replaceOnce(`"taskId":`, `"taskID":`), status: 400, code: -32600, check: errorSays(`"taskID" must be spelled "taskId"`)},
		{name: "case-variant in arguments", body: replaceOnce(`"text":"hi"`, `"text":"hi","TEXT":"bye"`),
			status: 400, code: -32600, check: errorSays("in params.arguments")},
		{name: "Kelvin-sign variant of taskId", method: "tasks/cancel", params: map[string]any{"taskId": askID},
			body: replaceOnce(`"taskId":`, `"tas\u212aId":`), status: 400, code: -32600},

		// Trailing data.
		{name: "trailing object", body: func(b []byte) []byte { return append(b, []byte(`{"jsonrpc":"2.0"}`)...) }, status: 400, code: -32700, nullID: true},
		{name: "trailing garbage", body: func(b []byte) []byte { return append(b, " x"...) }, status: 400, code: -32700, nullID: true},
		{name: "trailing whitespace is fine", method: "server/discover", params: map[string]any{},
			body: func(b []byte) []byte { return append(b, " \r\n\t"...) }, status: 200, check: resultIs("resultType", "complete")},

		// Content-Length that lies.
		{name: "Content-Length 100 MiB on a small body: refused unread",
			raw: func(b []byte) (string, []byte) { return rawHead(100 << 20), b }, status: 413, code: -32600, nullID: true},
		{name: "Content-Length one short of the body",
			raw: func(b []byte) (string, []byte) { return rawHead(len(b) - 1), b }, status: 400, code: -32700, nullID: true},
	}
	e.runBadCases(t, cases)

	again := e.getTask(t, askID)
	if str(again["status"]) != "input_required" || string(again["inputRequests"]) != string(asking["inputRequests"]) {
		t.Errorf("the input_required task changed: %v", again)
	}
}

// limitedReply checks a refusal by a per-principal limit.
func limitedReply(t *testing.T, r reply, status int, part string) {
	t.Helper()
	if r.status != status || r.err == nil || r.err.Code != -32029 || !strings.Contains(r.err.Message, part) {
		t.Fatalf("want HTTP %d with error -32029 %q, got %s", status, part, r)
	}
}

func TestRateLimit(t *testing.T) {
	t.Parallel()
	clock := authtest.NewClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	e := newEnv(t, func(c *mcpfront.Config) {
		c.Auth = headerAuth{}
		c.RateLimit = 0.5 // one request every two seconds
		c.RateBurst = 2
		c.Now = clock.Now
	})
	send := func(who, method string, params map[string]any) reply {
		m, h := newRequest(method, "rl", params, true)
		if who != "" {
			h.Set("Authorization", "Bearer "+who)
		}
		body, _ := json.Marshal(m)
		return e.send(t, h, body, sendOpts{})
	}
	discover := func(who string) reply { return send(who, "server/discover", map[string]any{}) }
	for i := range 2 {
		if r := discover("alice"); r.status != 200 {
			t.Fatalf("request %d within the burst: %s", i, r)
		}
	}
	r := discover("alice")
	limitedReply(t, r, http.StatusTooManyRequests, "overloaded, retry after 2 s")
	if got := r.header.Get("Retry-After"); got != "2" {
		t.Errorf("Retry-After %q, want 2", got)
	}
	if string(r.err.Data) != `{"retryAfterMs":2000,"retryAfterSeconds":2}` {
		t.Errorf("error data %s, want the wait in ms and s", r.err.Data)
	}
	if string(r.id) != "null" {
		t.Errorf("id %s, want null (the body is not read)", r.id)
	}

	// A refused call runs nothing.
	jobs0, recs0 := e.counts(t)
	r = send("alice", "tools/call", map[string]any{"name": "echo", "arguments": map[string]any{"text": "x"}})
	limitedReply(t, r, http.StatusTooManyRequests, "overloaded, retry after 2 s")
	if jobs1, recs1 := e.counts(t); jobs1 != jobs0 || recs1 != recs0 {
		t.Errorf("a rate-limited call enqueued %d job(s), wrote %d record(s)", jobs1-jobs0, recs1-recs0)
	}

	// Other principals, and anonymous clients (by address), have their own buckets.
	if r := discover("bob"); r.status != 200 {
		t.Errorf("bob is limited by alice's requests: %s", r)
	}
	for range 2 {
		if r := discover(""); r.status != 200 {
			t.Errorf("anonymous: %s", r)
		}
	}
	limitedReply(t, discover(""), http.StatusTooManyRequests, "overloaded, retry after 2 s")

	// The 2025-11-25 era gets the same answer: the limit comes before the
	// body is read.
	legacy := http.Header{"Content-Type": {"application/json"}, "Accept": {"application/json, text/event-stream"}, "Authorization": {"Bearer alice"}}
	body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": map[string]any{
		"protocolVersion": "2025-11-25", "capabilities": map[string]any{}, "clientInfo": map[string]any{"name": "t", "version": "1"},
	}})
	r = e.send(t, legacy, body, sendOpts{})
	limitedReply(t, r, http.StatusTooManyRequests, "overloaded, retry after 2 s")
	if got := r.header.Get("Retry-After"); got != "2" {
		t.Errorf("2025-11-25: Retry-After %q, want 2", got)
	}

	// N is the real wait: half-way through it, 1 s.
	clock.Add(time.Second)
	limitedReply(t, discover("alice"), http.StatusTooManyRequests, "overloaded, retry after 1 s")

	// Refused requests spend nothing: after the wait, exactly one token.
	clock.Add(time.Second)
	if r := discover("alice"); r.status != 200 {
		t.Fatalf("after Retry-After: %s", r)
	}
	limitedReply(t, discover("alice"), http.StatusTooManyRequests, "overloaded, retry after 2 s")
}

func TestMaxActiveTasks(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(c *mcpfront.Config) {
		c.Auth = headerAuth{}
		c.MaxActiveTasks = 2
	})
	call := func(who, tool string, ext bool) reply {
		args := map[string]any{}
		if tool == "echo" {
			args["text"] = "x"
		}
		m, h := newRequest("tools/call", "cap", map[string]any{"name": tool, "arguments": args}, ext)
		if who != "" {
			h.Set("Authorization", "Bearer "+who)
		}
		body, _ := json.Marshal(m)
		return e.send(t, h, body, sendOpts{})
	}
	start := func(who string) string {
		t.Helper()
		r := call(who, "block", true)
		var res map[string]json.RawMessage
		_ = json.Unmarshal(r.result, &res)
		if r.status != 200 || str(res["resultType"]) != "task" {
			t.Fatalf("%s: want a task, got %s", who, r)
		}
		return str(res["taskId"])
	}
	first := start("alice")
	start("alice")

	// (The worker keeps writing the running tasks' records, so count the
	// records by tool rather than by store writes.)
	jobs0, _ := e.counts(t)
	limitedReply(t, call("alice", "block", true), http.StatusOK, "too many active tasks")
	limitedReply(t, call("alice", "echo", false), http.StatusOK, "too many active tasks") // inline calls are tasks too
	jobs1, _ := e.counts(t)
	if blocks, echoes := len(e.tasksOf(t, "block")), len(e.tasksOf(t, "echo")); jobs1 != jobs0 || blocks != 2 || echoes != 0 {
		t.Errorf("refused calls enqueued %d job(s); records: %d block (want 2), %d echo (want 0)", jobs1-jobs0, blocks, echoes)
	}

	// The cap is per owner; anonymous tasks have none.
	start("bob")
	for range 3 {
		start("")
	}

	// A task that ends frees its place.
	m, h := newRequest("tasks/cancel", "c", map[string]any{"taskId": first}, true)
	h.Set("Authorization", "Bearer alice")
	body, _ := json.Marshal(m)
	if r := e.send(t, h, body, sendOpts{}); r.status != 200 || r.err != nil {
		t.Fatalf("cancel: %s", r)
	}
	start("alice")
	limitedReply(t, call("alice", "block", true), http.StatusOK, "too many active tasks")

	// The 2025-11-25 wire counts the same tasks.
	h = e.legacySession(t, http.Header{"Authorization": {"Bearer alice"}})
	body, _ = json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": map[string]any{
		"name": "block", "arguments": map[string]any{}, "task": map[string]any{},
	}})
	limitedReply(t, e.send(t, h, body, sendOpts{}), http.StatusOK, "too many active tasks")
}

// endlessBody is a request body that never ends; it counts what was read.
type endlessBody struct {
	mu   sync.Mutex
	read int64
}

func (b *endlessBody) Read(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.read == 0 && len(p) > 0 {
		p[0] = '{'
		for i := 1; i < len(p); i++ {
			p[i] = ' '
		}
	} else {
		for i := range p {
			p[i] = ' '
		}
	}
	b.read += int64(len(p))
	return len(p), nil
}

func (b *endlessBody) Close() error { return nil }

func (b *endlessBody) n() int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.read
}

// TestOversizedBodiesMemoryBounded sends bodies far past MaxBody straight to
// the handler: what it reads, and the memory it keeps, stay bounded by
// MaxBody, whatever the body claims or holds.
func TestOversizedBodiesMemoryBounded(t *testing.T) {
	const limit = 1 << 20
	e := newEnv(t, func(c *mcpfront.Config) { c.MaxBody = limit })
	post := func(body io.ReadCloser, contentLength int64) int {
		req := httptest.NewRequestWithContext(t.Context(), http.MethodPost, "/mcp", body)
		req.Host = "localhost"
		req.ContentLength = contentLength
		req.Header.Set("Content-Type", "application/json")
		rec := httptest.NewRecorder()
		e.handler.ServeHTTP(rec, req)
		return rec.Code
	}

	claimed := &endlessBody{}
	if code := post(claimed, 100<<20); code != http.StatusRequestEntityTooLarge || claimed.n() != 0 {
		t.Fatalf("Content-Length 100 MiB: HTTP %d after reading %d bytes, want 413 before reading", code, claimed.n())
	}

	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	const n = 20
	var read int64
	for range n {
		body := &endlessBody{}
		if code := post(body, -1); code != http.StatusRequestEntityTooLarge {
			t.Fatalf("endless body: HTTP %d, want 413", code)
		}
		read += body.n()
	}
	deep := bytes.Repeat([]byte(`{"a":`), limit/5)
	for range n {
		if code := post(io.NopCloser(bytes.NewReader(deep)), int64(len(deep))); code != http.StatusBadRequest {
			t.Fatalf("nesting bomb: HTTP %d, want 400", code)
		}
	}
	runtime.GC()
	runtime.ReadMemStats(&after)

	if per := read / n; per > 2*limit {
		t.Errorf("read %d bytes per endless body, want at most about MaxBody (%d)", per, limit)
	}
	// io.ReadAll's growth costs a few times MaxBody (more under -race);
	// what matters is that it is not the 100 MiB claimed, nor endless.
	perRequest := (after.TotalAlloc - before.TotalAlloc) / (2 * n)
	if perRequest > 8*limit {
		t.Errorf("allocated %d bytes per request, want under 8×MaxBody", perRequest)
	}
	if grown := int64(after.HeapAlloc) - int64(before.HeapAlloc); grown > 8<<20 {
		t.Errorf("heap grew by %d bytes after %d oversized requests", grown, 2*n)
	}
	t.Logf("per request: %d bytes read, %d bytes allocated; heap %+d bytes", read/n, perRequest, int64(after.HeapAlloc)-int64(before.HeapAlloc))
}
