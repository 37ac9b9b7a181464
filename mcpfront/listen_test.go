package mcpfront_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/mcpqueue/mcpqueue/mcpfront"
)

const subscriptionKey = "io.modelcontextprotocol/subscriptionId"

// sseMsg is one event of a listen stream: a JSON-RPC message, or a comment
// (keep-alive) line.
type sseMsg struct {
	comment bool
	Method  string          `json:"method"`
	ID      json.RawMessage `json:"id"`
	Params  json.RawMessage `json:"params"`
	Result  json.RawMessage `json:"result"`
	Error   *rpcError       `json:"error"`
}

// listenStream is an open subscriptions/listen response.
type listenStream struct {
	msgs   chan sseMsg // closed at the end of the stream
	cancel context.CancelFunc
}

// listen opens subscriptions/listen with the given notifications filter as
// who ("" = anonymous). An answer that is not an event stream is returned
// as the reply instead.
func (e *env) listen(t *testing.T, who string, id any, filter any, ext bool) (*listenStream, reply) {
	t.Helper()
	m, h := newRequest("subscriptions/listen", id, map[string]any{"notifications": filter}, ext)
	if who != "" {
		h.Set("Authorization", "Bearer "+who)
	}
	body, _ := json.Marshal(m)
	ctx, cancel := context.WithCancel(t.Context())
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, e.url, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header = h
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		cancel()
		t.Fatalf("subscriptions/listen: %v", err)
	}
	if !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		defer cancel()
		r, err := readReply(resp)
		if err != nil {
			t.Fatal(err)
		}
		return nil, r
	}
	s := &listenStream{msgs: make(chan sseMsg, 64), cancel: cancel}
	t.Cleanup(cancel)
	go func() {
		defer close(s.msgs)
		defer resp.Body.Close()
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			line := sc.Text()
			var m sseMsg
			switch {
			case strings.HasPrefix(line, ":"):
				m.comment = true
			case strings.HasPrefix(line, "data: "):
				if err := json.Unmarshal([]byte(line[len("data: "):]), &m); err != nil {
					m.Method = "unparseable: " + line
				}
			default:
				continue
			}
			select {
			case s.msgs <- m:
			case <-ctx.Done():
				return
			}
		}
	}()
	return s, reply{status: resp.StatusCode, header: resp.Header}
}

// next returns the stream's next JSON-RPC message, skipping keep-alives;
// ok is false at the end of the stream.
func (s *listenStream) next(t *testing.T) (sseMsg, bool) {
	t.Helper()
	timeout := time.After(15 * time.Second)
	for {
		select {
		case m, ok := <-s.msgs:
			if !ok {
				return sseMsg{}, false
			}
			if !m.comment {
				return m, true
			}
		case <-timeout:
			t.Fatal("no message on the listen stream within 15s")
		}
	}
}

func (s *listenStream) mustNext(t *testing.T, what string) sseMsg {
	t.Helper()
	m, ok := s.next(t)
	if !ok {
		t.Fatalf("the listen stream ended; want %s", what)
	}
	return m
}

func subscriptionOf(t *testing.T, raw json.RawMessage) string {
	t.Helper()
	var p struct {
		Meta map[string]json.RawMessage `json:"_meta"`
	}
	_ = json.Unmarshal(raw, &p)
	return string(p.Meta[subscriptionKey])
}

// nextNotification reads the next message, which must be a notification
// of method on subscription sub.
func (s *listenStream) nextNotification(t *testing.T, method, sub string) sseMsg {
	t.Helper()
	m := s.mustNext(t, method)
	if m.Method != method || m.ID != nil {
		t.Fatalf("want %s, got %+v", method, m)
	}
	if got := subscriptionOf(t, m.Params); got != sub {
		t.Errorf("%s: subscriptionId %s, want %s", method, got, sub)
	}
	return m
}

// expectAck checks the first message: the acknowledgement of the listen
// request sub, honoring exactly the task ids.
func (s *listenStream) expectAck(t *testing.T, sub string, taskIDs ...string) {
	t.Helper()
	m := s.nextNotification(t, "notifications/subscriptions/acknowledged", sub)
	var p struct {
		Notifications map[string][]string `json:"notifications"`
	}
	if err := json.Unmarshal(m.Params, &p); err != nil {
		t.Fatalf("acknowledgement params: %v (%s)", err, m.Params)
	}
	if strings.Join(p.Notifications["taskIds"], ",") != strings.Join(taskIDs, ",") || len(p.Notifications) > 1 {
		t.Errorf("acknowledged %v, want taskIds %v only", p.Notifications, taskIDs)
	}
}

