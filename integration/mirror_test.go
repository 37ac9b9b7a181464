package integration

// Clients without tasks are never cut off (issue 28, item 1): past the api's
// --handle-after a tool call is handed over — an ordinary CallToolResult
// with structuredContent {taskId, status, pollAfterMs} — and the mirror tool
// tasks_result returns the tool's own result once it is done. Three clients
// that did not negotiate tasks, on both brokers: raw 2025-06-18 HTTP, the
// official TS SDK 1.x client (integration/node/clients/sdk-v1-mirror.mjs),
// and a raw 2026-07-28 client without the tasks extension.

import (
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mcpqueue/mcpqueue/integration/harness"
)

const (
	mirrorHandleAfter = 2 * time.Second
	mirrorToolMs      = 4000 // the wait tool's run: twice the hand-over bound
	mirrorExpect      = "waited 4000 ms"
)

// mirrorHandover is the hand-over result's structured content.
type mirrorHandover struct {
	TaskID      string `json:"taskId"`
	Status      string `json:"status"`
	PollAfterMs int64  `json:"pollAfterMs"`
}

// handoverOf returns the hand-over a tools/call result carries, or nil when
// it is another result (the tool's own). A hand-over that breaks the wire
// shape fails the test.
func handoverOf(t *testing.T, raw json.RawMessage) *mirrorHandover {
	t.Helper()
	var r struct {
		IsError    bool `json:"isError"`
		Content    []struct{ Text string }
		Structured *mirrorHandover `json:"structuredContent"`
	}
	if err := json.Unmarshal(raw, &r); err != nil {
		t.Fatalf("tools/call result %s: %v", raw, err)
	}
	if r.Structured == nil || r.Structured.TaskID == "" {
		return nil
	}
	h := r.Structured
	if r.IsError || h.Status == "" || h.PollAfterMs <= 0 ||
		len(r.Content) != 1 || !strings.Contains(r.Content[0].Text, `call the tool tasks_result with {"taskId":"`+h.TaskID+`"}`) {
		t.Fatalf("malformed hand-over: %s", raw)
	}
	return h
}

// wantHandedOver checks that a call answered after took is a hand-over at
// about --handle-after (before the tool could have finished) and returns it.
func wantHandedOver(t *testing.T, raw json.RawMessage, took time.Duration) *mirrorHandover {
	t.Helper()
	h := handoverOf(t, raw)
	if h == nil {
		t.Fatalf("after %s: want the hand-over, got %s", took, raw)
	}
	if took < mirrorHandleAfter || took >= mirrorToolMs*time.Millisecond {
		t.Fatalf("handed over after %s, want about %s", took, mirrorHandleAfter)
	}
	t.Logf("handed over after %s: %+v", took.Round(time.Millisecond), *h)
	return h
}

// followMirror calls tasks_result (through call) until it answers with
// something other than the hand-over, and returns that.
func followMirror(t *testing.T, id string, call func(args map[string]any) (json.RawMessage, error)) json.RawMessage {
	t.Helper()
	for round := 1; ; round++ {
		raw, err := call(map[string]any{"taskId": id})
		if err != nil {
			t.Fatalf("tasks_result round %d: %v", round, err)
		}
		h := handoverOf(t, raw)
		if h == nil {
			t.Logf("tasks_result answered after %d round(s)", round)
			return raw
		}
		if h.TaskID != id || round > 30 {
			t.Fatalf("tasks_result round %d: %s", round, raw)
		}
	}
}

// wantCompletedNotCancelled checks the tool's own result came back and the
// record completed (the hand-over did not cancel it).
func wantCompletedNotCancelled(t *testing.T, s *system, id string, raw json.RawMessage) {
	t.Helper()
	if got := resultText(t, raw); !strings.Contains(got, mirrorExpect) {
		t.Fatalf("tasks_result: %s, want the tool's result %q", raw, mirrorExpect)
	}
	if rec := harness.Records(t, s.be, s.prefix)[id]; rec == nil || rec.Status != "completed" {
		t.Fatalf("record of %s: %+v, want completed", id, rec)
	}
}

