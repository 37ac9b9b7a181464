package mcpfront_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"

	"github.com/mcpqueue/mcpqueue/auth"
	"github.com/mcpqueue/mcpqueue/auth/authtest"
	"github.com/mcpqueue/mcpqueue/auth/jwtauth"
	"github.com/mcpqueue/mcpqueue/broker"
	"github.com/mcpqueue/mcpqueue/broker/natsbroker"
	"github.com/mcpqueue/mcpqueue/consumer"
	"github.com/mcpqueue/mcpqueue/internal/redistest"
	"github.com/mcpqueue/mcpqueue/internal/testenv"
	"github.com/mcpqueue/mcpqueue/mcpfront"
	"github.com/mcpqueue/mcpqueue/taskstate"
	"github.com/mcpqueue/mcpqueue/taskstate/natskv"
)

// ---- the front end with bearer-token authentication ----

const (
	authAudience      = "https://mcp.test/mcp"
	authLegacyVersion = "2025-11-25"
	authProbeIDs      = 10000 // random task ids principal B probes
)

// authEnv is the system under test with bearer-token authentication: an
// embedded NATS, a worker (its own connection, as a separate process would
// have) and the front end with the real Authenticator, trusting a test
// issuer whose JWKS is served on loopback.
type authEnv struct {
	url        string
	handler    http.Handler
	js         jetstream.JetStream
	store      *natskv.Store // the front end's store
	jobsStream string
	front      *testenv.Seams // the front end's connection
	iss        *authtest.Issuer
	hs256Key   []byte // tokens are HS256 with this key, not from iss's JWKS
	auth       *jwtauth.Authenticator
	scopes     []string
	logs       *redistest.SyncBuffer // the front end's log lines, written from many goroutines
	client     *http.Client          // keeps connections alive for the probes
}

// authTools are the worker's tools for these tests.
func authTools() *consumer.Mux {
	mux := consumer.NewMux()
	consumer.Handle(mux, consumer.Tool{Name: "echo"}, echoTool)
	consumer.Handle(mux, consumer.Tool{Name: "whoami"},
		func(ctx context.Context, c *consumer.Call[none]) (*consumer.Result, error) {
			return consumer.TextResult(c.Owner()), nil
		})
	consumer.Handle(mux, consumer.Tool{Name: "ask"}, askTool)
	consumer.Handle(mux, consumer.Tool{Name: "block"}, blockTool)
	return mux
}

// newAuthEnv starts the system trusting the issuer's JWKS (ES256), or with
// a static HS256 key when hs256Key is set.
func newAuthEnv(t *testing.T, hs256Key []byte, scopes ...string) *authEnv {
	t.Helper()
	iss := authtest.NewIssuer(t, jwtauth.ES256)
	cfg := &jwtauth.Config{Issuer: iss.URL, Audience: authAudience, JWKSURL: iss.JWKSURL, Scopes: scopes}
	if hs256Key != nil {
		cfg.JWKSURL, cfg.HS256Key = "", hs256Key
	}
	a, err := jwtauth.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	logs := &redistest.SyncBuffer{}
	sys := startSystem(t, authTools(), "auth-test-worker", 8, &mcpfront.Config{
		HandleAfter: 15 * time.Second, StateKey: []byte("test-key"), Auth: a, Logger: zerolog.New(logs), InlineWait: -1,
	})
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 16}, Timeout: 30 * time.Second}
	t.Cleanup(client.CloseIdleConnections)
	return &authEnv{
		url: sys.url, handler: sys.srv, js: sys.front.JS, store: sys.front.Store, jobsStream: sys.nats.Broker.Stream, front: sys.front,
		iss: iss, hs256Key: hs256Key, auth: a, scopes: scopes, logs: logs, client: client,
	}
}

// counts returns how many messages were ever written to the job stream and
// the task bucket: equal counts mean nothing was enqueued or written.
func (ae *authEnv) counts(t *testing.T) (jobs, records uint64) { return ae.front.Counts(t) }

