package mcpfront_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/mcpqueue/mcpqueue/consumer"
)

type routeArgs struct {
	Region string `json:"region" mcpheader:"Region"`
	Shard  int    `json:"shard,omitempty" mcpheader:"Shard"`
	Query  string `json:"query,omitempty"`
}

// addCatalogFixtures adds to the test worker a tool with SEP-2243 header
// parameters, a resource, a template with a completion handler and a prompt
// with one.
func addCatalogFixtures(mux *consumer.Mux) {
	consumer.Handle(mux, consumer.Tool{Name: "route", TaskSupport: consumer.TaskForbidden},
		func(ctx context.Context, c *consumer.Call[routeArgs]) (*consumer.Result, error) {
			return consumer.TextResult(fmt.Sprintf("routed to %s/%d", c.Args.Region, c.Args.Shard)), nil
		})
	consumer.HandleResource(mux, consumer.ResourceDef{URI: "test://note", Name: "note", MimeType: "text/plain", Cache: consumer.Cache{TTL: 30 * time.Second}},
		func(ctx context.Context, c *consumer.Call[consumer.ResourceRequest]) ([]consumer.ResourceContents, error) {
			return []consumer.ResourceContents{consumer.TextContents(c.Args.URI, "text/plain", "a note")}, nil
		})
	complete := func(ctx context.Context, c *consumer.Call[consumer.CompleteRequest]) (*consumer.Completion, error) {
		return &consumer.Completion{Values: []string{c.Args.Argument + ":" + c.Args.Value + "1", c.Args.Argument + ":" + c.Args.Value + "2"}}, nil
	}
	consumer.HandleResourceTemplate(mux, consumer.ResourceTemplate{URITemplate: "test://items/{id}", Complete: complete},
		func(ctx context.Context, c *consumer.Call[consumer.ResourceRequest]) ([]consumer.ResourceContents, error) {
			if c.Args.Vars["id"] == "gone" {
				return nil, consumer.ErrResourceNotFound
			}
			return []consumer.ResourceContents{consumer.TextContents(c.Args.URI, "text/plain", "item "+c.Args.Vars["id"])}, nil
		})
	consumer.HandlePrompt(mux, consumer.Prompt{Name: "greet", Arguments: []consumer.PromptArgument{{Name: "who", Required: true}}, Complete: complete},
		func(ctx context.Context, c *consumer.Call[map[string]string]) (*consumer.PromptResult, error) {
			return &consumer.PromptResult{Messages: []consumer.PromptMessage{{Role: "user", Content: consumer.Text("hello " + c.Args["who"])}}}, nil
		})
}

// A tools/call whose Mcp-Param-* headers disagree with its arguments is
// refused with -32020 and HTTP 400, and nothing is enqueued or written.
func TestParamHeaders(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	route := func(args map[string]any, headers map[string]string) func(m map[string]any, h http.Header) {
		return func(m map[string]any, h http.Header) {
			m["params"].(map[string]any)["name"] = "route"
			m["params"].(map[string]any)["arguments"] = args
			h.Set("Mcp-Name", "route")
			for k, v := range headers {
				h.Set(k, v)
			}
		}
	}
	mismatch := func(r reply) []string {
		if !strings.Contains(r.err.Message, "Mcp-Param-") {
			return []string{"the message does not name the header: " + r.err.Message}
		}
		return nil
	}
	e.runBadCases(t, []badCase{
		{name: "header differs from argument", edit: route(map[string]any{"region": "us-west1"}, map[string]string{"Mcp-Param-Region": "eu-west1"}),
			status: 400, code: -32020, check: mismatch},
		{name: "header missing", edit: route(map[string]any{"region": "us-west1"}, nil), status: 400, code: -32020, check: mismatch},
		{name: "header without argument", edit: route(map[string]any{"region": "us-west1"}, map[string]string{"Mcp-Param-Region": "us-west1", "Mcp-Param-Shard": "3"}),
			status: 400, code: -32020, check: mismatch},
		{name: "integer differs", edit: route(map[string]any{"region": "a", "shard": 4}, map[string]string{"Mcp-Param-Region": "a", "Mcp-Param-Shard": "3"}),
			status: 400, code: -32020, check: mismatch},
		{name: "base64 without padding", edit: route(map[string]any{"region": "Hello"}, map[string]string{"Mcp-Param-Region": "=?base64?SGVsbG8?="}),
			status: 400, code: -32020, check: mismatch},
		{name: "non-ASCII header value", edit: route(map[string]any{"region": "zürich"}, map[string]string{"Mcp-Param-Region": "zürich"}),
			status: 400, code: -32020, check: mismatch},
		{name: "headers agree", edit: route(map[string]any{"region": "zürich", "shard": 3}, map[string]string{"Mcp-Param-Region": b64("zürich"), "mcp-param-shard": "3.0"}),
			status: 200, writes: true, check: func(r reply) []string {
				if !strings.Contains(string(r.result), "routed to zürich/3") {
					return []string{"unexpected result " + string(r.result)}
				}
				return nil
			}},
		{name: "other tools need no headers", status: 200, writes: true},
	})
}

