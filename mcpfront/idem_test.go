package mcpfront_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/mcpqueue/mcpqueue/backend"
	"github.com/mcpqueue/mcpqueue/consumer"
	"github.com/mcpqueue/mcpqueue/internal/redistest"
	"github.com/mcpqueue/mcpqueue/mcpfront"
	"github.com/mcpqueue/mcpqueue/producer"
	"github.com/mcpqueue/mcpqueue/taskstate"
)

const (
	idemHeader = "Idempotency-Key"
	idemMeta   = "io.mcpqueue/idempotency-key"
)

type countArgs struct {
	N  int `json:"n"`
	Ms int `json:"ms"`
}

// idemEnv is a system whose "count" tool counts its runs, with two front
// ends (replicas) on one store and queue.
type idemEnv struct {
	*env
	urlB string
	runs atomic.Int64
	logs *redistest.SyncBuffer
}

func newIdemEnv(t *testing.T) *idemEnv {
	t.Helper()
	ie := &idemEnv{logs: &redistest.SyncBuffer{}}
	mux := consumer.NewMux()
	consumer.Handle(mux, consumer.Tool{Name: "count", InlineWait: -1},
		func(ctx context.Context, c *consumer.Call[countArgs]) (*consumer.Result, error) {
			run := ie.runs.Add(1)
			select {
			case <-time.After(time.Duration(c.Args.Ms) * time.Millisecond):
			case <-ctx.Done():
				return nil, ctx.Err()
			}
			return consumer.TextResult(fmt.Sprintf("n=%d run=%d", c.Args.N, run)), nil
		})
	consumer.Handle(mux, consumer.Tool{Name: "block"}, blockTool)
	cfg := &mcpfront.Config{HandleAfter: 15 * time.Second, StateKey: []byte("test-key"), InlineWait: -1, Logger: zerolog.New(ie.logs)}
	sys := startSystem(t, mux, "idem-worker", 8, cfg)
	// Replica B: its own connection, producer and front end.
	fs := sys.nats.Connect(t)
	prod := producer.New(fs.Store, producer.QueueExecutor{Queue: fs.Queue, Bus: fs.Bus}, &producer.Config{TTL: taskTTL, PollInterval: pollEvery})
	hs := httptest.NewServer(mcpfront.New(prod, backend.Backend{Store: fs.Store, Catalog: fs.Store, Bus: fs.Bus}, cfg))
	t.Cleanup(hs.Close)
	ie.env = &env{url: sys.url, handler: sys.srv, js: sys.front.JS, store: sys.front.Store, front: sys.front, taskBucket: sys.nats.KV.TaskBucket}
	ie.urlB = hs.URL
	return ie
}

// keyed sends a 2026-07-28 tools/call of count to url, with key in the
// header (inHeader) or in _meta.
func (ie *idemEnv) keyed(t *testing.T, url string, ext bool, key string, inHeader bool, args any) reply {
	t.Helper()
	m, h := newRequest("tools/call", "k", map[string]any{"name": "count", "arguments": args}, ext)
	if inHeader {
		h.Set(idemHeader, key)
	} else {
		m["params"].(map[string]any)["_meta"].(map[string]any)[idemMeta] = key
	}
	body, _ := json.Marshal(m)
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, url, bytes.NewReader(body))
	req.Header = h
	resp, err := http.DefaultClient.Do(req)
	if err == nil {
		var r reply
		if r, err = readReply(resp); err == nil {
			return r
		}
	}
	return reply{err: &rpcError{Message: "no reply: " + err.Error()}} // called on other goroutines: no Fatal
}

func taskIDOf(t *testing.T, r reply) string {
	t.Helper()
	var res struct {
		ResultType string `json:"resultType"`
		TaskID     string `json:"taskId"`
	}
	if r.err != nil || json.Unmarshal(r.result, &res) != nil || res.ResultType != "task" || res.TaskID == "" {
		t.Fatalf("want a task handle, got %s", r)
	}
	return res.TaskID
}

