package mcpfront_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/mcpqueue/mcpqueue/internal/testenv"
	"github.com/mcpqueue/mcpqueue/taskstate"
)

// TestAnswerToNoPendingRequest: an answer that answers no pending input
// request is a -32602 error that names the key and lists the pending keys
// (or says there is none), and changes nothing, on both wires: tasks/update
// (2026-07-28) with the handler's key ("confirm") instead of the wire key
// ("confirm-1"), and a 2025-11-25 response to a request id whose key is not
// pending; an answer resent after it was taken is acknowledged again.
func TestAnswerToNoPendingRequest(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	// A 2025-11-25 session whose client takes elicitations.
	legacy := http.Header{"Content-Type": {"application/json"}, "Accept": {"application/json, text/event-stream"}}
	body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": map[string]any{
		"protocolVersion": "2025-11-25", "capabilities": map[string]any{"elicitation": map[string]any{}}, "clientInfo": map[string]any{"name": "t", "version": "1"},
	}})
	init := e.send(t, legacy, body, sendOpts{})
	legacy.Set("MCP-Protocol-Version", "2025-11-25")
	legacy.Set("Mcp-Session-Id", init.header.Get("Mcp-Session-Id"))
	accept := map[string]any{"action": "accept", "content": map[string]any{"confirm": true}}

	update := func(id string, responses map[string]any) reply {
		m, h := newRequest("tasks/update", "update", map[string]any{"taskId": id, "inputResponses": responses}, true)
		body, _ := json.Marshal(m)
		return e.send(t, h, body, sendOpts{})
	}
	respond := func(id, key string) reply {
		body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": "mcpq-input:" + id + ":" + key, "result": accept})
		return e.send(t, legacy, body, sendOpts{})
	}
	wantStray := func(what string, r reply, status int, unknown, pending []string, says string) {
		t.Helper()
		bad := all(wantData("unknownKeys", unknown), wantData("pendingKeys", pending))(r)
		if r.status != status || r.err == nil || r.err.Code != -32602 {
			bad = append(bad, "want -32602")
		} else if !strings.Contains(r.err.Message, says) || !strings.Contains(r.err.Message, `"`+unknown[0]+`"`) {
			bad = append(bad, "the message does not name the key and say "+says)
		}
		if len(bad) > 0 {
			t.Errorf("%s: %s: %v", what, r, bad)
		}
	}

	// A task waiting for input on each wire (each wire's owner sees only
	// its own).
	askID := e.startTask(t, "ask", map[string]any{})
	asking := e.waitStatus(t, askID, "input_required")
	var reqs map[string]json.RawMessage
	_ = json.Unmarshal(asking["inputRequests"], &reqs)
	if len(reqs) != 1 || keys(reqs)[0] != "confirm-1" {
		t.Fatalf("ask: want one input request keyed confirm-1 (the handler's key confirm), got %s", asking["inputRequests"])
	}
	const askKey = "confirm-1"
	var res map[string]json.RawMessage
	_ = json.Unmarshal(e.legacyCall(t, legacy, "tools/call", map[string]any{"name": "ask", "arguments": map[string]any{}, "task": map[string]any{"ttl": 600000}}).result, &res)
	legacyID := legacyTaskID(res)
	stored := func(id string) *taskstate.Task {
		tk, err := e.store.Get(t.Context(), id)
		if err != nil {
			t.Fatalf("reading task %q: %v", id, err)
		}
		return tk
	}
	testenv.Eventually(t, 10*time.Second, "the 2025-11-25 task asks", func() bool { return stored(legacyID).Status == taskstate.InputRequired })
	if _, ok := stored(legacyID).InputRequests[askKey]; !ok {
		t.Fatalf("the 2025-11-25 task: want its request keyed %s, got %v", askKey, stored(legacyID).InputRequests)
	}

	// The handler's key, on either wire: an error naming it and the
	// pending key; the tasks still wait for that key.
	wantStray("tasks/update with the handler's key", update(askID, map[string]any{"confirm": accept}), http.StatusOK,
		[]string{"confirm"}, []string{askKey}, "no pending input request has the key")
	wantStray("2025-11-25 response to a key not pending", respond(legacyID, "confirm"), http.StatusBadRequest,
		[]string{"confirm"}, []string{askKey}, "no pending input request has the key")
	// A key unrelated to any pending one, beside one pending, is ignored
	// on tasks/update as the tasks extension says (the conformance suite
	// wants the ack).
	if r := update(askID, map[string]any{"unrelated": accept}); r.status != http.StatusOK || r.err != nil {
		t.Errorf("tasks/update with an unrelated key beside a pending one: %s, want the ack", r)
	}
	if again := e.getTask(t, askID); str(again["status"]) != "input_required" || string(again["inputRequests"]) != string(asking["inputRequests"]) {
		t.Fatalf("the waiting task changed: %v", again)
	}
	if tk := stored(legacyID); tk.Status != taskstate.InputRequired || len(tk.InputRequests) != 1 || len(tk.InputResponses) != 0 {
		t.Fatalf("the waiting 2025-11-25 task changed: %+v", tk)
	}

	// The right key answers; the same answer resent is acknowledged.
	if r := update(askID, map[string]any{askKey: accept}); r.status != http.StatusOK || r.err != nil {
		t.Fatalf("tasks/update with the wire key: %s", r)
	}
	if r := respond(legacyID, askKey); r.status != http.StatusAccepted {
		t.Fatalf("the 2025-11-25 answer: %s, want 202", r)
	}
	e.waitCompleted(t, askID, "action=accept confirm=true")
	testenv.Eventually(t, 10*time.Second, "the 2025-11-25 task completes", func() bool { return stored(legacyID).Status == taskstate.Completed })
	if r := update(askID, map[string]any{askKey: accept}); r.status != http.StatusOK || r.err != nil {
		t.Errorf("the answer resent: %s, want the ack", r)
	}
	if r := respond(legacyID, askKey); r.status != http.StatusAccepted {
		t.Errorf("the 2025-11-25 answer resent: %s, want 202", r)
	}

	// Nothing pending: any other key is an error saying so.
	wantStray("tasks/update on a completed task", update(askID, map[string]any{"confirm-2": accept}), http.StatusOK,
		[]string{"confirm-2"}, []string{}, "has no pending input request (it is completed)")
	wantStray("2025-11-25 response on a completed task", respond(legacyID, "confirm-2"), http.StatusBadRequest,
		[]string{"confirm-2"}, []string{}, "has no pending input request (it is completed)")
	for _, id := range []string{askID, legacyID} {
		if tk := stored(id); tk.Status != taskstate.Completed || len(tk.InputResponses) != 1 {
			t.Errorf("the completed task %s changed: %+v", id, tk)
		}
	}
}
