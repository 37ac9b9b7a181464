package mcpfront

import (
	"bytes"
	"encoding/json"
	"reflect"
	"testing"
	"time"

	"github.com/mcpqueue/mcpqueue/backend"
	"github.com/mcpqueue/mcpqueue/internal/mcpwire"
	"github.com/mcpqueue/mcpqueue/taskstate"
	"github.com/mcpqueue/mcpqueue/vocab"
)

// reshape's splice (results that carry neither key) and its map path must
// give the same JSON values.
func TestReshape(t *testing.T) {
	meta := json.RawMessage(`{"io.modelcontextprotocol/serverInfo":{"name":"x","version":"1"}}`)
	for _, c := range []struct {
		result string
		rt     string
		meta   json.RawMessage
		want   string
	}{
		{`{"content":[{"type":"text","text":"ok"}]}`, "complete", nil, `{"content":[{"type":"text","text":"ok"}],"resultType":"complete"}`},
		{`{"content":[]}`, "complete", meta, `{"content":[],"resultType":"complete","_meta":{"io.modelcontextprotocol/serverInfo":{"name":"x","version":"1"}}}`},
		{`{}`, "complete", meta, `{"resultType":"complete","_meta":{"io.modelcontextprotocol/serverInfo":{"name":"x","version":"1"}}}`},
		{`{}`, "", nil, `{}`},
		{` { "a" : 1 } `, "", meta, `{"a":1,"_meta":{"io.modelcontextprotocol/serverInfo":{"name":"x","version":"1"}}}`},
		// The result's own _meta is kept and merged.
		{`{"content":[],"_meta":{"mine":true}}`, "complete", meta, `{"content":[],"resultType":"complete","_meta":{"mine":true,"io.modelcontextprotocol/serverInfo":{"name":"x","version":"1"}}}`},
		// A resultType the result carries is replaced.
		{`{"resultType":"other","content":[]}`, "complete", nil, `{"content":[],"resultType":"complete"}`},
		// Not an object: an empty content list.
		{`[1]`, "complete", nil, `{"content":[],"resultType":"complete"}`},
		{``, "", nil, `{"content":[]}`},
	} {
		got := reshape(json.RawMessage(c.result), c.rt, c.meta)
		var g, w any
		if err := json.Unmarshal(got, &g); err != nil {
			t.Fatalf("reshape(%s) = %s: not JSON: %v", c.result, got, err)
		}
		_ = json.Unmarshal([]byte(c.want), &w)
		if !reflect.DeepEqual(g, w) {
			t.Errorf("reshape(%s, %q, %s) = %s, want %s", c.result, c.rt, c.meta, got, c.want)
		}
	}
}

// appendTask writes what encoding/json writes for the same fields.
func TestAppendTaskMatchesEncodingJSON(t *testing.T) {
	s := New(nil, backend.Backend{}, &Config{Name: "srv <&>", Version: "1\u2028", StateKey: []byte("k")})
	now := time.Date(2026, 11, 30, 8, 0, 0, 120000000, time.UTC)
	s.cfg.Now = func() time.Time { return now.Add(time.Second) }
	base := taskstate.Task{ID: "ABCDEFGHIJKLMNOPQRSTUVWXYZ", Status: taskstate.Working, CreatedAt: now, LastUpdatedAt: now, TTLMs: 60000, PollIntervalMs: 500}
	cases := map[string]func(*taskstate.Task){
		"working":   func(*taskstate.Task) {},
		"no ttl":    func(t *taskstate.Task) { t.TTLMs = 0 },
		"message":   func(t *taskstate.Task) { t.StatusMessage = "half \"done\" <now>\n" },
		"completed": func(t *taskstate.Task) { t.Status = taskstate.Completed; t.Result = json.RawMessage(`{"content":[]}`) },
		"failed": func(t *taskstate.Task) {
			t.Status = taskstate.Failed
			t.Error = &taskstate.RPCError{Code: -1, Message: "m"}
		},
		"failed without error": func(t *taskstate.Task) { t.Status = taskstate.Failed },
		"input": func(t *taskstate.Task) {
			t.Status = taskstate.InputRequired
			t.InputRequests = map[string]json.RawMessage{"k": json.RawMessage(`{"method":"elicitation/create"}`)}
		},
	}
	for name, edit := range cases {
		tk := base
		edit(&tk)
		want := map[string]any{
			"resultType": "complete", "taskId": tk.ID, "status": tk.Status,
			"createdAt": tk.CreatedAt.Format(time.RFC3339Nano), "lastUpdatedAt": tk.LastUpdatedAt.Format(time.RFC3339Nano),
			"ttlMs": nil, "pollIntervalMs": s.pollInterval(&tk),
			"_meta": map[string]any{metaServerInfo: map[string]any{"name": s.cfg.Name, "version": s.cfg.Version}},
		}
		if tk.TTLMs > 0 {
			want["ttlMs"] = tk.TTLMs
		}
		if tk.StatusMessage != "" {
			want["statusMessage"] = tk.StatusMessage
		}
		switch tk.Status {
		case taskstate.Completed:
			want["result"] = map[string]any{"content": []any{}, "resultType": "complete"}
		case taskstate.Failed:
			want["error"] = tk.Error
			if tk.Error == nil {
				want["error"] = &taskstate.RPCError{Code: vocab.CodeInternalError, Message: "task failed"}
			}
		case taskstate.InputRequired:
			want["inputRequests"] = tk.InputRequests
		}
		wb, _ := json.Marshal(want)
		var w, g any
		_ = json.Unmarshal(wb, &w)
		got := s.detailedTask(&tk)
		if err := json.Unmarshal(got, &g); err != nil {
			t.Fatalf("%s: %s is not JSON: %v", name, got, err)
		}
		if !reflect.DeepEqual(g, w) {
			t.Errorf("%s:\n got %s\nwant %s", name, got, wb)
		}
		for _, b := range [][]byte{got, s.createTaskResult(&tk)} {
			sameAsShared(t, name, b)
		}
	}
}

// sameAsShared: a task appended by hand is exactly the shared wire type
// (mcpwire.Task) encoded: no member it does not know, the same order.
func sameAsShared(t *testing.T, name string, b []byte) {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	var v mcpwire.Task
	if err := dec.Decode(&v); err != nil {
		t.Fatalf("%s: %s does not decode as mcpwire.Task: %v", name, b, err)
	}
	if again, _ := json.Marshal(&v); !bytes.Equal(again, b) {
		t.Errorf("%s: appended\n %s\nbut mcpwire.Task encodes\n %s", name, b, again)
	}
}