func TestIdempotencyKey(t *testing.T) {
	t.Parallel()
	ie := newIdemEnv(t)
	jobs0, _ := ie.counts(t)

	// Sequential, header then _meta, on replica A then B: one task, one job, one run.
	args := map[string]any{"n": 1, "ms": 0}
	id := taskIDOf(t, ie.keyed(t, ie.url, true, "seq-1", true, args))
	ie.waitCompleted(t, id, "n=1 run=1")
	if again := taskIDOf(t, ie.keyed(t, ie.urlB, true, "seq-1", false, map[string]any{"ms": 0, "n": 1})); again != id {
		t.Fatalf("retry with the same key: task %s, want %s", again, id)
	}
	if jobs, _ := ie.counts(t); jobs != jobs0+1 || ie.runs.Load() != 1 {
		t.Fatalf("after a call and its retry: %d jobs, %d runs; want 1 and 1", jobs-jobs0, ie.runs.Load())
	}

	// The same key with other arguments: -32602 naming the key, nothing written.
	jobs1, recs1 := ie.counts(t)
	r := ie.keyed(t, ie.url, true, "seq-1", true, map[string]any{"n": 2, "ms": 0})
	if r.err == nil || r.err.Code != -32602 || !strings.Contains(r.err.Message, `"seq-1"`) || !strings.Contains(r.err.Message, "other arguments") {
		t.Fatalf("same key, other arguments: want -32602 naming the key, got %s", r)
	}
	if jobs, recs := ie.counts(t); jobs != jobs1 || recs != recs1 {
		t.Fatalf("the refused call wrote %d jobs, %d records", jobs-jobs1, recs-recs1)
	}

	// Malformed keys: -32602 naming the field, nothing written.
	for _, bad := range []struct {
		header, meta any
		want         string
	}{
		{header: "", want: "Idempotency-Key header"},
		{header: strings.Repeat("k", 256), want: "Idempotency-Key header"},
		{meta: 42, want: idemMeta},
		{meta: "tab\tkey", want: idemMeta},
		{header: "a", meta: "b", want: "different idempotency keys"},
	} {
		m, h := newRequest("tools/call", "bad", map[string]any{"name": "count", "arguments": args}, true)
		if bad.header != nil {
			h.Set(idemHeader, bad.header.(string))
		}
		if bad.meta != nil {
			m["params"].(map[string]any)["_meta"].(map[string]any)[idemMeta] = bad.meta
		}
		body, _ := json.Marshal(m)
		r := ie.send(t, h, body, sendOpts{})
		if r.err == nil || r.err.Code != -32602 || !strings.Contains(r.err.Message, bad.want) {
			t.Errorf("key header %v, meta %v: want -32602 naming %q, got %s", bad.header, bad.meta, bad.want, r)
		}
	}
	if jobs, recs := ie.counts(t); jobs != jobs1 || recs != recs1 {
		t.Fatalf("malformed keys wrote %d jobs, %d records", jobs-jobs1, recs-recs1)
	}

	// Concurrent on two replicas, task-capable and inline clients mixed:
	// one task, one run, every inline client gets its result.
	runs0 := ie.runs.Load()
	race := map[string]any{"n": 3, "ms": 300}
	var (
		wg      sync.WaitGroup
		replies [8]reply
		ids     = map[string]bool{}
		results = map[string]bool{}
	)
	for i := range replies {
		wg.Go(func() {
			url := []string{ie.url, ie.urlB}[i%2]
			replies[i] = ie.keyed(t, url, i%4 < 2, "race-1", i%3 == 0, race)
		})
	}
	wg.Wait()
	for i, r := range replies {
		if i%4 < 2 {
			ids[taskIDOf(t, r)] = true
		} else if r.err != nil {
			t.Fatalf("inline call %d of the race: %s", i, r)
		} else {
			results[resultText(t, r.result)] = true
		}
	}
	if len(ids) != 1 || len(results) != 1 || !results[fmt.Sprintf("n=3 run=%d", runs0+1)] {
		t.Fatalf("8 racing calls of one key: task ids %v, inline results %v; want one task that ran once", ids, results)
	}
	for id := range ids {
		ie.waitCompleted(t, id, fmt.Sprintf("n=3 run=%d", runs0+1))
	}
	if got := ie.runs.Load(); got != runs0+1 {
		t.Fatalf("the handler ran %d times for one key", got-runs0)
	}

	// The 2025-11-25 wire: params.task twice with one key, and an inline call with it.
	h := ie.legacySession(t, nil)
	legacy := func(key string, task bool) reply {
		p := map[string]any{"name": "count", "arguments": map[string]any{"n": 4, "ms": 0}, "_meta": map[string]any{idemMeta: key}}
		if task {
			p["task"] = map[string]any{"ttl": 60000}
		}
		body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 9, "method": "tools/call", "params": p})
		return ie.send(t, h, body, sendOpts{})
	}
	var first, second struct {
		Task struct {
			TaskID string `json:"taskId"`
		} `json:"task"`
	}
	if r := legacy("legacy-1", true); r.err != nil || json.Unmarshal(r.result, &first) != nil || first.Task.TaskID == "" {
		t.Fatalf("2025-11-25 keyed task: %s", r)
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) { // its one run ends
		if rec, err := ie.store.Get(t.Context(), first.Task.TaskID); err == nil && rec.Status == taskstate.Completed {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the 2025-11-25 keyed task %s did not complete", first.Task.TaskID)
		}
	}
	runs1 := ie.runs.Load()
	if r := legacy("legacy-1", true); r.err != nil || json.Unmarshal(r.result, &second) != nil || second.Task.TaskID != first.Task.TaskID {
		t.Fatalf("2025-11-25 keyed retry: %s, want task %s", r, first.Task.TaskID)
	}
	if r := legacy("legacy-1", false); r.err != nil || !strings.HasPrefix(resultText(t, r.result), "n=4 run=") {
		t.Fatalf("2025-11-25 keyed inline retry: want the task's result, got %s", r)
	}
	if got := ie.runs.Load(); got != runs1 {
		t.Fatalf("2025-11-25 retries ran the handler %d more times", got-runs1)
	}
}

