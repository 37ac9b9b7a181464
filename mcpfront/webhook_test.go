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
	n := 0
	_ = e.store.Deliveries(t.Context(), func(d *taskstate.Delivery) bool {
		n++
		if d.URL != "http://127.0.0.1:9/hook" {
			t.Errorf("delivery to %q", d.URL)
		}
		return true
	})
	if n != 3 || len(e.tasksOf(t, "block")) != 3 {
		t.Fatalf("%d deliveries and %d records, want 3 of each", n, len(e.tasksOf(t, "block")))
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
