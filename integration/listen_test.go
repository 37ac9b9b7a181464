package integration

// Push notifications against real api and worker processes:
// subscriptions/listen with notifications/tasks (issue 9), and resources
// served by workers: a 2025-11-25 session subscribes to resources
// (resources/subscribe on one api replica), opens its GET stream (on the
// other), and a worker's report that a resource changed
// (Call.ResourceUpdated in the conformance fixture test_touch_resource)
// reaches exactly the sessions subscribed to it.

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/mcpqueue/mcpqueue/integration/harness"
)

// Acceptance 5: the official 2026-07-28 client (@modelcontextprotocol/client's
// listen() with the ext-tasks session) receives notifications/tasks for a
// task it subscribed to, and the server ends the subscription gracefully
// once the task has ended.
func TestOfficialClientReceivesTaskNotifications(t *testing.T) {
	t.Parallel()
	eachBroker(t, func(t *testing.T, broker string) {
		mcpURL, _ := officialSystem(t, broker, demoWorker)
		var s struct {
			clientSummary
			Notifications int `json:"notifications"`
		}
		runNodeClient(t, "ext-tasks.mjs", mcpURL, "listen", []string{"wait", `{"ms":1500}`, "waited 1500 ms"}, &s)
		if s.Status != "completed" || s.Notifications == 0 || s.Statuses[len(s.Statuses)-1] != "completed" {
			t.Fatalf("summary %+v", s)
		}
		if tk := taskFromGo(t, mcpURL, s.TaskID); tk.Status != "completed" {
			t.Fatalf("tasks/get from Go: %+v", tk)
		}
	})
}

// A listen stream on one api replica sees what happens through another:
// the task is started and cancelled through replica B, the stream is open
// on replica A, and the worker's writes reach A too.
func TestListenAcrossReplicas(t *testing.T) {
	t.Parallel()
	onBrokers(t, func(t *testing.T, s *system) {
		s.worker(t, "worker")
		other, bp := harness.API(t, s.bins, s.be, s.prefix) // replica B; s.mcpURL is A
		b := harness.NewClient(other, true)
		id := b.StartTask(t, "wait", map[string]any{"ms": 60000})
		b.WaitStatus(t, id, 20*time.Second, "working")

		events := listenRaw(t, s.mcpURL, id)
		if m := <-events; m.Method != "notifications/subscriptions/acknowledged" {
			t.Fatalf("first message on A: %+v", m)
		}
		// The handler's progress message comes from the worker's write.
		waitNotification(t, events, id, func(st, msg string) bool { return st == "working" && strings.Contains(msg, "waiting") })

		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := b.Call(ctx, "tasks/cancel", map[string]any{"taskId": id}, nil); err != nil {
			t.Fatalf("tasks/cancel through B: %v", err)
		}
		waitNotification(t, events, id, func(st, _ string) bool { return st == "cancelled" })
		m, ok := <-events
		if !ok || string(m.ID) != `"across"` || m.Result == nil {
			t.Fatalf("after the task ended, want A's listen result, got %+v (open %v)", m, ok)
		}
		if _, ok := <-events; ok {
			t.Fatal("A's stream went on after the listen result")
		}

		// A replica shutting down ends its open streams with the listen
		// result (the client knows to listen elsewhere), without holding
		// the shutdown.
		id = harness.NewClient(s.mcpURL, true).StartTask(t, "wait", map[string]any{"ms": 60000})
		events = listenRaw(t, other, id)
		if m := <-events; m.Method != "notifications/subscriptions/acknowledged" {
			t.Fatalf("first message on B: %+v", m)
		}
		waitNotification(t, events, id, func(st, _ string) bool { return st == "working" })
		stopped := time.Now()
		if err := bp.Stop(20 * time.Second); err != nil {
			t.Fatalf("stopping B: %v", err)
		}
		m, ok = <-events
		for ok && m.Method == "notifications/tasks" { // progress written meanwhile
			m, ok = <-events
		}
		if !ok || string(m.ID) != `"across"` || m.Result == nil {
			t.Fatalf("B shutting down: want its listen result, got %+v (open %v)", m, ok)
		}
		t.Logf("B stopped in %s with a stream open", time.Since(stopped).Round(time.Millisecond))
	})
}

