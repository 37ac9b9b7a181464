package integration

// The 2025-11-25 wire (initialize, sessions, experimental tasks) end to end:
// the official @modelcontextprotocol/sdk@1.32.2 client (pinned in
// integration/node) drives real broker / api / worker processes through
// integration/node/clients/sdk-v1-tasks.mjs, and raw HTTP shows that a
// session lives in the store, so any api replica serves it.

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mcpqueue/mcpqueue/integration/harness"
)

// legacySummary is the one-line JSON sdk-v1-tasks.mjs prints last: what
// ext-tasks.mjs prints, and more.
type legacySummary struct {
	clientSummary
	TaskIDs       []string `json:"taskIds"`
	ListedA       []string `json:"listedA"`
	ListedB       []string `json:"listedB"`
	SessionA      string   `json:"sessionA"`
	SessionB      string   `json:"sessionB"`
	StatusMessage string   `json:"statusMessage"`
	StreamError   string   `json:"streamError"`
	InputID       string   `json:"inputId"`
	TTL           *int     `json:"ttl"`
}

// runLegacyClient runs sdk-v1-tasks.mjs SCENARIO against mcpURL with the
// Node 22 binary and fails the test, with the script's output, unless it succeeds.
func runLegacyClient(t *testing.T, mcpURL, scenario string, args ...string) legacySummary {
	t.Helper()
	var s legacySummary
	runNodeClient(t, "sdk-v1-tasks.mjs", mcpURL, scenario, args, &s)
	return s
}

// The SDK streams a task-augmented tools/call to its result (tasks/get
// polling, then tasks/result).
func TestLegacyClientStreamResult(t *testing.T) {
	t.Parallel()
	eachBroker(t, func(t *testing.T, broker string) {
		mcpURL, _ := officialSystem(t, broker, demoWorker)

		s := wantReportThenWait(t, runLegacyClient, mcpURL, "stream-result")
		if s.TTL == nil || *s.TTL != 60000 {
			t.Fatalf("created task ttl %v, want the requested 60000", s.TTL)
		}
	})
}

// A tool error is a failed task on the 2025-11-25 wire, and the SDK's
// stream reports it as such.
func TestLegacyClientStreamFailure(t *testing.T) {
	t.Parallel()
	eachBroker(t, func(t *testing.T, broker string) {
		mcpURL, _ := officialSystem(t, broker, demoWorker)

		s := runLegacyClient(t, mcpURL, "stream-failure", "fail", `{}`)
		if s.Tool != "fail" || s.Status != "failed" || s.TaskID == "" {
			t.Fatalf("summary %+v", s)
		}
		if !strings.Contains(s.Text, "this tool always fails") {
			t.Fatalf("tasks/result text %q, want the tool's error", s.Text)
		}
		if !strings.Contains(s.StreamError, s.TaskID) {
			t.Fatalf("stream error %q does not name the task", s.StreamError)
		}
	})
}

// An input_required task: its elicitation reaches the SDK's handler as a
// server-to-client request on the tasks/result stream; the answer is routed
// back to the task, which completes.
func TestLegacyClientElicitation(t *testing.T) {
	t.Parallel()
	eachBroker(t, func(t *testing.T, broker string) {
		mcpURL, _ := officialSystem(t, broker, conformanceWorker)

		s := runLegacyClient(t, mcpURL, "elicit", "report.pdf")
		wantElicited(t, s.clientSummary, "Deleted report.pdf")
		if !strings.HasPrefix(s.InputID, "mcpq-input:"+s.TaskID+":") {
			t.Fatalf("input request id %q", s.InputID)
		}
	})
}

// tasks/list shows a session its own tasks, and only those.
func TestLegacyClientListTasks(t *testing.T) {
	t.Parallel()
	eachBroker(t, func(t *testing.T, broker string) {
		mcpURL, _ := officialSystem(t, broker, demoWorker)

		s := runLegacyClient(t, mcpURL, "list", "wait", `{"ms":300}`)
		if len(s.TaskIDs) != 2 || s.SessionA == "" || s.SessionB == "" || s.SessionA == s.SessionB {
			t.Fatalf("summary %+v", s)
		}
		for _, id := range s.TaskIDs {
			if !slices.Contains(s.ListedA, id) || slices.Contains(s.ListedB, id) {
				t.Fatalf("task %s: listed by A %v, by B %v", id, s.ListedA, s.ListedB)
			}
		}
		t.Logf("created %v; session A lists %v; session B lists %v", s.TaskIDs, s.ListedA, s.ListedB)
	})
}