// nextTask reads a notifications/tasks message of subscription sub and
// returns its params.
func (s *listenStream) nextTask(t *testing.T, sub string) map[string]json.RawMessage {
	t.Helper()
	m := s.nextNotification(t, "notifications/tasks", sub)
	var p map[string]json.RawMessage
	if err := json.Unmarshal(m.Params, &p); err != nil {
		t.Fatalf("notification params: %v", err)
	}
	if p["resultType"] != nil || p["createdAt"] == nil || p["lastUpdatedAt"] == nil || p["pollIntervalMs"] == nil {
		t.Errorf("notification is not a DetailedTask: %s", m.Params)
	}
	return p
}

// expectEnd checks the graceful end: the listen request's own result with
// the subscription id, then the end of the stream.
func (s *listenStream) expectEnd(t *testing.T, sub string) {
	t.Helper()
	m := s.mustNext(t, "the subscriptions/listen result")
	if string(m.ID) != sub || m.Result == nil || m.Error != nil {
		t.Fatalf("want the listen result for %s, got %+v", sub, m)
	}
	var res map[string]json.RawMessage
	_ = json.Unmarshal(m.Result, &res)
	if str(res["resultType"]) != "complete" || subscriptionOf(t, m.Result) != sub {
		t.Errorf("listen result %s: want resultType complete and subscriptionId %s", m.Result, sub)
	}
	if m, ok := s.next(t); ok {
		t.Fatalf("message after the listen result: %+v", m)
	}
}

// startAs starts a task of tool as who.
func (e *env) startAs(t *testing.T, who, tool string) string {
	t.Helper()
	m, h := newRequest("tools/call", "start", map[string]any{"name": tool, "arguments": map[string]any{}}, true)
	h.Set("Authorization", "Bearer "+who)
	body, _ := json.Marshal(m)
	r := e.send(t, h, body, sendOpts{})
	var res map[string]json.RawMessage
	_ = json.Unmarshal(r.result, &res)
	if str(res["resultType"]) != "task" {
		t.Fatalf("starting %s as %s: %s", tool, who, r)
	}
	return str(res["taskId"])
}

// A task through working → input_required → (working →) completed: every
// status the client can see arrives in order, each notification is the
// DetailedTask tasks/get would answer, and the stream ends gracefully once
// the task has ended.
func TestListenFollowsTaskToCompletion(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	id := e.startTask(t, "ask", map[string]any{})
	s, r := e.listen(t, "", "sub-1", map[string]any{"taskIds": []string{id, id}}, true)
	if s == nil {
		t.Fatalf("listen: want an event stream, got %s", r)
	}
	if r.header.Get("X-Accel-Buffering") != "no" {
		t.Errorf("X-Accel-Buffering %q, want no", r.header.Get("X-Accel-Buffering"))
	}
	s.expectAck(t, `"sub-1"`, id) // duplicates collapse

	var statuses []string
	for {
		n := s.nextTask(t, `"sub-1"`)
		if str(n["taskId"]) != id {
			t.Fatalf("notification for task %s, want %s", n["taskId"], id)
		}
		status := str(n["status"])
		statuses = append(statuses, status)
		if status == "input_required" {
			var reqs map[string]json.RawMessage
			if err := json.Unmarshal(n["inputRequests"], &reqs); err != nil || len(reqs) != 1 {
				t.Fatalf("input_required notification without its input request: %s", n["inputRequests"])
			}
			for key := range reqs {
				e.call(t, "tasks/update", map[string]any{"taskId": id, "inputResponses": map[string]any{
					key: map[string]any{"action": "accept", "content": map[string]any{"confirm": true}},
				}}, true)
			}
		}
		if status == "completed" {
			if got := resultText(t, n["result"]); got != "action=accept confirm=true" {
				t.Errorf("completed notification result %q", got)
			}
			if got := e.getTask(t, id); string(got["result"]) != string(n["result"]) || str(got["status"]) != "completed" {
				t.Errorf("notification %v differs from tasks/get %v", n, got)
			}
			break
		}
	}
	// working may be seen before the input request and after the answer; a
	// version superseded before it is delivered may be skipped, never reordered.
	if seq := strings.Join(statuses, " "); !regexp.MustCompile(`^(working )?input_required (working )?completed$`).MatchString(seq) {
		t.Fatalf("statuses in order: %s", seq)
	}
	s.expectEnd(t, `"sub-1"`)
}