// token is a valid access token for sub.
func (ae *authEnv) token(t *testing.T, sub string) string {
	t.Helper()
	claims := ae.iss.Claims(sub, authAudience, ae.scopes...)
	if ae.hs256Key != nil {
		return authtest.HS256(t, ae.hs256Key, claims)
	}
	return ae.iss.Mint(t, claims)
}

func (ae *authEnv) owner(sub string) string {
	return auth.Principal{Issuer: ae.iss.URL, Subject: sub}.Owner()
}

// post sends body with headers h (plus the bearer token, when not empty).
func (ae *authEnv) post(t testing.TB, token string, h http.Header, body []byte) (reply, error) {
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, ae.url, bytes.NewReader(body))
	if err != nil {
		return reply{}, err
	}
	req.Header = h.Clone()
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := ae.client.Do(req)
	if err != nil {
		return reply{}, err
	}
	return readReply(resp)
}

// modern sends a 2026-07-28 request declaring the tasks extension.
func (ae *authEnv) modern(t testing.TB, token, method string, params map[string]any) (reply, error) {
	m, h := newRequest(method, "probe", params, true)
	body, _ := json.Marshal(m)
	return ae.post(t, token, h, body)
}

func authLegacyHeaders(session string) http.Header {
	h := http.Header{}
	h.Set("Content-Type", "application/json")
	h.Set("Accept", "application/json, text/event-stream")
	h.Set("MCP-Protocol-Version", authLegacyVersion)
	if session != "" {
		h.Set("Mcp-Session-Id", session)
	}
	return h
}

// legacy sends a 2025-11-25 request in a session.
func (ae *authEnv) legacy(t testing.TB, token, session, method string, params map[string]any) (reply, error) {
	body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": "probe", "method": method, "params": params})
	return ae.post(t, token, authLegacyHeaders(session), body)
}

// initialize opens a 2025-11-25 session for token's principal.
func (ae *authEnv) initialize(t *testing.T, token string) string {
	t.Helper()
	body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": map[string]any{
		"protocolVersion": authLegacyVersion, "capabilities": map[string]any{"elicitation": map[string]any{}},
		"clientInfo": map[string]any{"name": "auth-test", "version": "1"},
	}})
	h := authLegacyHeaders("")
	h.Del("MCP-Protocol-Version")
	r, err := ae.post(t, token, h, body)
	if err != nil || r.status != 200 || r.header.Get("Mcp-Session-Id") == "" {
		t.Fatalf("initialize: %v %s", err, r)
	}
	return r.header.Get("Mcp-Session-Id")
}

// authResult fails the test unless r is a JSON-RPC result; it returns its fields.
func authResult(t *testing.T, what string, r reply, err error) map[string]json.RawMessage {
	t.Helper()
	if err != nil || r.status != 200 || r.err != nil || r.result == nil {
		t.Fatalf("%s: want a result, got %v %s", what, err, r)
	}
	var out map[string]json.RawMessage
	if err := json.Unmarshal(r.result, &out); err != nil {
		t.Fatalf("%s: result is not an object: %s", what, r.result)
	}
	return out
}

func (ae *authEnv) mustModern(t *testing.T, what, token, method string, params map[string]any) map[string]json.RawMessage {
	t.Helper()
	r, err := ae.modern(t, token, method, params)
	return authResult(t, what, r, err)
}

func (ae *authEnv) mustLegacy(t *testing.T, what, token, session, method string, params map[string]any) map[string]json.RawMessage {
	t.Helper()
	r, err := ae.legacy(t, token, session, method, params)
	return authResult(t, what, r, err)
}

// legacyTaskID is the task id of a 2025-11-25 CreateTaskResult.
func legacyTaskID(res map[string]json.RawMessage) string {
	var task struct {
		TaskID string `json:"taskId"`
	}
	_ = json.Unmarshal(res["task"], &task)
	return task.TaskID
}

