package mcpfront_test

import (
	"encoding/json"
	"strconv"
	"testing"
)

// The polling interval a task answer suggests follows what the front end
// learnt from the tool's finished tasks: a create answer of a tool whose
// tasks take ~400 ms suggests waiting about that long; one of a tool that
// takes milliseconds suggests less than the 100 ms an unmeasured tool gets.
// Both wires suggest the same.
func TestPollIntervalLearnsToolDuration(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	hint := func(res map[string]json.RawMessage, field string) int {
		t.Helper()
		n, err := strconv.Atoi(string(res[field]))
		if err != nil {
			t.Fatalf("%s %s: not a number: %v", field, res[field], err)
		}
		t.Logf("%s %d", field, n)
		return n
	}
	slow := map[string]any{"ms": 400}
	fast := map[string]any{"text": "quick"}
	for _, c := range []struct {
		tool string
		args any
		runs int
	}{{"nap", slow, 2}, {"echo", fast, 8}} {
		if h := hint(e.call(t, "tools/call", map[string]any{"name": c.tool, "arguments": c.args}, true), "pollIntervalMs"); h != 100 {
			t.Errorf("%s before any task finished: pollIntervalMs %d, want 100", c.tool, h)
		}
		for range c.runs { // tasks/get reads each finished record
			e.waitStatus(t, e.startTask(t, c.tool, c.args), "completed")
		}
	}

	// The age of a new task is a few ms at most, so the hint is about the
	// tool's typical duration (at least 400 ms for nap); the bounds leave
	// room for a loaded machine.
	if h := hint(e.call(t, "tools/call", map[string]any{"name": "nap", "arguments": slow}, true), "pollIntervalMs"); h < 200 || h > 5000 {
		t.Errorf("nap (~400 ms) create answer: pollIntervalMs %d, want 200..5000", h)
	}
	if h := hint(e.call(t, "tools/call", map[string]any{"name": "echo", "arguments": fast}, true), "pollIntervalMs"); h < 5 || h >= 100 {
		t.Errorf("echo (a few ms) create answer: pollIntervalMs %d, want 5..99", h)
	}

	h := e.legacySession(t, nil)
	body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": map[string]any{
		"name": "nap", "arguments": slow, "task": map[string]any{},
	}})
	r := e.send(t, h, body, sendOpts{})
	var res struct {
		Task map[string]json.RawMessage `json:"task"`
	}
	if r.status != 200 || r.err != nil || json.Unmarshal(r.result, &res) != nil || res.Task == nil {
		t.Fatalf("2025-11-25 task-augmented tools/call: %s", r)
	}
	if h := hint(res.Task, "pollInterval"); h < 200 || h > 5000 {
		t.Errorf("nap on 2025-11-25: pollInterval %d, want 200..5000", h)
	}
}