// tasks/cancel stops a running task; the handler sees the cancellation.
func TestLegacyClientCancels(t *testing.T) {
	t.Parallel()
	eachBroker(t, func(t *testing.T, broker string) {
		mcpURL, w := officialSystem(t, broker, demoWorker)

		s := runLegacyClient(t, mcpURL, "cancel", "wait", `{"ms":60000}`)
		wantCancelled(t, s.clientSummary, w)
	})
}

// ---- raw 2025-11-25 HTTP -----------------------------------------------------

// legacyReply is one HTTP exchange: status, headers and the JSON-RPC answer
// carrying the request's id (from a JSON body or an SSE stream).
type legacyReply struct {
	Status int
	Header http.Header
	Body   []byte
	Result json.RawMessage
	Error  *harness.RPCError
}

// legacyPost POSTs one JSON-RPC message (a request when method and id are
// set, a notification without id) with the 2025-11-25 headers.
func legacyPost(t *testing.T, url, session, method string, params any, id any) *legacyReply {
	t.Helper()
	r, err := legacyDo(url, session, method, params, id)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// legacyDo is legacyPost for any goroutine: it returns what goes wrong.
func legacyDo(url, session, method string, params any, id any) (*legacyReply, error) {
	return legacyDoAs("2025-11-25", url, session, method, params, id)
}

// legacyDoAs is legacyDo in a session of protocol version.
func legacyDoAs(version, url, session, method string, params any, id any) (*legacyReply, error) {
	client := &http.Client{Timeout: 3 * time.Minute}
	resp, err := client.Do(legacyRequest(version, url, session, method, params, id))
	if err != nil {
		return nil, fmt.Errorf("POST %s: %w", method, err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("POST %s: reading the body: %w", method, err)
	}
	r := &legacyReply{Status: resp.StatusCode, Header: resp.Header, Body: raw}
	if id == nil || len(raw) == 0 {
		return r, nil
	}
	var msgs [][]byte
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		for _, line := range bytes.Split(raw, []byte("\n")) {
			if d, ok := bytes.CutPrefix(bytes.TrimRight(line, "\r"), []byte("data:")); ok {
				msgs = append(msgs, bytes.TrimSpace(d))
			}
		}
	} else {
		msgs = [][]byte{raw}
	}
	wantID, _ := json.Marshal(id)
	for _, m := range msgs {
		var env struct {
			ID     json.RawMessage   `json:"id"`
			Method string            `json:"method"`
			Result json.RawMessage   `json:"result"`
			Error  *harness.RPCError `json:"error"`
		}
		if json.Unmarshal(m, &env) != nil || env.Method != "" || !bytes.Equal(env.ID, wantID) {
			continue
		}
		r.Result, r.Error = env.Result, env.Error
		if r.Error != nil {
			r.Error.Status = resp.StatusCode
		}
	}
	return r, nil
}

// legacyRequest is the HTTP request legacyDoAs sends.
func legacyRequest(version, url, session, method string, params any, id any) *http.Request {
	msg := map[string]any{"jsonrpc": "2.0", "method": method}
	if params != nil {
		msg["params"] = params
	}
	if id != nil {
		msg["id"] = id
	}
	body, _ := json.Marshal(msg)
	req, _ := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if method != "initialize" {
		req.Header.Set("MCP-Protocol-Version", version)
	}
	if session != "" {
		req.Header.Set("Mcp-Session-Id", session)
	}
	return req
}

// legacySession is a 2025-11-25 session, used on whichever replica a call names.
type legacySession struct {
	t  *testing.T
	id string
	n  int
}

// call sends a request in the session to url and returns the result, failing
// the test on anything but HTTP 200 with a result.
func (s *legacySession) call(url, method string, params any, out any) {
	s.t.Helper()
	r := s.try(url, method, params)
	if r.Status != http.StatusOK || r.Error != nil || r.Result == nil {
		s.t.Fatalf("%s on %s: HTTP %d, error %v, body %s", method, url, r.Status, r.Error, r.Body)
	}
	if out != nil {
		if err := json.Unmarshal(r.Result, out); err != nil {
			s.t.Fatalf("%s on %s: decoding %s: %v", method, url, r.Result, err)
		}
	}
}

func (s *legacySession) try(url, method string, params any) *legacyReply {
	s.t.Helper()
	s.n++
	return legacyPost(s.t, url, s.id, method, params, fmt.Sprintf("req-%d", s.n))
}

var legacyClientCaps = map[string]any{
	"elicitation": map[string]any{},
	"tasks": map[string]any{
		"list": map[string]any{}, "cancel": map[string]any{},
		"requests": map[string]any{"sampling": map[string]any{"createMessage": map[string]any{}}, "elicitation": map[string]any{"create": map[string]any{}}},
	},
}

// initializeLegacy opens a session on url: initialize, then notifications/initialized.
func initializeLegacy(t *testing.T, url, name string) *legacySession {
	t.Helper()
	r := legacyPost(t, url, "", "initialize", map[string]any{
		"protocolVersion": "2025-11-25", "capabilities": legacyClientCaps,
		"clientInfo": map[string]any{"name": name, "version": "0.0.1"},
	}, 0)
	if r.Status != http.StatusOK || r.Error != nil || r.Result == nil {
		t.Fatalf("initialize on %s: HTTP %d, error %v, body %s", url, r.Status, r.Error, r.Body)
	}
	id := r.Header.Get("Mcp-Session-Id")
	if id == "" {
		t.Fatalf("initialize on %s: no Mcp-Session-Id header (%v)", url, r.Header)
	}
	var res struct {
		ProtocolVersion string `json:"protocolVersion"`
		Capabilities    struct {
			Tasks *struct {
				List     map[string]any `json:"list"`
				Cancel   map[string]any `json:"cancel"`
				Requests struct {
					Tools struct {
						Call map[string]any `json:"call"`
					} `json:"tools"`
				} `json:"requests"`
			} `json:"tasks"`
		} `json:"capabilities"`
	}
	if err := json.Unmarshal(r.Result, &res); err != nil {
		t.Fatalf("initialize result %s: %v", r.Result, err)
	}
	if tk := res.Capabilities.Tasks; res.ProtocolVersion != "2025-11-25" || tk == nil || tk.List == nil || tk.Cancel == nil || tk.Requests.Tools.Call == nil {
		t.Fatalf("initialize result %s: want protocolVersion 2025-11-25 and tasks {list, cancel, requests.tools.call}", r.Result)
	}
	n := legacyPost(t, url, id, "notifications/initialized", nil, nil)
	if n.Status != http.StatusAccepted {
		t.Fatalf("notifications/initialized: HTTP %d %s, want 202", n.Status, n.Body)
	}
	return &legacySession{t: t, id: id}
}

// legacyTaskView is the 2025-11-25 Task.
type legacyTaskView struct {
	TaskID        string `json:"taskId"`
	Status        string `json:"status"`
	StatusMessage string `json:"statusMessage"`
	TTL           *int64 `json:"ttl"`
	CreatedAt     string `json:"createdAt"`
	LastUpdatedAt string `json:"lastUpdatedAt"`
	PollInterval  int64  `json:"pollInterval"`
}

func (s *legacySession) listAll(url string) []legacyTaskView {
	s.t.Helper()
	var all []legacyTaskView
	params := map[string]any{}
	for range 100 {
		var page struct {
			Tasks      []legacyTaskView `json:"tasks"`
			NextCursor *string          `json:"nextCursor"`
		}
		s.call(url, "tasks/list", params, &page)
		if page.Tasks == nil {
			s.t.Fatalf("tasks/list on %s: no tasks array", url)
		}
		all = append(all, page.Tasks...)
		if page.NextCursor == nil {
			return all
		}
		params = map[string]any{"cursor": *page.NextCursor}
	}
	s.t.Fatalf("tasks/list on %s did not end after 100 pages", url)
	return nil
}

func taskIDs(ts []legacyTaskView) []string {
	ids := make([]string, len(ts))
	for i, t := range ts {
		ids[i] = t.TaskID
	}
	return ids
}

// A session opened on one api replica is served by another: both read the
// session (and its tasks) from the store.
func TestSessionAcrossReplicas(t *testing.T) {
	t.Parallel()
	eachBroker(t, func(t *testing.T, broker string) {
		b := harness.Build(t)
		prefix := harness.Prefix("lg", t.Name())
		be := harness.NewBackend(t, b, broker, prefix)
		key := make([]byte, 32)
		_, _ = rand.Read(key)
		env := []string{"MCPQ_STATE_KEY=" + hex.EncodeToString(key)}
		urlA, _ := harness.APIEnv(t, b, be, prefix, "api-a", env)
		urlB, _ := harness.APIEnv(t, b, be, prefix, "api-b", env)
		w := harness.Worker(t, b.Worker, "worker", be, prefix)

		// Replica A opens the session.
		sess := initializeLegacy(t, urlA, "replica-test")

		// Replica B serves it: tools/list, and a task-augmented tools/call.
		type tool struct {
			Name      string            `json:"name"`
			Execution map[string]string `json:"execution"`
		}
		var tools struct {
			Tools []tool `json:"tools"`
		}
		sess.call(urlB, "tools/list", map[string]any{}, &tools)
		i := slices.IndexFunc(tools.Tools, func(x tool) bool { return x.Name == "wait" })
		if i < 0 || tools.Tools[i].Execution["taskSupport"] != "optional" {
			t.Fatalf("tools/list on B: no wait tool with execution.taskSupport optional: %+v", tools.Tools)
		}
		var created struct {
			Task *legacyTaskView `json:"task"`
		}
		sess.call(urlB, "tools/call", map[string]any{"name": "wait", "arguments": map[string]any{"ms": 60000}, "task": map[string]any{"ttl": 60000}}, &created)
		if created.Task == nil || created.Task.TaskID == "" || created.Task.Status != "working" || created.Task.TTL == nil || *created.Task.TTL != 60000 || created.Task.CreatedAt == "" {
			t.Fatalf("tools/call on B: want {task:{taskId, status working, ttl 60000, createdAt}}, got %+v", created.Task)
		}
		id := created.Task.TaskID

		// Replica A reads it (until the handler runs), lists it and cancels it.
		var got legacyTaskView
		harness.Eventually(t, 20*time.Second, func() (bool, string) {
			sess.call(urlA, "tasks/get", map[string]any{"taskId": id}, &got)
			if got.TaskID != id || got.Status != "working" {
				t.Fatalf("tasks/get on A: %+v, want task %s working", got, id)
			}
			return strings.Contains(got.StatusMessage, "waiting"), "statusMessage " + got.StatusMessage
		})
		if listed := taskIDs(sess.listAll(urlA)); !slices.Contains(listed, id) {
			t.Fatalf("tasks/list on A: %v lacks %s", listed, id)
		}
		var cancelled legacyTaskView
		sess.call(urlA, "tasks/cancel", map[string]any{"taskId": id}, &cancelled)
		if cancelled.TaskID != id || cancelled.Status != "cancelled" {
			t.Fatalf("tasks/cancel on A: %+v, want task %s cancelled", cancelled, id)
		}
		sess.call(urlB, "tasks/get", map[string]any{"taskId": id}, &got)
		if got.Status != "cancelled" {
			t.Fatalf("tasks/get on B after the cancel on A: %+v", got)
		}
		if r := sess.try(urlB, "tasks/cancel", map[string]any{"taskId": id}); r.Status != http.StatusOK || r.Error == nil || r.Error.Code != -32602 {
			t.Fatalf("second tasks/cancel on B: HTTP %d, error %v, body %s; want HTTP 200 with -32602", r.Status, r.Error, r.Body)
		}
		w.WaitLine(t, 10*time.Second, id, "handler observed cancellation")

		// Another session (opened on B) neither lists nor reads the task.
		other := initializeLegacy(t, urlB, "replica-test-other")
		if listed := taskIDs(other.listAll(urlA)); slices.Contains(listed, id) {
			t.Fatalf("another session lists %s: %v", id, listed)
		}
		if r := other.try(urlA, "tasks/get", map[string]any{"taskId": id}); r.Error == nil || r.Error.Code != -32602 {
			t.Fatalf("another session's tasks/get of %s: HTTP %d, error %v, body %s; want -32602", id, r.Status, r.Error, r.Body)
		}

		// A session id unknown to both replicas: HTTP 404; no session id: 400.
		for _, u := range []string{urlA, urlB} {
			bogus := &legacySession{t: t, id: "no-such-session-" + hex.EncodeToString(key[:8])}
			if r := bogus.try(u, "tools/list", map[string]any{}); r.Status != http.StatusNotFound {
				t.Fatalf("unknown session on %s: HTTP %d %s, want 404", u, r.Status, r.Body)
			}
			if r := legacyPost(t, u, "", "tools/list", map[string]any{}, "no-session"); r.Status != http.StatusBadRequest {
				t.Fatalf("tools/list without Mcp-Session-Id on %s: HTTP %d %s, want 400", u, r.Status, r.Body)
			}
		}

		// Ending the session on B ends it on A too.
		req, _ := http.NewRequest(http.MethodDelete, urlB, nil)
		req.Header.Set("Mcp-Session-Id", sess.id)
		req.Header.Set("MCP-Protocol-Version", "2025-11-25")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("DELETE on B: %v", err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK && resp.StatusCode != http.StatusNoContent {
			t.Fatalf("DELETE on B: HTTP %d", resp.StatusCode)
		}
		if r := sess.try(urlA, "tools/list", map[string]any{}); r.Status != http.StatusNotFound {
			t.Fatalf("tools/list on A after DELETE on B: HTTP %d %s, want 404", r.Status, r.Body)
		}
	})
}