func TestMirrorHandover(t *testing.T) {
	t.Parallel()
	onBrokersWith(t, []string{"--handle-after", mirrorHandleAfter.String()}, func(t *testing.T, s *system) {
		s.worker(t, "worker")
		args := map[string]any{"ms": mirrorToolMs}

		t.Run("2025-06-18 raw HTTP", func(t *testing.T) {
			sess := initializeMirror(t, s.mcpURL, "2025-06-18")
			var list struct {
				Tools []struct{ Name string } `json:"tools"`
			}
			sess.call(t, "tools/list", nil, &list)
			var names []string
			for _, tl := range list.Tools {
				names = append(names, tl.Name)
			}
			if !slices.Contains(names, "tasks_result") || !slices.Contains(names, "tasks_cancel") {
				t.Fatalf("tools/list of a client without tasks: %v, want tasks_result and tasks_cancel", names)
			}
			start := time.Now()
			r := sess.post(t, "tools/call", map[string]any{"name": "wait", "arguments": args, "_meta": map[string]any{"progressToken": "p-1"}})
			if r.Error != nil {
				t.Fatalf("after %s: want the hand-over, got error %v", time.Since(start), r.Error)
			}
			h := wantHandedOver(t, r.Result, time.Since(start))
			if !strings.Contains(string(r.Body), `"notifications/progress"`) {
				t.Errorf("no progress notification while the call waited: %s", r.Body)
			}
			// Another session (no auth: another owner) gets an unknown id.
			other := initializeMirror(t, s.mcpURL, "2025-06-18")
			if r := other.post(t, "tools/call", map[string]any{"name": "tasks_result", "arguments": map[string]any{"taskId": h.TaskID}}); r.Error == nil || r.Error.Code != -32602 {
				t.Fatalf("tasks_result from another session: HTTP %d %s, want -32602", r.Status, r.Body)
			}
			raw := followMirror(t, h.TaskID, func(a map[string]any) (json.RawMessage, error) {
				r := sess.post(t, "tools/call", map[string]any{"name": "tasks_result", "arguments": a})
				if r.Error != nil {
					return nil, r.Error
				}
				return r.Result, nil
			})
			wantCompletedNotCancelled(t, s, h.TaskID, raw)
		})

		t.Run("official TS SDK 1.x", func(t *testing.T) {
			var sum struct {
				clientSummary
				HandoverMs      int    `json:"handoverMs"`
				Rounds          int    `json:"rounds"`
				Progress        int    `json:"progress"`
				ProtocolVersion string `json:"protocolVersion"`
			}
			argsJSON, _ := json.Marshal(args)
			runNodeClient(t, "sdk-v1-mirror.mjs", s.mcpURL, "handover", []string{"wait", string(argsJSON), mirrorExpect}, &sum)
			t.Logf("TS SDK (protocol %s): handed over after %d ms, %d tasks_result call(s), %d progress notification(s)", sum.ProtocolVersion, sum.HandoverMs, sum.Rounds, sum.Progress)
			if took := time.Duration(sum.HandoverMs) * time.Millisecond; took < mirrorHandleAfter || took >= mirrorToolMs*time.Millisecond {
				t.Fatalf("handed over after %s, want about %s", took, mirrorHandleAfter)
			}
			if sum.Progress < 1 {
				t.Errorf("the SDK saw no progress notification while the call waited")
			}
			if rec := harness.Records(t, s.be, s.prefix)[sum.TaskID]; rec == nil || rec.Status != "completed" {
				t.Fatalf("record of %s: %+v, want completed", sum.TaskID, rec)
			}
		})

		t.Run("2026-07-28 without the tasks extension", func(t *testing.T) {
			c := harness.NewClient(s.mcpURL, false)
			ctx := t.Context()
			var list struct {
				Tools []struct{ Name string } `json:"tools"`
			}
			if err := c.Call(ctx, "tools/list", nil, &list); err != nil {
				t.Fatal(err)
			}
			if !slices.ContainsFunc(list.Tools, func(x struct{ Name string }) bool { return x.Name == "tasks_result" }) {
				t.Fatalf("tools/list without the extension lacks tasks_result: %+v", list.Tools)
			}
			start := time.Now()
			res, err := c.CallTool(ctx, "wait", args)
			if err != nil {
				t.Fatal(err)
			}
			raw, _ := json.Marshal(res)
			h := wantHandedOver(t, raw, time.Since(start))
			if got := string(res["resultType"]); got != `"complete"` {
				t.Fatalf("hand-over resultType %s, want complete", got)
			}
			final := followMirror(t, h.TaskID, func(a map[string]any) (json.RawMessage, error) {
				res, err := c.CallTool(ctx, "tasks_result", a)
				raw, _ := json.Marshal(res)
				return raw, err
			})
			wantCompletedNotCancelled(t, s, h.TaskID, final)
		})
	})
}

// mirrorSession is a session of a pre-tasks revision.
type mirrorSession struct {
	url, id, version string
	n                int
}

// initializeMirror opens a session of version on url declaring no
// capabilities at all (no tasks).
func initializeMirror(t *testing.T, url, version string) *mirrorSession {
	t.Helper()
	r, err := legacyDoAs(version, url, "", "initialize", map[string]any{
		"protocolVersion": version, "capabilities": map[string]any{},
		"clientInfo": map[string]any{"name": "mirror-it", "version": "0.0.1"},
	}, 0)
	if err != nil || r.Status != http.StatusOK || r.Error != nil || r.Header.Get("Mcp-Session-Id") == "" {
		t.Fatalf("initialize %s: %v %+v", version, err, r)
	}
	s := &mirrorSession{url: url, id: r.Header.Get("Mcp-Session-Id"), version: version}
	if n, err := legacyDoAs(version, url, s.id, "notifications/initialized", nil, nil); err != nil || n.Status != http.StatusAccepted {
		t.Fatalf("notifications/initialized: %v %+v", err, n)
	}
	return s
}

func (s *mirrorSession) post(t *testing.T, method string, params any) *legacyReply {
	t.Helper()
	s.n++
	r, err := legacyDoAs(s.version, s.url, s.id, method, params, s.n)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func (s *mirrorSession) call(t *testing.T, method string, params, out any) {
	t.Helper()
	r := s.post(t, method, params)
	if r.Status != http.StatusOK || r.Error != nil || json.Unmarshal(r.Result, out) != nil {
		t.Fatalf("%s: HTTP %d %s", method, r.Status, r.Body)
	}
}