// A keyed inline call whose client leaves does not cancel its task: the
// client's retry with the key comes back for it.
func TestIdempotencyKeyInlineClientGone(t *testing.T) {
	t.Parallel()
	ie := newIdemEnv(t)
	m, h := newRequest("tools/call", "gone", map[string]any{"name": "block", "arguments": map[string]any{}}, false)
	h.Set(idemHeader, "gone-1")
	body, _ := json.Marshal(m)
	ctx, cancel := context.WithCancel(t.Context())
	go func() { // leave once the task runs
		defer cancel()
		for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
			if tasks, _ := ie.findTasks(ctx, "block"); len(tasks) == 1 && tasks[0].Lease != nil {
				return
			}
		}
	}()
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, ie.url, bytes.NewReader(body))
	req.Header = h
	if resp, err := http.DefaultClient.Do(req); err == nil {
		resp.Body.Close()
		t.Fatalf("the blocking call answered %d", resp.StatusCode)
	}
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(ie.logs.String(), "the client of a keyed inline call left") {
		if time.Now().After(deadline) {
			t.Fatalf("the front end never noticed the client leave; log:\n%s", ie.logs.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	if tk := ie.tasksOf(t, "block"); len(tk) != 1 || tk[0].Status != taskstate.Working {
		t.Fatalf("the keyed task after its client left: %+v, want it still working", tk)
	}
}

// Keys are scoped by owner: another principal's call with the same key is
// another task, and each principal's retry finds its own.
func TestIdempotencyKeyScopedByOwner(t *testing.T) {
	t.Parallel()
	ae := newAuthEnv(t, nil)
	call := func(sub string) string {
		t.Helper()
		m, h := newRequest("tools/call", "owned", map[string]any{"name": "echo", "arguments": map[string]any{"text": "x"}}, true)
		h.Set(idemHeader, "shared-key")
		body, _ := json.Marshal(m)
		r, err := ae.post(t, ae.token(t, sub), h, body)
		if err != nil {
			t.Fatal(err)
		}
		return taskIDOf(t, r)
	}
	alice, bob := call("alice"), call("bob")
	if alice == bob {
		t.Fatalf("alice and bob with one key share task %s", alice)
	}
	if again := call("alice"); again != alice {
		t.Fatalf("alice's retry: task %s, want %s", again, alice)
	}
	if again := call("bob"); again != bob {
		t.Fatalf("bob's retry: task %s, want %s", again, bob)
	}
	if want := taskstate.IdempotentID(ae.owner("alice"), "shared-key", ""); alice != want {
		t.Fatalf("alice's task %s, want IdempotentID of her owner key %s", alice, want)
	}
}