// One subscription, several tasks: it lasts until the last one ends. A task
// already over is reported once, as it ended.
func TestListenEndsWhenEveryTaskEnded(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	done := e.startTask(t, "echo", map[string]any{"text": "hi"})
	e.waitStatus(t, done, "completed")
	blocked := e.startTask(t, "block", map[string]any{})
	e.waitStatus(t, blocked, "working")

	s, r := e.listen(t, "", 7, map[string]any{"taskIds": []string{done, blocked}}, true)
	if s == nil {
		t.Fatalf("listen: %s", r)
	}
	s.expectAck(t, "7", done, blocked)
	seen := map[string]string{}
	for range 2 {
		n := s.nextTask(t, "7")
		seen[str(n["taskId"])] = str(n["status"])
	}
	if seen[done] != "completed" || seen[blocked] != "working" {
		t.Fatalf("first notifications: %v", seen)
	}
	e.call(t, "tasks/cancel", map[string]any{"taskId": blocked}, true)
	if n := s.nextTask(t, "7"); str(n["taskId"]) != blocked || str(n["status"]) != "cancelled" {
		t.Fatalf("after cancel: %v", n)
	}
	s.expectEnd(t, "7")
}

// Another principal's task and an unknown one get the same error; nothing
// is subscribed.
func TestListenOwnership(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(c *mcpfront.Config) { c.Auth = headerAuth{} })
	id := e.startAs(t, "alice", "block")
	const unknown = "ZZZZZZZZZZZZZZZZZZZZZZZZZZ"
	refusal := func(who, task string) string {
		t.Helper()
		s, r := e.listen(t, who, "x", map[string]any{"taskIds": []string{task}}, true)
		if s != nil {
			t.Fatalf("%q listening to %s: got a stream", who, task)
		}
		if r.err == nil || r.err.Code != -32602 {
			t.Fatalf("%q listening to %s: want -32602, got %s", who, task, r)
		}
		return strings.ReplaceAll(r.String(), task, "ID")
	}
	foreign, anonymous, missing := refusal("bob", id), refusal("", id), refusal("bob", unknown)
	if foreign != missing || anonymous != missing {
		t.Errorf("a foreign task answers differently from an unknown one:\n%s\n%s\n%s", foreign, anonymous, missing)
	}
	if !strings.Contains(missing, "Task not found: ID") {
		t.Errorf("refusal %s does not say the task was not found", missing)
	}
	// The owner may.
	s, r := e.listen(t, "alice", "mine", map[string]any{"taskIds": []string{id}}, true)
	if s == nil {
		t.Fatalf("owner listening: %s", r)
	}
	s.expectAck(t, `"mine"`, id)
	if n := s.nextTask(t, `"mine"`); str(n["status"]) != "working" {
		t.Fatalf("owner's first notification: %v", n)
	}
}