func TestResources(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	caps := e.call(t, "server/discover", nil, false)["capabilities"]
	if !strings.Contains(string(caps), `"resources":{}`) || !strings.Contains(string(caps), `"completions":{}`) {
		t.Errorf("server/discover capabilities %s: want resources and completions", caps)
	}
	list := e.call(t, "resources/list", nil, false)
	if got := string(list["resources"]); got != `[{"uri":"test://note","name":"note","mimeType":"text/plain"}]` || string(list["ttlMs"]) == "" || str(list["cacheScope"]) != "public" {
		t.Errorf("resources/list: %v", list)
	}
	tl := e.call(t, "resources/templates/list", nil, false)
	if got := string(tl["resourceTemplates"]); got != `[{"uriTemplate":"test://items/{id}","name":"test://items/{id}"}]` || str(tl["cacheScope"]) != "public" {
		t.Errorf("resources/templates/list: %v", tl)
	}

	read := e.call(t, "resources/read", map[string]any{"uri": "test://note"}, false)
	if string(read["contents"]) != `[{"uri":"test://note","mimeType":"text/plain","text":"a note"}]` || string(read["ttlMs"]) != "30000" ||
		str(read["cacheScope"]) != "private" || str(read["resultType"]) != "complete" {
		t.Errorf("resources/read test://note: %v", read)
	}
	read = e.call(t, "resources/read", map[string]any{"uri": "test://items/42"}, false)
	if string(read["contents"]) != `[{"uri":"test://items/42","mimeType":"text/plain","text":"item 42"}]` {
		t.Errorf("resources/read test://items/42: %v", read)
	}

	notFound := func(uri string) func(r reply) []string {
		return wantData("uri", uri)
	}
	readOf := func(uri string) map[string]any { return map[string]any{"uri": uri} }
	e.runBadCases(t, []badCase{
		// Unknown to the catalog: refused before anything is enqueued.
		{name: "unknown resource", method: "resources/read", params: readOf("test://nowhere"), status: 200, code: -32602, check: notFound("test://nowhere")},
		{name: "no template matches", method: "resources/read", params: readOf("test://items/a/b"), status: 200, code: -32602, check: notFound("test://items/a/b")},
		{name: "api's own scheme", method: "resources/read", params: readOf("mcpq://tasks/x/artifacts/y"), status: 200, code: -32602, check: notFound("mcpq://tasks/x/artifacts/y")},
		{name: "not a URI", method: "resources/read", params: readOf("nowhere"), status: 200, code: -32602},
		{name: "Mcp-Name differs from uri", method: "resources/read", params: readOf("test://note"), edit: func(_ map[string]any, h http.Header) { h.Set("Mcp-Name", "test://other") },
			status: 400, code: -32020},
		// The template's handler says so: a job ran, the error is the handler's.
		{name: "handler says not found", method: "resources/read", params: readOf("test://items/gone"), status: 200, code: -32602, writes: true, check: notFound("test://items/gone")},
		{name: "subscribe is 2025-11-25 only", method: "resources/subscribe", params: readOf("test://note"), status: 404, code: -32601},
	})

	done := e.call(t, "completion/complete", map[string]any{"ref": map[string]any{"type": "ref/prompt", "name": "greet"}, "argument": map[string]any{"name": "who", "value": "al"}}, false)
	if string(done["completion"]) != `{"values":["who:al1","who:al2"]}` {
		t.Errorf("completion of prompt greet: %v", done)
	}
	done = e.call(t, "completion/complete", map[string]any{"ref": map[string]any{"type": "ref/resource", "uri": "test://items/{id}"}, "argument": map[string]any{"name": "id", "value": "4"}}, false)
	if string(done["completion"]) != `{"values":["id:41","id:42"]}` {
		t.Errorf("completion of template: %v", done)
	}
	done = e.call(t, "completion/complete", map[string]any{"ref": map[string]any{"type": "ref/resource", "uri": "test://note"}, "argument": map[string]any{"name": "x", "value": ""}}, false)
	if string(done["completion"]) != `{"values":[],"hasMore":false}` {
		t.Errorf("completion of a ref without a handler: %v", done)
	}
	e.runBadCases(t, []badCase{
		{name: "completion of an unknown prompt", method: "completion/complete", params: map[string]any{"ref": map[string]any{"type": "ref/prompt", "name": "nope"}, "argument": map[string]any{"name": "a", "value": ""}}, status: 200, code: -32602},
		{name: "completion without argument", method: "completion/complete", params: map[string]any{"ref": map[string]any{"type": "ref/prompt", "name": "greet"}}, status: 200, code: -32602},
		{name: "completion of a bad ref type", method: "completion/complete", params: map[string]any{"ref": map[string]any{"type": "ref/tool", "name": "echo"}, "argument": map[string]any{"name": "a", "value": ""}}, status: 200, code: -32602},
	})
}