type listenMsg struct {
	Method string          `json:"method"`
	ID     json.RawMessage `json:"id"`
	Params json.RawMessage `json:"params"`
	Result json.RawMessage `json:"result"`
}

// listenRaw opens subscriptions/listen (request id "across") for task id on
// mcpURL and returns its messages; the channel closes with the stream.
func listenRaw(t *testing.T, mcpURL, id string) <-chan listenMsg {
	t.Helper()
	caps := map[string]any{"extensions": map[string]any{"io.modelcontextprotocol/tasks": map[string]any{}}}
	req := modernPost(t, mcpURL, "across", "subscriptions/listen", map[string]any{"notifications": map[string]any{"taskIds": []string{id}}}, caps)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		var b bytes.Buffer
		_, _ = b.ReadFrom(resp.Body)
		resp.Body.Close()
		t.Fatalf("subscriptions/listen: HTTP %d %s", resp.StatusCode, b.String())
	}
	return sseMessages(resp, 64)
}

// sseMessages decodes the data lines of resp's event stream into messages
// (one that does not decode as the zero message) on a channel of n, closed,
// and the body with it, when the stream ends.
func sseMessages(resp *http.Response, n int) <-chan listenMsg {
	out := make(chan listenMsg, n)
	go func() {
		defer close(out)
		defer resp.Body.Close()
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			if d, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
				var m listenMsg
				_ = json.Unmarshal([]byte(d), &m)
				out <- m
			}
		}
	}()
	return out
}

// modernPost builds a 2026-07-28 request (no Mcp-Name: for methods without
// one) declaring the client capabilities caps.
func modernPost(t *testing.T, mcpURL string, id any, method string, params, caps map[string]any) *http.Request {
	t.Helper()
	p := map[string]any{"_meta": map[string]any{
		"io.modelcontextprotocol/protocolVersion":    "2026-07-28",
		"io.modelcontextprotocol/clientCapabilities": caps,
	}}
	for k, v := range params {
		p[k] = v
	}
	body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": id, "method": method, "params": p})
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, mcpURL, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("MCP-Protocol-Version", "2026-07-28")
	req.Header.Set("Mcp-Method", method)
	return req
}

// waitNotification reads notifications/tasks for id until one satisfies
// cond (with the status and status message).
func waitNotification(t *testing.T, events <-chan listenMsg, id string, cond func(status, message string) bool) {
	t.Helper()
	timeout := time.After(30 * time.Second)
	for {
		select {
		case m, ok := <-events:
			if !ok {
				t.Fatal("the listen stream ended early")
			}
			var p struct {
				TaskID        string `json:"taskId"`
				Status        string `json:"status"`
				StatusMessage string `json:"statusMessage"`
			}
			if m.Method != "notifications/tasks" || json.Unmarshal(m.Params, &p) != nil || p.TaskID != id {
				t.Fatalf("unexpected message %+v", m)
			}
			if cond(p.Status, p.StatusMessage) {
				return
			}
		case <-timeout:
			t.Fatal("no matching notifications/tasks within 30s")
		}
	}
}

// sessionStream is an open GET stream of a 2025-11-25 session: the
// notifications it carries arrive on events.
type sessionStream struct {
	events <-chan listenMsg
}

func openSessionStream(t *testing.T, url, session string) *sessionStream {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set("Mcp-Session-Id", session)
	req.Header.Set("MCP-Protocol-Version", "2025-11-25")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("GET stream: %v", err)
	}
	if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		resp.Body.Close()
		t.Fatalf("GET stream: HTTP %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	return &sessionStream{events: sseMessages(resp, 16)}
}

