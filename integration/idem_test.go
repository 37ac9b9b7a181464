package integration

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mcpqueue/mcpqueue/integration/harness"
)

// withKey adds an Idempotency-Key header to every request.
type withKey struct {
	key  string
	next http.RoundTripper
}

func (k withKey) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Idempotency-Key", k.key)
	return k.next.RoundTrip(r)
}

// keyClient is a 2026-07-28 client of url that sends key with every request.
func keyClient(url, key string, tasks bool) *harness.Client {
	c := harness.NewClient(url, tasks)
	c.HTTP.Transport = withKey{key: key, next: http.DefaultTransport}
	return c
}

// runsOf counts the worker's handler starts ("task running") of task id.
func runsOf(w *harness.Proc, id string) int {
	n := 0
	for _, line := range strings.Split(w.Output(), "\n") {
		if strings.Contains(line, `"task running"`) && strings.Contains(line, `"task":"`+id+`"`) {
			n++
		}
	}
	return n
}

// Calls of one tool with one Idempotency-Key, on both wires, sequential and
// racing on two api replicas: one task, one job, the handler ran once
// (counted from the worker's log); the key with other arguments is -32602.
func TestIdempotencyKeyOneRun(t *testing.T) {
	t.Parallel()
	eachBroker(t, func(t *testing.T, broker string) {
		b := harness.Build(t)
		prefix := harness.Prefix("ik", t.Name())
		be := harness.NewBackend(t, b, broker, prefix)
		key := make([]byte, 32)
		_, _ = rand.Read(key)
		env := []string{"MCPQ_STATE_KEY=" + hex.EncodeToString(key)}
		urlA, _ := harness.APIEnv(t, b, be, prefix, "api-a", env)
		urlB, _ := harness.APIEnv(t, b, be, prefix, "api-b", env)
		w := harness.Worker(t, b.Worker, "worker", be, prefix)
		ctx := t.Context()
		wait := map[string]any{"ms": 1500}

		// Sequential: replica A, then the retry on replica B.
		id := keyClient(urlA, "seq-"+broker, true).StartTask(t, "wait", wait)
		if again := keyClient(urlB, "seq-"+broker, true).StartTask(t, "wait", wait); again != id {
			t.Fatalf("retry on B: task %s, want %s", again, id)
		}
		harness.NewClient(urlB, true).WaitStatus(t, id, time.Minute, "completed")

		// The key with other arguments: -32602 naming the key.
		var rerr *harness.RPCError
		_, err := keyClient(urlA, "seq-"+broker, true).CallTool(ctx, "wait", map[string]any{"ms": 1})
		if !errors.As(err, &rerr) || rerr.Code != -32602 || !strings.Contains(rerr.Message, "seq-"+broker) {
			t.Fatalf("the key with other arguments: %v, want -32602 naming the key", err)
		}

		// Racing on two replicas: task-capable and inline clients at once.
		const n = 8
		var (
			wg      sync.WaitGroup
			handles [n]harness.Task
			errs    [n]error
		)
		for i := range n {
			wg.Go(func() {
				url := []string{urlA, urlB}[i%2]
				errs[i] = keyClient(url, "race-"+broker, i < n/2).Call(ctx, "tools/call", map[string]any{"name": "wait", "arguments": wait}, &handles[i])
			})
		}
		wg.Wait()
		raced := ""
		for i := range n {
			if errs[i] != nil {
				t.Fatalf("racing call %d: %v", i, errs[i])
			}
			if i >= n/2 { // inline: the result itself
				if handles[i].ResultType != "complete" {
					t.Fatalf("racing inline call %d: %+v, want its result", i, handles[i])
				}
				continue
			}
			if handles[i].ResultType != "task" || raced != "" && handles[i].TaskID != raced {
				t.Fatalf("racing call %d: %+v, want the handle of the one task %s", i, handles[i], raced)
			}
			raced = handles[i].TaskID
		}
		harness.NewClient(urlA, true).WaitStatus(t, raced, time.Minute, "completed")

		// The 2025-11-25 wire: params.task with the key in _meta, on A then B.
		sess := initializeLegacy(t, urlA, "idem-test")
		call := map[string]any{"name": "wait", "arguments": wait, "task": map[string]any{"ttl": 60000},
			"_meta": map[string]any{"io.mcpqueue/idempotency-key": "legacy-" + broker}}
		var first, second struct {
			Task *legacyTaskView `json:"task"`
		}
		sess.call(urlA, "tools/call", call, &first)
		sess.call(urlB, "tools/call", call, &second)
		if first.Task == nil || second.Task == nil || first.Task.TaskID != second.Task.TaskID {
			t.Fatalf("2025-11-25 keyed calls on A and B: %+v and %+v, want one task", first.Task, second.Task)
		}
		legacyID := first.Task.TaskID
		harness.Eventually(t, time.Minute, func() (bool, string) {
			var got legacyTaskView
			sess.call(urlB, "tasks/get", map[string]any{"taskId": legacyID}, &got)
			return got.Status == "completed", "status " + got.Status
		})

		// One job each, run once: the worker started each handler once.
		for _, id := range []string{id, raced, legacyID} {
			if got := runsOf(w, id); got != 1 {
				t.Errorf("task %s: the handler ran %d times, want once", id, got)
			}
		}
		records := harness.Records(t, be, prefix)
		if len(records) != 3 {
			ids := make([]string, 0, len(records))
			for id := range records {
				ids = append(ids, id)
			}
			t.Fatalf("%d task records (%v), want 3: one per key", len(records), ids)
		}
		if total := strings.Count(w.Output(), `"task running"`); total != 3 {
			t.Fatalf("the worker ran %d handlers, want 3", total)
		}
	})
}