// legacyCall sends one 2025-11-25 request in the session h and returns the reply.
func (e *env) legacyCall(t *testing.T, h http.Header, method string, params map[string]any) reply {
	t.Helper()
	body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 7, "method": method, "params": params})
	return e.send(t, h, body, sendOpts{})
}

func TestLegacyResources(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": map[string]any{
		"protocolVersion": "2025-11-25", "capabilities": map[string]any{}, "clientInfo": map[string]any{"name": "t", "version": "1"},
	}})
	init := e.send(t, http.Header{"Content-Type": {"application/json"}, "Accept": {"application/json, text/event-stream"}}, body, sendOpts{})
	if !strings.Contains(string(init.result), `"resources":{"subscribe":true}`) || !strings.Contains(string(init.result), `"completions":{}`) {
		t.Errorf("initialize capabilities: %s", init.result)
	}
	h := e.legacySession(t, nil)
	for method, want := range map[string]string{
		"resources/list":           `{"resources":[{"uri":"test://note","name":"note","mimeType":"text/plain"}]}`,
		"resources/templates/list": `{"resourceTemplates":[{"uriTemplate":"test://items/{id}","name":"test://items/{id}"}]}`,
	} {
		if r := e.legacyCall(t, h, method, nil); string(r.result) != want {
			t.Errorf("%s: %s, want result %s", method, r, want)
		}
	}
	if r := e.legacyCall(t, h, "resources/read", map[string]any{"uri": "test://items/7"}); !strings.Contains(string(r.result), `"text":"item 7"`) {
		t.Errorf("resources/read: %s", r)
	}
	if r := e.legacyCall(t, h, "resources/read", map[string]any{"uri": "test://nowhere"}); r.err == nil || r.err.Code != -32602 || string(r.err.Data) != `{"uri":"test://nowhere"}` {
		t.Errorf("resources/read of an unknown URI: %s", r)
	}
	if r := e.legacyCall(t, h, "prompts/get", map[string]any{"name": "greet", "arguments": map[string]any{"who": "ann"}}); !strings.Contains(string(r.result), `"text":"hello ann"`) {
		t.Errorf("prompts/get: %s", r)
	}
	if r := e.legacyCall(t, h, "prompts/get", map[string]any{"name": "greet"}); r.err == nil || r.err.Code != -32602 {
		t.Errorf("prompts/get without its required argument: %s", r)
	}
	if r := e.legacyCall(t, h, "completion/complete", map[string]any{"ref": map[string]any{"type": "ref/prompt", "name": "greet"}, "argument": map[string]any{"name": "who", "value": "b"}}); string(r.result) != `{"completion":{"values":["who:b1","who:b2"]}}` {
		t.Errorf("completion/complete: %s", r)
	}
	for _, c := range []struct {
		method, uri string
		code        int
	}{
		{"resources/subscribe", "test://note", 0},
		{"resources/subscribe", "test://note", 0}, // again: no change
		{"resources/subscribe", "test://items/1", 0},
		{"resources/subscribe", "test://nowhere", -32602},
		{"resources/unsubscribe", "test://note", 0},
		{"resources/unsubscribe", "test://never-subscribed", 0},
	} {
		r := e.legacyCall(t, h, c.method, map[string]any{"uri": c.uri})
		if c.code == 0 && (r.err != nil || string(r.result) != "{}") || c.code != 0 && (r.err == nil || r.err.Code != c.code) {
			t.Errorf("%s %s: %s, want code %d", c.method, c.uri, r, c.code)
		}
	}
	for name, c := range map[string]struct {
		edit   func(h http.Header)
		status int
	}{
		"unknown session":      {func(h http.Header) { h.Set("Mcp-Session-Id", "NOSUCHSESSION") }, http.StatusNotFound},
		"no text/event-stream": {func(h http.Header) { h.Set("Accept", "application/json") }, http.StatusNotAcceptable},
	} {
		g := h.Clone()
		c.edit(g)
		if r := e.send(t, g, nil, sendOpts{verb: http.MethodGet}); r.status != c.status || !r.jsonrpc {
			t.Errorf("GET stream, %s: %s, want HTTP %d with a JSON-RPC error", name, r, c.status)
		}
	}
	sess, err := e.store.Session(t.Context(), h.Get("Mcp-Session-Id"))
	if err != nil || strings.Join(sess.Subscriptions, " ") != "test://items/1" {
		t.Fatalf("session subscriptions %v (%v), want [test://items/1]", sess, err)
	}
}