func TestListenBadParams(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(c *mcpfront.Config) { c.MaxListenTasks = 2 })
	id := e.startTask(t, "block", map[string]any{})
	cases := []struct {
		name   string
		filter any
		ext    bool
		code   int
		status int
		says   string
	}{
		{"no filter", nil, true, -32602, 200, "missing notifications"},
		{"filter not an object", "tasks", true, -32602, 200, "notifications must be an object"},
		{"taskIds not an array", map[string]any{"taskIds": id}, true, -32602, 200, "taskIds must be an array"},
		{"taskIds of numbers", map[string]any{"taskIds": []int{1}}, true, -32602, 200, "taskIds must be an array"},
		{"empty task id", map[string]any{"taskIds": []string{""}}, true, -32602, 200, "empty task id"},
		{"too many task ids", map[string]any{"taskIds": []string{id, id + "2", id + "3"}}, true, -32602, 200, "at most 2"},
		{"without the extension", map[string]any{"taskIds": []string{id}}, false, -32021, 400, "extension"},
	}
	for _, c := range cases {
		s, r := e.listen(t, "", "bad", c.filter, c.ext)
		if s != nil {
			t.Errorf("%s: got a stream", c.name)
			continue
		}
		if r.err == nil || r.err.Code != c.code || r.status != c.status || !strings.Contains(r.err.Message, c.says) {
			t.Errorf("%s: want HTTP %d, %d saying %q; got %s", c.name, c.status, c.code, c.says, r)
		}
	}

	// A client that does not take an event stream cannot listen.
	m, h := newRequest("subscriptions/listen", "json-only", map[string]any{"notifications": map[string]any{"taskIds": []string{id}}}, true)
	h.Set("Accept", "application/json")
	body, _ := json.Marshal(m)
	if r := e.send(t, h, body, sendOpts{}); r.status != http.StatusNotAcceptable || r.err == nil || r.err.Code != -32600 {
		t.Errorf("Accept without text/event-stream: %s", r)
	}

	// Only task notifications are offered: other types are left out of the
	// acknowledgement, and with nothing to watch the stream ends at once.
	s, r := e.listen(t, "", "lists", map[string]any{"toolsListChanged": true}, false)
	if s == nil {
		t.Fatalf("listen for list changes: %s", r)
	}
	s.expectAck(t, `"lists"`)
	s.expectEnd(t, `"lists"`)
}

// Streams are capped per principal on a replica; a stream whose client
// went away frees its place. Idle streams carry keep-alive comments.
func TestListenStreamCapAndKeepalive(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(c *mcpfront.Config) {
		c.Auth = headerAuth{}
		c.MaxListenStreams = 1
		c.ListenKeepalive = 20 * time.Millisecond
	})
	id, bobs := e.startAs(t, "alice", "block"), e.startAs(t, "bob", "block")
	filter := map[string]any{"taskIds": []string{id}}
	first, r := e.listen(t, "alice", 1, filter, true)
	if first == nil {
		t.Fatalf("first stream: %s", r)
	}
	first.expectAck(t, "1", id)
	first.nextTask(t, "1")
	if m, ok := <-first.msgs; ok && !m.comment { // idle: keep-alives only
		t.Fatalf("idle stream carried %+v", m)
	}

	if s, r := e.listen(t, "alice", 2, filter, true); s != nil || r.err == nil || r.err.Code != -32029 || !strings.Contains(r.err.Message, "at most 1") {
		t.Fatalf("second stream of alice: want -32029, got stream=%v %s", s != nil, r)
	}
	other, r := e.listen(t, "bob", 3, map[string]any{"taskIds": []string{bobs}}, true) // the cap is per principal
	if other == nil {
		t.Fatalf("bob's stream: %s", r)
	}
	other.expectAck(t, "3", bobs)

	first.cancel() // alice goes away
	deadline := time.Now().Add(10 * time.Second)
	for {
		s, r := e.listen(t, "alice", 4, filter, true)
		if s != nil {
			s.expectAck(t, "4", id)
			break
		}
		if r.err == nil || r.err.Code != -32029 || time.Now().After(deadline) {
			t.Fatalf("alice after closing her stream: %s", r)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// EndListens (server shutdown) ends open streams with the listen result and
// refuses new ones.
func TestListenEndsOnShutdown(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	id := e.startTask(t, "block", map[string]any{})
	s, r := e.listen(t, "", "bye", map[string]any{"taskIds": []string{id}}, true)
	if s == nil {
		t.Fatalf("listen: %s", r)
	}
	s.expectAck(t, `"bye"`, id)
	s.nextTask(t, `"bye"`)
	e.handler.(*mcpfront.Server).EndListens()
	s.expectEnd(t, `"bye"`)
	if s, r := e.listen(t, "", "late", map[string]any{"taskIds": []string{id}}, true); s != nil || r.status != http.StatusServiceUnavailable || r.err == nil {
		t.Fatalf("listen after EndListens: %s", r)
	}
	if got := e.getTask(t, id); str(got["status"]) != "working" {
		t.Errorf("ending the stream changed the task: %v", got)
	}
}
