package mcpwire

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// fixtures name, per revision, each testdata file (a whole JSON-RPC message
// as that revision sends it) and the type its payload (params, result or
// error) decodes into; nil: the envelope only (its params are checked by
// another type's test, or are the peer's own).
var fixtures = map[string]map[string]func() any{
	Version20251125: {
		"initialize.request.json":        func() any { return new(InitializeParams) },
		"initialize.result.json":         func() any { return new(InitializeResult) },
		"tools-list.result.json":         func() any { return new(ListToolsResult) },
		"prompts-list.result.json":       func() any { return new(ListPromptsResult) },
		"tools-call-task.request.json":   func() any { return new(CallToolParams) },
		"tools-call-task.result.json":    func() any { return new(LegacyCreateTaskResult) },
		"tasks-get.result.json":          func() any { return new(LegacyTask) },
		"tasks-list.result.json":         func() any { return new(LegacyListTasksResult) },
		"tasks-status.notification.json": func() any { return new(LegacyTask) },
		"elicitation.request.json":       nil,
		"progress.notification.json":     func() any { return new(ProgressParams) },
		"message.notification.json":      func() any { return new(LogMessageParams) },
		"cancelled.notification.json":    func() any { return new(CancelledParams) },
		"error.response.json":            func() any { return new(Error) },
	},
	Version20260728: {
		"server-discover.result.json":           func() any { return new(DiscoverResult) },
		"tools-list.result.json":                func() any { return new(ListToolsResult) },
		"tools-call.request.json":               func() any { return new(CallToolParams) },
		"tools-call-mrtr.request.json":          func() any { return new(CallToolParams) },
		"tools-call-task.result.json":           func() any { return new(Task) },
		"tools-call-input-required.result.json": func() any { return new(InputRequiredResult) },
		"tasks-get-completed.result.json":       func() any { return new(Task) },
		"tasks-get-failed.result.json":          func() any { return new(Task) },
		"tasks-get-input-required.result.json":  func() any { return new(Task) },
		"tasks-update.request.json":             func() any { return new(TaskParams) },
		"missing-capability.response.json":      func() any { return new(Error) },
	},
}

// TestRoundTrip decodes every fixture into the shared types, refusing
// members they do not know, and encodes it again: the bytes must be the
// fixture's (compacted), so a renamed member, a lost omitempty or a null
// turned into an absence fails here.
func TestRoundTrip(t *testing.T) {
	for era, files := range fixtures {
		on, err := filepath.Glob(filepath.Join("testdata", era, "*.json"))
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range on {
			if _, ok := files[filepath.Base(f)]; !ok {
				t.Errorf("%s has no entry in fixtures: it is never checked", f)
			}
		}
		for name, payload := range files {
			t.Run(era+"/"+name, func(t *testing.T) {
				raw, err := os.ReadFile(filepath.Join("testdata", era, name))
				if err != nil {
					t.Fatal(err)
				}
				var m Message
				roundTrip(t, "message", raw, &m)
				if payload == nil {
					return
				}
				part := m.Params
				switch {
				case strings.Contains(name, ".result."):
					part = m.Result
				case strings.Contains(name, ".response."):
					part = m.Error
				}
				if len(part) == 0 {
					t.Fatalf("%s has no payload to decode", name)
				}
				roundTrip(t, "payload", part, payload())
			})
		}
	}
}

func roundTrip(t *testing.T, what string, raw []byte, v any) {
	t.Helper()
	var want bytes.Buffer
	if err := json.Compact(&want, raw); err != nil {
		t.Fatalf("%s: the fixture is not JSON: %v", what, err)
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		t.Fatalf("%s: decoding into %T: %v", what, v, err)
	}
	got, err := json.Marshal(v)
	if err != nil {
		t.Fatalf("%s: encoding %T: %v", what, v, err)
	}
	if !bytes.Equal(got, want.Bytes()) {
		t.Errorf("%s: %T does not give back what it read:\n got %s\nwant %s", what, v, got, want.Bytes())
	}
}

// The fixtures hold what the types must tell apart: a null ttl (unlimited)
// is not an absent one, and Err decodes an error object.
func TestNullsAndErrors(t *testing.T) {
	var lt LegacyTask
	if err := json.Unmarshal([]byte(`{"taskId":"a","status":"working","createdAt":"x","lastUpdatedAt":"x","ttl":null}`), &lt); err != nil || lt.TTL != nil {
		t.Fatalf("ttl null: %+v, %v", lt, err)
	}
	if b, _ := json.Marshal(lt); !bytes.Contains(b, []byte(`"ttl":null`)) {
		t.Errorf("a task kept without limit must say ttl null: %s", b)
	}
	var mt Task
	if b, _ := json.Marshal(mt); !bytes.Contains(b, []byte(`"ttlMs":null`)) || bytes.Contains(b, []byte(`"result"`)) {
		t.Errorf("2026-07-28 task: ttlMs null, no result member when there is none: %s", b)
	}
	m := Message{Error: json.RawMessage(`{"code":-32602,"message":"Task not found","data":{"taskId":"a"}}`)}
	if e := m.Err(); e == nil || e.Code != -32602 || e.Message != "Task not found" || string(e.Data) != `{"taskId":"a"}` {
		t.Errorf("Err() = %+v", e)
	}
	for _, none := range []string{"", "null"} {
		if e := (&Message{Error: json.RawMessage(none)}).Err(); e != nil {
			t.Errorf("error %q: Err() = %+v, want nil", none, e)
		}
	}
	if e := (&Message{Error: json.RawMessage(`"boom"`)}).Err(); e == nil || e.Code != codeInternalError || !strings.Contains(e.Message, `"boom"`) {
		t.Errorf("a malformed error object must be an internal error quoting it: %+v", e)
	}
	var r ServerCapabilities
	_ = json.Unmarshal([]byte(`{"tasks":{"requests":{"tools":{"call":{}}}}}`), &r)
	var none ServerCapabilities
	_ = json.Unmarshal([]byte(`{"tasks":{"list":{}}}`), &none)
	if !r.TaskToolCalls() || none.TaskToolCalls() {
		t.Errorf("TaskToolCalls: %v for tasks.requests.tools.call, %v without", r.TaskToolCalls(), none.TaskToolCalls())
	}
	c := ClientCapabilities{Extensions: map[string]json.RawMessage{TasksExtension: Empty, "other": json.RawMessage("true")}}
	if !c.Declares(TasksExtension) || c.Declares("other") || c.Declares("absent") {
		t.Error("Declares: only an extension declared with a settings object counts")
	}
	if got := slices.Sorted(func(yield func(string) bool) {
		for k := range fixtures {
			if !yield(k) {
				return
			}
		}
	}); !slices.Equal(got, []string{Version20251125, Version20260728}) {
		t.Errorf("fixtures cover %v", got)
	}
}