// waitStored polls the record until cond holds.
func (ae *authEnv) waitStored(t *testing.T, id string, cond func(*taskstate.Task) bool) *taskstate.Task {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		tk, err := ae.store.Get(t.Context(), id)
		if err == nil && cond(tk) {
			return tk
		}
		if time.Now().After(deadline) {
			t.Fatalf("task %s never reached the expected state: %+v %v", id, tk, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// ---- status and challenge of every kind of credentials ----

// TestAuthFrontTokenCases runs the shared token table through the front
// end: the right status and WWW-Authenticate challenge for each, a JSON-RPC
// error body, and nothing enqueued or written for a refused request.
func TestAuthFrontTokenCases(t *testing.T) {
	t.Parallel()
	ae := newAuthEnv(t, nil, "mcp:tools")
	for _, c := range authtest.Cases(t, ae.iss, authAudience, ae.scopes) {
		for _, wire := range []string{"2026-07-28 tools/call", "2025-11-25 initialize"} {
			var h http.Header
			var body []byte
			if strings.HasPrefix(wire, "2026") {
				m, hh := newRequest("tools/call", 7, map[string]any{"name": "echo", "arguments": map[string]any{"text": "hi"}}, true)
				body, _ = json.Marshal(m)
				h = hh
			} else {
				body, _ = json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 7, "method": "initialize", "params": map[string]any{
					"protocolVersion": authLegacyVersion, "capabilities": map[string]any{}, "clientInfo": map[string]any{"name": "t", "version": "1"},
				}})
				h = authLegacyHeaders("")
			}
			req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, ae.url, bytes.NewReader(body))
			if err != nil {
				t.Fatal(err)
			}
			req.Header = h
			c.Apply(req)
			jobs, records := ae.counts(t)
			resp, err := ae.client.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			r, err := readReply(resp)
			if err != nil {
				t.Fatal(err)
			}
			if err := c.Check(r.status, r.header, ae.auth.MetadataURL(), ae.scopes); err != nil {
				t.Errorf("%s, %s: %v (%s)", c.Name, wire, err, r)
				continue
			}
			if c.Status == 200 {
				if r.err != nil || r.result == nil {
					t.Errorf("%s, %s: accepted but %s", c.Name, wire, r)
				}
				// An accepted call may have started a task: let the worker
				// finish writing it before the next case counts writes.
				var res map[string]json.RawMessage
				if json.Unmarshal(r.result, &res) == nil && res["taskId"] != nil {
					ae.waitStored(t, str(res["taskId"]), func(tk *taskstate.Task) bool { return tk.Status.Terminal() })
				}
				continue
			}
			if !r.jsonrpc || r.err == nil || r.err.Code != -32600 || string(r.id) != "null" {
				t.Errorf("%s, %s: want a JSON-RPC error -32600 with a null id, got %s", c.Name, wire, r)
			}
			if j, rec := ae.counts(t); j != jobs || rec != records {
				t.Errorf("%s, %s: a refused request enqueued %d jobs and wrote %d records", c.Name, wire, j-jobs, rec-records)
			}
		}
	}
}

