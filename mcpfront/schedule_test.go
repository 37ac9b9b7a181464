package mcpfront_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/mcpqueue/mcpqueue/taskstate"
)

const notBeforeMeta = "io.mcpqueue/not-before"

// scheduledCall sends a 2026-07-28 tools/call of echo_task whose _meta
// carries not-before v.
func (e *env) scheduledCall(t *testing.T, ext bool, v any) reply {
	t.Helper()
	m, h := newRequest("tools/call", "s", map[string]any{"name": "echo_task", "arguments": map[string]any{"text": "later"}}, ext)
	m["params"].(map[string]any)["_meta"].(map[string]any)[notBeforeMeta] = v
	body, _ := json.Marshal(m)
	return e.send(t, h, body, sendOpts{})
}

// A scheduled call on 2026-07-28 gets its task handle at once: working,
// "scheduled for <time>", the time on the record; it can be cancelled.
func TestScheduledCallModern(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	at := time.Now().Add(time.Hour).UTC().Truncate(time.Second)
	r := e.scheduledCall(t, true, at.Format(time.RFC3339))
	var res map[string]json.RawMessage
	if r.err != nil || json.Unmarshal(r.result, &res) != nil {
		t.Fatalf("scheduled tools/call: %s", r)
	}
	id := str(res["taskId"])
	if str(res["resultType"]) != "task" || str(res["status"]) != "working" || str(res["statusMessage"]) != taskstate.ScheduledFor(at) {
		t.Fatalf("scheduled tools/call answered %v; want a working task %q", res, taskstate.ScheduledFor(at))
	}
	rec, err := e.store.Get(t.Context(), id)
	if err != nil || !taskstate.NotBefore(rec.Meta).Equal(at) {
		t.Fatalf("record %v (%v): want not-before %v", rec, err, at)
	}
	e.call(t, "tasks/cancel", map[string]any{"taskId": id}, true)
	if got := e.getTask(t, id); str(got["status"]) != "cancelled" {
		t.Fatalf("tasks/get after tasks/cancel of a scheduled task: %v", got)
	}
}

// A bad not-before is -32602 saying what is wrong, and no task is created:
// not a string, not RFC 3339, too far ahead, or a call answered inline.
func TestScheduledCallRefusals(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	soon := time.Now().Add(time.Hour).Format(time.RFC3339)
	for _, c := range []struct {
		name string
		ext  bool
		v    any
		want string
	}{
		{"number", true, 1765123200, "must be a string holding an RFC 3339 time"},
		{"not RFC 3339", true, "tomorrow at noon", `"tomorrow at noon" is not an RFC 3339 time`},
		{"too far ahead", true, time.Now().Add(31 * 24 * time.Hour).Format(time.RFC3339), "more than 720h0m0s ahead"},
		{"inline client", false, soon, "would be answered inline: declare the io.modelcontextprotocol/tasks extension"},
	} {
		r := e.scheduledCall(t, c.ext, c.v)
		if r.err == nil || r.err.Code != -32602 || !strings.Contains(r.err.Message, c.want) || !strings.Contains(r.err.Message, notBeforeMeta) {
			t.Errorf("%s: %s; want -32602 naming %s and saying %q", c.name, r, notBeforeMeta, c.want)
		}
	}
	if n := len(e.tasksOf(t, "echo_task")); n != 0 {
		t.Fatalf("%d tasks created by refused calls", n)
	}
}

// On 2025-11-25 a task-augmented call may be scheduled; one without
// params.task (answered inline) is refused.
func TestScheduledCallLegacy(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	h := e.sessionAs(t, "a", "2025-11-25", map[string]any{"tasks": map[string]any{"requests": map[string]any{"tools": map[string]any{"call": map[string]any{}}}}})
	at := time.Now().Add(time.Hour).UTC().Truncate(time.Second)
	call := map[string]any{"name": "echo_task", "arguments": map[string]any{"text": "later"}, "_meta": map[string]any{notBeforeMeta: at.Format(time.RFC3339)}}
	r := e.legacySend(t, h, "tools/call", call)
	if r.err == nil || r.err.Code != -32602 || !strings.Contains(r.err.Message, "params.task") {
		t.Fatalf("inline legacy call with not-before: %s; want -32602 asking for params.task", r)
	}
	call["task"] = map[string]any{}
	r = e.legacySend(t, h, "tools/call", call)
	var res struct {
		Task struct {
			TaskID        string `json:"taskId"`
			Status        string `json:"status"`
			StatusMessage string `json:"statusMessage"`
		} `json:"task"`
	}
	if r.err != nil || json.Unmarshal(r.result, &res) != nil || res.Task.Status != "working" || res.Task.StatusMessage != taskstate.ScheduledFor(at) {
		t.Fatalf("task-augmented legacy call with not-before: %s; want a working task %q", r, taskstate.ScheduledFor(at))
	}
	if n := len(e.tasksOf(t, "echo_task")); n != 1 {
		t.Fatalf("%d tasks; want the one scheduled", n)
	}
}
