package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"sync"
	"testing"
	"time"
)

func TestNewToolCall(t *testing.T) {
	tc, err := newToolCall(`a"b`, "{ \"seconds\" : 0 }")
	if err != nil {
		t.Fatal(err)
	}
	if want := `"name":"a\"b","arguments":{"seconds":0}`; tc.params != want {
		t.Errorf("params %s, want %s", tc.params, want)
	}
	for _, bad := range []struct{ name, args string }{{"noop", ""}, {"noop", "[]"}, {"noop", "null"}, {"noop", `{"a":`}, {"", "{}"}, {"a\r\nX: y", "{}"}} {
		if _, err := newToolCall(bad.name, bad.args); err == nil {
			t.Errorf("newToolCall(%q, %q): no error", bad.name, bad.args)
		}
	}
}

func TestListenerPID(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if pid := listenerPID(fmt.Sprintf("http://%s/mcp", l.Addr())); pid != os.Getpid() {
		t.Errorf("listenerPID = %d, want %d (this process)", pid, os.Getpid())
	}
	if pid := listenerPID("http://192.0.2.1:80/mcp"); pid != 0 {
		t.Errorf("listenerPID of a remote host = %d, want 0", pid)
	}
}

// TestTaskOnceAnswers serves each legal answer to a task-capable tools/call:
// the result inline, a handle already completed, a handle still working.
func TestTaskOnceAnswers(t *testing.T) {
	var mu sync.Mutex
	gets := map[string]int{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			ID     int64  `json:"id"`
			Method string `json:"method"`
			Params struct {
				Name   string `json:"name"`
				TaskID string `json:"taskId"`
			} `json:"params"`
		}
		_ = json.NewDecoder(r.Body).Decode(&req)
		result := ""
		switch {
		case req.Method == "tools/call" && req.Params.Name == "inline":
			result = `{"resultType":"complete","content":[]}`
		case req.Method == "tools/call" && req.Params.Name == "failing":
			result = `{"resultType":"complete","content":[],"isError":true}`
		case req.Method == "tools/call" && req.Params.Name == "done":
			result = `{"resultType":"task","status":"completed","taskId":"t-done","pollIntervalMs":1000}`
		case req.Method == "tools/call":
			result = `{"resultType":"task","status":"working","taskId":"t-work","pollIntervalMs":1}`
		case req.Method == "tasks/get":
			mu.Lock()
			gets[req.Params.TaskID]++
			n := gets[req.Params.TaskID]
			mu.Unlock()
			status := "completed"
			if req.Params.TaskID == "t-work" && n < 2 {
				status = "working"
			}
			result = fmt.Sprintf(`{"resultType":"complete","status":%q,"taskId":%q,"pollIntervalMs":1,"createdAt":"2026-01-01T00:00:00Z","lastUpdatedAt":"2026-01-01T00:00:00Z","result":{"content":[]}}`, status, req.Params.TaskID)
		}
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%d,"result":%s}`, req.ID, result)
	}))
	defer srv.Close()
	cli, err := newMCP(srv.URL+"/mcp", 1)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	run := func(tool string, poll pollPolicy) (sample, error) {
		tc, err := newToolCall(tool, "{}")
		if err != nil {
			t.Fatal(err)
		}
		return cli.taskOnce(ctx, tc, poll)
	}
	s, err := run("inline", pollPolicy{server: true})
	if err != nil || !s.inline || s.polls != 0 || s.e2e != s.create {
		t.Errorf("inline: %+v, %v; want inline, no polls, e2e = create", s, err)
	}
	if _, err := run("failing", pollPolicy{server: true}); !errors.Is(err, errToolError) {
		t.Errorf("inline isError: %v, want errToolError", err)
	}
	s, err = run("done", pollPolicy{server: true}) // would wait 1s if it followed pollIntervalMs
	if err != nil || s.inline || s.polls != 1 || s.waits != 0 || s.e2e > 500*time.Millisecond {
		t.Errorf("completed handle: %+v, %v; want one tasks/get at once", s, err)
	}
	if s.server != 0 {
		t.Errorf("whole-second timestamps gave a record time %s", s.server)
	}
	s, err = run("work", pollPolicy{every: time.Millisecond})
	if err != nil || s.inline || s.polls != 2 || s.waits != 2 {
		t.Errorf("working handle: %+v, %v; want two waits and two tasks/get", s, err)
	}
}