// TestAuthPrincipalOnTaskAndJob: the principal owns the record and rides on
// the job envelope, from either wire.
func TestAuthPrincipalOnTaskAndJob(t *testing.T) {
	t.Parallel()
	ae := newAuthEnv(t, nil)
	alice := ae.token(t, "alice")
	want := ae.owner("alice")

	res := ae.mustModern(t, "tools/call block", alice, "tools/call", map[string]any{"name": "block", "arguments": map[string]any{}})
	modernID := str(res["taskId"])
	session := ae.initialize(t, alice)
	res = ae.mustLegacy(t, "legacy tools/call block", alice, session, "tools/call", map[string]any{"name": "block", "arguments": map[string]any{}, "task": map[string]any{}})
	legacyID := legacyTaskID(res)

	for _, id := range []string{modernID, legacyID} {
		rec := ae.waitStored(t, id, func(tk *taskstate.Task) bool { return tk.Status == taskstate.Working })
		if rec.Owner != want {
			t.Errorf("task %s: record owner %q, want %q", id, rec.Owner, want)
		}
		job := ae.jobOf(t, id)
		if job.Owner != want {
			t.Errorf("task %s: job owner %q, want %q", id, job.Owner, want)
		}
	}
	for _, id := range []string{modernID, legacyID} {
		ae.mustModern(t, "cancel", alice, "tasks/cancel", map[string]any{"taskId": id})
	}

	// The handler sees the principal too.
	res = ae.mustModern(t, "tools/call whoami", alice, "tools/call", map[string]any{"name": "whoami", "arguments": map[string]any{}})
	id := str(res["taskId"])
	ae.waitStored(t, id, func(tk *taskstate.Task) bool { return tk.Status.Terminal() })
	res = ae.mustModern(t, "tasks/get whoami", alice, "tasks/get", map[string]any{"taskId": id})
	if got := resultText(t, res["result"]); got != want {
		t.Errorf("the handler's Owner() is %q, want %q", got, want)
	}
}

// jobOf reads the job of task id from the job stream (the "block" handler
// holds it unacknowledged, so it is still there).
func (ae *authEnv) jobOf(t *testing.T, id string) *broker.Job {
	t.Helper()
	s, info := testenv.Stream(t, ae.js, ae.jobsStream)
	for seq := info.State.FirstSeq; seq <= info.State.LastSeq; seq++ {
		msg, err := s.GetMsg(t.Context(), seq)
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		if j, err := natsbroker.DecodeJob(msg.Data); err == nil && j.TaskID == id {
			return j
		}
	}
	t.Fatalf("no job for task %s in the stream", id)
	return nil
}

// ---- principal B probing principal A's tasks ----

// authProbe is one request B sends about a task id.
type authProbe struct {
	name    string
	request func(id string) (http.Header, []byte)
}

// authAnswer is a reply with the probed id replaced, for byte-wise comparison.
type authAnswer struct {
	status int
	header string
	body   string
}

func normalizeProbe(status int, header http.Header, body []byte, id string) authAnswer {
	h := header.Clone()
	h.Del("Date")
	var hb strings.Builder
	_ = h.Write(&hb)
	return authAnswer{status: status, header: strings.ReplaceAll(hb.String(), id, "<ID>"), body: strings.ReplaceAll(string(body), id, "<ID>")}
}

