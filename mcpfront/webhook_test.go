package mcpfront_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/mcpqueue/mcpqueue/mcpfront"
	"github.com/mcpqueue/mcpqueue/taskstate"
	"github.com/mcpqueue/mcpqueue/webhook"
)

// Completion webhooks: a call asking for one is checked before anything is
// written — a malformed request or a host outside the allow list is
// -32602, and past MaxPendingWebhooks of one owner -32029 — and an
// accepted one leaves its delivery in the store's outbox.
func TestWebhookChecks(t *testing.T) {
	t.Parallel()
	allow, err := webhook.ParseAllowList("127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	e := newEnv(t, func(c *mcpfront.Config) {
		c.Auth = headerAuth{}
		c.Webhooks = allow
		c.MaxPendingWebhooks = 2
	})
	call := func(who string, hook any) reply {
		m, h := newRequest("tools/call", "hook", map[string]any{"name": "block", "arguments": map[string]any{}}, true)
		m["params"].(map[string]any)["_meta"].(map[string]any)["io.mcpqueue/webhook"] = hook
		h.Set("Authorization", "Bearer "+who)
		body, _ := json.Marshal(m)
		return e.send(t, h, body, sendOpts{})
	}
	ok := func(r reply) {
		t.Helper()
		var res map[string]json.RawMessage
		_ = json.Unmarshal(r.result, &res)
		if r.status != 200 || str(res["resultType"]) != "task" {
			t.Fatalf("want a task, got %s", r)
		}
	}
	for hook, want := range map[string]string{
		"http://127.0.0.1/x":                      "must be an object",
		`{"url":"http://169.254.169.254/latest"}`: "169.254.169.254",
		`{"url":"http://localhost:9/x"}`:          `"localhost"`,
		`{"url":"file:///etc/passwd"}`:            "absolute http or https URL",
	} {
		v := any(hook)
		if strings.HasPrefix(hook, "{") {
			v = json.RawMessage(hook)
		}
		r := call("alice", v)
		if r.err == nil || r.err.Code != -32602 || !strings.Contains(r.err.Message, want) {
			t.Errorf("webhook %v: want -32602 naming %s, got %s", hook, want, r)
		}
	}
	if n := len(e.tasksOf(t, "block")); n != 0 {
		t.Fatalf("refused calls stored %d records", n)
	}
	good := map[string]any{"url": "http://127.0.0.1:9/hook"}
	ok(call("alice", good))
	ok(call("alice", good))
	limitedReply(t, call("alice", good), http.StatusOK, "too many pending webhooks")
	ok(call("bob", good)) // the cap is per owner

	// The 2025-11-25 wire: the same checks.
	h := e.legacySession(t, http.Header{"Authorization": {"Bearer carol"}})
	legacy := func(url string) reply {
		p := map[string]any{"name": "block", "arguments": map[string]any{}, "task": map[string]any{"ttl": 60000},
			"_meta": map[string]any{"io.mcpqueue/webhook": map[string]any{"url": url}}}
		body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 9, "method": "tools/call", "params": p})
		return e.send(t, h, body, sendOpts{})
	}
	if r := legacy("http://10.0.0.1/x"); r.err == nil || r.err.Code != -32602 || !strings.Contains(r.err.Message, "10.0.0.1") {
		t.Fatalf("2025-11-25 webhook outside the allow list: want -32602 naming the host, got %s", r)
	}
	if r := legacy("http://127.0.0.1:9/hook"); r.err != nil {
		t.Fatalf("2025-11-25 webhook: %s", r)
	}
	n := 0
	_ = e.store.Deliveries(t.Context(), func(d *taskstate.Delivery) bool {
		n++
		if d.URL != "http://127.0.0.1:9/hook" {
			t.Errorf("delivery to %q", d.URL)
		}
		return true
	})
	if n != 4 || len(e.tasksOf(t, "block")) != 4 {
		t.Fatalf("%d deliveries and %d records, want 4 of each", n, len(e.tasksOf(t, "block")))
	}
}

// With no allow list webhooks are off: -32602 saying so.
func TestWebhooksOff(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(*mcpfront.Config) {})
	m, h := newRequest("tools/call", "hook", map[string]any{"name": "echo", "arguments": map[string]any{"text": "x"}}, true)
	m["params"].(map[string]any)["_meta"].(map[string]any)["io.mcpqueue/webhook"] = map[string]any{"url": "http://127.0.0.1/x"}
	body, _ := json.Marshal(m)
	r := e.send(t, h, body, sendOpts{})
	if r.err == nil || r.err.Code != -32602 || !strings.Contains(r.err.Message, "webhooks are off") {
		t.Fatalf("want -32602 webhooks are off, got %s", r)
	}
}