// next returns the stream's next notification as "method uri" (the uri
// of its params), failing after 20 s.
func (s *sessionStream) next(t *testing.T, what string) string {
	t.Helper()
	select {
	case m, ok := <-s.events:
		if !ok {
			t.Fatalf("%s: the stream ended", what)
		}
		var p struct {
			URI string `json:"uri"`
		}
		_ = json.Unmarshal(m.Params, &p)
		return m.Method + " " + p.URI
	case <-time.After(20 * time.Second):
		t.Fatalf("%s: no notification within 20s", what)
		return ""
	}
}

func TestResourceSubscriptions(t *testing.T) {
	t.Parallel()
	onBrokers(t, func(t *testing.T, s *system) {
		s.conformanceWorker(t, "conformance-worker", "--concurrency", "64")
		urlA := s.mcpURL
		urlB, _ := harness.APIEnv(t, s.bins, s.be, s.prefix, "api-2", nil) // subscriptions live in the store

		a := initializeLegacy(t, urlA, "subscriber-a")
		b := initializeLegacy(t, urlA, "subscriber-b")
		c := initializeLegacy(t, urlA, "toucher") // its calls make the worker report changes
		var read struct {
			Contents []struct{ URI, Text string } `json:"contents"`
		}
		a.call(urlB, "resources/read", map[string]any{"uri": "test://watched-resource"}, &read)
		if len(read.Contents) != 1 || read.Contents[0].Text != "Watched resource content" {
			t.Fatalf("resources/read: %+v", read)
		}
		a.call(urlA, "resources/subscribe", map[string]any{"uri": "test://watched-resource"}, nil)
		a.call(urlA, "resources/subscribe", map[string]any{"uri": "test://static-text"}, nil)
		b.call(urlA, "resources/subscribe", map[string]any{"uri": "test://static-text"}, nil)
		if r := b.try(urlA, "resources/subscribe", map[string]any{"uri": "test://nowhere"}); r.Error == nil || r.Error.Code != -32602 {
			t.Fatalf("subscribing to an unknown resource: %+v", r)
		}
		streamA := openSessionStream(t, urlB, a.id) // on the replica that did not take the subscriptions
		streamB := openSessionStream(t, urlB, b.id)

		touch := func(uri string) {
			t.Helper()
			var res json.RawMessage
			c.call(urlA, "tools/call", map[string]any{"name": "test_touch_resource", "arguments": map[string]any{"uri": uri}}, &res)
		}
		// The stream subscribes to the bus before it answers; a touch made
		// once both answered reaches them.
		touch("test://watched-resource")
		if e := streamA.next(t, "A after touching watched-resource"); e != "notifications/resources/updated test://watched-resource" {
			t.Fatalf("A got %q", e)
		}
		touch("test://static-text")
		for name, st := range map[string]*sessionStream{"A": streamA, "B": streamB} {
			// B is not subscribed to watched-resource: its first
			// notification is static-text's.
			if e := st.next(t, name+" after touching static-text"); e != "notifications/resources/updated test://static-text" {
				t.Fatalf("%s got %q, want static-text's update", name, e)
			}
		}

		a.call(urlB, "resources/unsubscribe", map[string]any{"uri": "test://watched-resource"}, nil)
		touch("test://watched-resource") // A no longer hears this one…
		touch("test://static-text")      // …so this is its next
		if e := streamA.next(t, "A after unsubscribing"); e != "notifications/resources/updated test://static-text" {
			t.Fatalf("A got %q after unsubscribing from watched-resource", e)
		}

		// A deleted session's stream ends.
		req, _ := http.NewRequest(http.MethodDelete, urlA, nil)
		req.Header.Set("Mcp-Session-Id", b.id)
		if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("DELETE session: %v %v", resp, err)
		}
		touch("test://static-text")
		deadline := time.After(30 * time.Second)
		for {
			select {
			case _, ok := <-streamB.events:
				if !ok {
					return
				}
			case <-deadline:
				t.Fatal("the deleted session's stream is still open")
			}
		}
	})
}