// TestAuthIsolationProbe: principal B probes A's task ids and 10,000 random
// ids with every task method of both wires. Each answer, byte for byte
// (apart from the id), is the answer an unknown id gets; A's records are
// untouched (same revision); B's tasks/list shows only B's tasks; every
// probe of A's tasks is in the audit log.
func TestAuthIsolationProbe(t *testing.T) {
	t.Parallel()
	// A static key: this test is about isolation, and an HS256 check costs
	// a fraction of an ES256 one under the race detector (signatures have
	// their own tests above and in package jwtauth).
	ae := newAuthEnv(t, []byte("isolation-probe-key-of-32-bytes!"))
	alice, bob := ae.token(t, "alice"), ae.token(t, "bob")

	// A's tasks, one from each wire, both waiting for input.
	res := ae.mustModern(t, "A tools/call ask", alice, "tools/call", map[string]any{"name": "ask", "arguments": map[string]any{}})
	aModern := str(res["taskId"])
	aSession := ae.initialize(t, alice)
	res = ae.mustLegacy(t, "A legacy tools/call ask", alice, aSession, "tools/call", map[string]any{"name": "ask", "arguments": map[string]any{}, "task": map[string]any{"ttl": 600000}})
	aLegacy := legacyTaskID(res)
	before := map[string]*taskstate.Task{}
	var inputKey string
	for _, id := range []string{aModern, aLegacy} {
		before[id] = ae.waitStored(t, id, func(tk *taskstate.Task) bool { return tk.Status == taskstate.InputRequired })
		for k := range before[id].InputRequests {
			inputKey = k
		}
	}
	if inputKey == "" {
		t.Fatal("A's task has no input request")
	}

	// B: a session of its own and one task of its own.
	bSession := ae.initialize(t, bob)
	res = ae.mustLegacy(t, "B legacy tools/call echo", bob, bSession, "tools/call", map[string]any{"name": "echo", "arguments": map[string]any{"text": "b"}, "task": map[string]any{}})
	bTask := legacyTaskID(res)

	answerIt := map[string]any{"action": "accept", "content": map[string]any{"confirm": true}}
	modern := func(method string, params func(id string) map[string]any) func(id string) (http.Header, []byte) {
		return func(id string) (http.Header, []byte) {
			m, h := newRequest(method, "probe", params(id), true)
			body, _ := json.Marshal(m)
			return h, body
		}
	}
	legacy := func(method string) func(id string) (http.Header, []byte) {
		return func(id string) (http.Header, []byte) {
			body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": "probe", "method": method, "params": map[string]any{"taskId": id}})
			return authLegacyHeaders(bSession), body
		}
	}
	probes := []authProbe{
		{"2026-07-28 tasks/get", modern("tasks/get", func(id string) map[string]any { return map[string]any{"taskId": id} })},
		{"2026-07-28 tasks/update", modern("tasks/update", func(id string) map[string]any {
			return map[string]any{"taskId": id, "inputResponses": map[string]any{inputKey: answerIt}}
		})},
		{"2026-07-28 tasks/cancel", modern("tasks/cancel", func(id string) map[string]any { return map[string]any{"taskId": id} })},
		{"2025-11-25 tasks/get", legacy("tasks/get")},
		{"2025-11-25 tasks/result", legacy("tasks/result")},
		{"2025-11-25 tasks/cancel", legacy("tasks/cancel")},
		{"2025-11-25 answer to an input request", func(id string) (http.Header, []byte) {
			body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": "mcpq-input:" + id + ":" + inputKey, "result": answerIt})
			return authLegacyHeaders(bSession), body
		}},
	}
	// Each probe's request is built once around a placeholder id.
	const placeholder = "PLACEHOLDERPLACEHOLDERPLAC"
	type template struct {
		header http.Header
		body   []byte
	}
	templates := make([]template, len(probes))
	for i, p := range probes {
		h, body := p.request(placeholder)
		h.Set("Authorization", "Bearer "+bob)
		templates[i] = template{h, body}
	}
	// send runs probe i over HTTP (a kept-alive connection) or, for the
	// bulk of random ids, straight into the handler.
	send := func(t testing.TB, i int, id string, viaHTTP bool) (authAnswer, error) {
		h := templates[i].header.Clone()
		for k, vs := range h {
			for j, v := range vs {
				h[k][j] = strings.ReplaceAll(v, placeholder, id)
			}
		}
		body := bytes.ReplaceAll(templates[i].body, []byte(placeholder), []byte(id))
		if !viaHTTP {
			req := httptest.NewRequestWithContext(t.Context(), http.MethodPost, "http://127.0.0.1/mcp", bytes.NewReader(body))
			req.Header = h
			rec := httptest.NewRecorder()
			ae.handler.ServeHTTP(rec, req)
			return normalizeProbe(rec.Code, rec.Header(), rec.Body.Bytes(), id), nil
		}
		req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, ae.url, bytes.NewReader(body))
		if err != nil {
			return authAnswer{}, err
		}
		req.Header = h
		resp, err := ae.client.Do(req)
		if err != nil {
			return authAnswer{}, err
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		return normalizeProbe(resp.StatusCode, resp.Header, b, id), err
	}

	// What an unknown id gets, per probe and path.
	unknown := taskstate.NewID()
	want := map[bool][]authAnswer{}
	for _, viaHTTP := range []bool{true, false} {
		for i, p := range probes {
			a, err := send(t, i, unknown, viaHTTP)
			if err != nil {
				t.Fatalf("%s: %v", p.name, err)
			}
			// The probe reached the task lookup (not refused earlier, which
			// would make the comparison below vacuous).
			if !strings.Contains(a.body, `"error"`) || !strings.Contains(a.body, "Task not found") {
				t.Fatalf("%s of an unknown id: want a task-not-found error, got %+v", p.name, a)
			}
			want[viaHTTP] = append(want[viaHTTP], a)
		}
	}
	// A's tasks answer exactly the same, on both paths.
	for _, id := range []string{aModern, aLegacy} {
		for _, viaHTTP := range []bool{true, false} {
			for i, p := range probes {
				got, err := send(t, i, id, viaHTTP)
				if err != nil {
					t.Fatalf("%s: %v", p.name, err)
				}
				if got != want[viaHTTP][i] {
					t.Errorf("%s of A's task %s (HTTP %v) differs from an unknown id's:\n got %+v\nwant %+v", p.name, id, viaHTTP, got, want[viaHTTP][i])
				}
			}
		}
	}

	// 10,000 random ids (1,000 with -short), every probe: a tenth of them
	// over HTTP, the rest straight into the handler (the same answers, less
	// overhead).
	start := time.Now()
	var mismatches atomic.Int64
	var report sync.Once
	ids := make(chan int)
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for n := range ids {
				id, viaHTTP := taskstate.NewID(), n < authProbeIDs/10
				for i, p := range probes {
					got, err := send(t, i, id, viaHTTP)
					if err == nil && got == want[viaHTTP][i] {
						continue
					}
					mismatches.Add(1)
					report.Do(func() {
						t.Errorf("%s of random id %s (HTTP %v): %v\n got %+v\nwant %+v", p.name, id, viaHTTP, err, got, want[viaHTTP][i])
					})
				}
			}
		})
	}
	count := authProbeIDs
	if testing.Short() {
		count = authProbeIDs / 10
	}
	for n := range count {
		ids <- n
	}
	close(ids)
	wg.Wait()
	if n := mismatches.Load(); n > 0 {
		t.Errorf("%d of %d probes of random ids answered differently from an unknown id", n, count*len(probes))
	}
	t.Logf("%d probes of %d random ids in %s", count*len(probes), count, time.Since(start).Round(time.Millisecond))

	// tasks/list: B sees its own task and nothing of A's.
	res = ae.mustLegacy(t, "B tasks/list", bob, bSession, "tasks/list", map[string]any{})
	var list struct {
		Tasks []struct {
			TaskID string `json:"taskId"`
		} `json:"tasks"`
		NextCursor string `json:"nextCursor"`
	}
	_ = json.Unmarshal(mustJSON(res), &list)
	if len(list.Tasks) != 1 || list.Tasks[0].TaskID != bTask || list.NextCursor != "" {
		t.Errorf("B's tasks/list: %s, want only B's task %s", mustJSON(res), bTask)
	}
	// B in A's session is no session at all.
	if r, _ := ae.legacy(t, bob, aSession, "tasks/list", map[string]any{}); r.status != http.StatusNotFound {
		t.Errorf("B's tasks/list in A's session: %s, want 404 session not found", r)
	}

	// A's records are untouched.
	for id, b := range before {
		now, err := ae.store.Get(t.Context(), id)
		if err != nil {
			t.Fatal(err)
		}
		if now.Revision != b.Revision || now.Status != taskstate.InputRequired || len(now.InputResponses) != 0 {
			t.Errorf("A's task %s changed: revision %d → %d, status %s, responses %v", id, b.Revision, now.Revision, now.Status, now.InputResponses)
		}
	}
	// …and still A's: A sees them, and A's list holds both.
	for _, id := range []string{aModern, aLegacy} {
		res := ae.mustModern(t, "A tasks/get", alice, "tasks/get", map[string]any{"taskId": id})
		if str(res["status"]) != "input_required" {
			t.Errorf("A's tasks/get %s: %v", id, res)
		}
	}
	res = ae.mustLegacy(t, "A tasks/list", alice, aSession, "tasks/list", map[string]any{})
	_ = json.Unmarshal(mustJSON(res), &list)
	if len(list.Tasks) != 2 {
		t.Errorf("A's tasks/list: %s, want A's two tasks", mustJSON(res))
	}

	// Every probe of A's tasks is in the audit log, with who and what; the
	// random ids (unknown, not denied) are not.
	denied := map[string]int{}
	for _, line := range strings.Split(ae.logs.String(), "\n") {
		var l struct {
			Audit     bool   `json:"audit"`
			Principal string `json:"principal"`
			Method    string `json:"method"`
			Task      string `json:"task"`
			TaskOwner string `json:"task_owner"`
		}
		if json.Unmarshal([]byte(line), &l) != nil || !l.Audit {
			continue
		}
		if l.Principal != ae.owner("bob") || l.TaskOwner != ae.owner("alice") || l.Method == "" {
			t.Errorf("audit line %s", line)
		}
		denied[l.Task]++
	}
	if denied[aModern] != 2*len(probes) || denied[aLegacy] != 2*len(probes) || len(denied) != 2 {
		t.Errorf("audit log: denials by task %v, want %d for each of A's tasks %s and %s only", denied, 2*len(probes), aModern, aLegacy)
	}

	for _, id := range []string{aModern, aLegacy} {
		ae.mustModern(t, "A cancels", alice, "tasks/cancel", map[string]any{"taskId": id})
	}
}

// TestAuthSeparatorInSubject: a task owned by (alice, tenant t1) — stored
// while the api read a tenant claim — is not reachable, once the claim is no
// longer read, by tokens whose subject spells that key with the separator or
// its escape: each gets the answer an unknown id gets, and the record is
// untouched.
func TestAuthSeparatorInSubject(t *testing.T) {
	t.Parallel()
	ae := newAuthEnv(t, []byte("separator-probe-key-of-32-bytes!"))
	now := time.Now().UTC()
	rec := &taskstate.Task{
		ID: taskstate.NewID(), Kind: taskstate.KindTool, Tool: "echo", Status: taskstate.Working,
		Owner: auth.Principal{Issuer: ae.iss.URL, Subject: "alice", Tenant: "t1"}.Owner(),
		Era:   taskstate.Era20260728, Mode: taskstate.ModeTask, CreatedAt: now, LastUpdatedAt: now,
	}
	if err := ae.store.Create(t.Context(), rec); err != nil {
		t.Fatal(err)
	}
	unknown := taskstate.NewID()
	for _, sub := range []string{"alice|t1", "alice%7Ct1", "alice%7ct1"} {
		tok := ae.token(t, sub)
		for _, method := range []string{"tasks/get", "tasks/cancel"} {
			answer := func(id string) authAnswer {
				m, h := newRequest(method, "probe", map[string]any{"taskId": id}, true)
				body, _ := json.Marshal(m)
				h.Set("Authorization", "Bearer "+tok)
				req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, ae.url, bytes.NewReader(body))
				if err != nil {
					t.Fatal(err)
				}
				req.Header = h
				resp, err := ae.client.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				defer resp.Body.Close()
				b, _ := io.ReadAll(resp.Body)
				return normalizeProbe(resp.StatusCode, resp.Header, b, id)
			}
			if got, want := answer(rec.ID), answer(unknown); got != want {
				t.Errorf("sub %q, %s of (alice, t1)'s task:\n%+v\nwant the unknown-id answer\n%+v", sub, method, got, want)
			}
		}
	}
	got, err := ae.store.Get(t.Context(), rec.ID)
	if err != nil || got.Revision != rec.Revision || got.Status != taskstate.Working {
		t.Fatalf("(alice, t1)'s record changed: %+v, %v", got, err)
	}
}
