package integration

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/mcpqueue/mcpqueue/integration/harness"
)

// brokers are the backends every end-to-end behaviour is shown on.
var brokers = []string{"nats", "asynq"}

// system is one broker, one api and whatever workers a test starts.
type system struct {
	bins   *harness.Bins
	be     harness.Backend
	prefix string
	mcpURL string
	api    *harness.Proc
}

func newSystem(t *testing.T, broker string, apiArgs ...string) *system {
	t.Helper()
	return newSystemOf(t, harness.Build(t), broker, apiArgs...)
}

// newSystemOf is newSystem on the binaries b.
func newSystemOf(t *testing.T, b *harness.Bins, broker string, apiArgs ...string) *system {
	t.Helper()
	prefix := harness.Prefix("it", t.Name())
	be := harness.NewBackend(t, b, broker, prefix)
	mcpURL, api := harness.API(t, b, be, prefix, apiArgs...)
	return &system{bins: b, be: be, prefix: prefix, mcpURL: mcpURL, api: api}
}

// onBrokers runs f as a parallel subtest per broker, each on a system of its own.
func onBrokers(t *testing.T, f func(t *testing.T, s *system)) {
	onBrokersWith(t, nil, f)
}

// onBrokersWith is onBrokers with extra api arguments.
func onBrokersWith(t *testing.T, apiArgs []string, f func(t *testing.T, s *system)) {
	eachBroker(t, func(t *testing.T, broker string) { f(t, newSystem(t, broker, apiArgs...)) })
}

// eachBroker runs f as a parallel subtest per broker.
func eachBroker(t *testing.T, f func(t *testing.T, broker string)) {
	for _, broker := range brokers {
		t.Run(broker, func(t *testing.T) {
			t.Parallel()
			f(t, broker)
		})
	}
}

func (s *system) worker(t *testing.T, name string, args ...string) *harness.Proc {
	t.Helper()
	return harness.Worker(t, s.bins.Worker, name, s.be, s.prefix, args...)
}

func (s *system) conformanceWorker(t *testing.T, name string, args ...string) *harness.Proc {
	t.Helper()
	return harness.Worker(t, s.bins.Conformance, name, s.be, s.prefix, args...)
}

// recoveryBound is how long a crashed worker's job may take to come back.
// JetStream redelivers after the lease (2s here); Asynq's recoverer, with its
// fixed 30s lease, once a minute, reclaims a task 60-120s after the crash.
func (s *system) recoveryBound() time.Duration {
	if s.be.Name == "asynq" {
		return 3 * time.Minute
	}
	return 30 * time.Second
}

func resultText(t *testing.T, raw json.RawMessage) string {
	t.Helper()
	var r struct {
		Content []struct {
			Type string `json:"type"`
			Text string `json:"text"`
		} `json:"content"`
		IsError bool `json:"isError"`
	}
	if err := json.Unmarshal(raw, &r); err != nil || len(r.Content) == 0 {
		t.Fatalf("not a CallToolResult with content: %s (%v)", raw, err)
	}
	return r.Content[0].Text
}

func TestTaskCreatedToCompleted(t *testing.T) {
	t.Parallel()
	onBrokers(t, func(t *testing.T, s *system) {
		s.worker(t, "worker")
		c := harness.NewClient(s.mcpURL, true)

		id := c.StartTask(t, "render_report", map[string]any{"title": "Q3", "pages": 2})
		// The handle is durable before the reply: the first tasks/get finds it.
		if _, err := c.GetTask(context.Background(), id); err != nil {
			t.Fatalf("immediate tasks/get: %v", err)
		}
		tk := c.WaitStatus(t, id, 20*time.Second, "completed", "failed", "cancelled")
		if tk.Status != "completed" {
			t.Fatalf("task ended %s: %+v", tk.Status, tk)
		}
		if got := resultText(t, tk.Result); !strings.Contains(got, `"pages":2`) {
			t.Fatalf("result text %q lacks the report", got)
		}
	})
}

func TestCancelRunningTask(t *testing.T) {
	t.Parallel()
	onBrokers(t, func(t *testing.T, s *system) {
		w := s.worker(t, "worker")
		c := harness.NewClient(s.mcpURL, true)

		id := c.StartTask(t, "wait", map[string]any{"ms": 60000})
		c.WaitStatus(t, id, 20*time.Second, "working")
		harness.Eventually(t, 20*time.Second, func() (bool, string) {
			tk, err := c.GetTask(context.Background(), id)
			return err == nil && strings.HasPrefix(tk.StatusMessage, "waiting"), "handler not running yet"
		})
		start := time.Now()
		if err := c.Call(context.Background(), "tasks/cancel", map[string]any{"taskId": id}, nil); err != nil {
			t.Fatalf("tasks/cancel: %v", err)
		}
		tk := c.WaitStatus(t, id, 5*time.Second, "cancelled", "completed", "failed")
		if tk.Status != "cancelled" {
			t.Fatalf("after cancel the task is %s", tk.Status)
		}
		// The handler's ctx ended: it logged that it saw the cancellation.
		w.WaitOutput(t, fmt.Sprintf(`"task":"%s"`, id), 5*time.Second)
		w.WaitLine(t, 5*time.Second, id, "handler observed cancellation")
		t.Logf("cancel reached the handler within %s", time.Since(start))

		// Cancel is idempotent on a terminal task: still an ack.
		if err := c.Call(context.Background(), "tasks/cancel", map[string]any{"taskId": id}, nil); err != nil {
			t.Fatalf("second tasks/cancel: %v", err)
		}
	})
}

func TestSyncCallReturnsResultInline(t *testing.T) {
	t.Parallel()
	onBrokers(t, func(t *testing.T, s *system) {
		s.worker(t, "worker")
		c := harness.NewClient(s.mcpURL, false) // no tasks extension

		res, err := c.CallTool(context.Background(), "render_report", map[string]any{"title": "inline", "pages": 1})
		if err != nil {
			t.Fatalf("sync call: %v", err)
		}
		if rt := string(res["resultType"]); rt != `"complete"` {
			t.Fatalf("resultType %s, want complete; result %v", rt, res)
		}
		var sc struct{ Title string }
		if err := json.Unmarshal(res["structuredContent"], &sc); err != nil || sc.Title != "inline" {
			t.Fatalf("structuredContent %s", res["structuredContent"])
		}
		// A tool that forbids tasks runs inline even for a task-capable client.
		res, err = harness.NewClient(s.mcpURL, true).CallTool(context.Background(), "greet", map[string]any{"name": "Ada"})
		if err != nil || !strings.Contains(string(res["content"]), "Hello, Ada!") {
			t.Fatalf("greet: %v %v", res, err)
		}
	})
}

func TestWorkerStartedAfterAPIServesTools(t *testing.T) {
	t.Parallel()
	onBrokers(t, func(t *testing.T, s *system) {
		c := harness.NewClient(s.mcpURL, true)

		var list struct {
			Tools []struct{ Name string } `json:"tools"`
		}
		if err := c.Call(context.Background(), "tools/list", nil, &list); err != nil {
			t.Fatal(err)
		}
		if len(list.Tools) != 0 {
			t.Fatalf("no worker yet, but tools/list shows %v", list.Tools)
		}
		_, err := c.CallTool(context.Background(), "greet", map[string]any{"name": "x"})
		var rpcErr *harness.RPCError
		if !errors.As(err, &rpcErr) || rpcErr.Code != -32602 {
			t.Fatalf("calling an unserved tool: want -32602, got %v", err)
		}

		s.worker(t, "late-worker")
		harness.Eventually(t, 10*time.Second, func() (bool, string) {
			if err := c.Call(context.Background(), "tools/list", nil, &list); err != nil {
				return false, err.Error()
			}
			return len(list.Tools) >= 4, fmt.Sprintf("tools: %v", list.Tools)
		})
		id := c.StartTask(t, "wait", map[string]any{"ms": 10})
		if tk := c.WaitStatus(t, id, 20*time.Second, "completed", "failed"); tk.Status != "completed" {
			t.Fatalf("task %s", tk.Status)
		}
	})
}

func TestKillWorkerMidTask(t *testing.T) {
	t.Parallel()
	onBrokers(t, func(t *testing.T, s *system) {
		lease := []string{"--lease", "2s", "--concurrency", "2"}
		w1 := s.worker(t, "worker-1", lease...)
		c := harness.NewClient(s.mcpURL, true)

		id := c.StartTask(t, "wait", map[string]any{"ms": 1500})
		w1.WaitOutput(t, fmt.Sprintf(`"task":"%s"`, id), 20*time.Second)
		// A second worker joins; then the one holding the task dies without warning.
		w2 := s.worker(t, "worker-2", lease...)
		killed := time.Now()
		w1.Kill()

		tk := c.WaitStatus(t, id, s.recoveryBound(), "completed", "failed", "cancelled")
		if tk.Status != "completed" {
			t.Fatalf("task after worker crash: %s %s", tk.Status, tk.StatusMessage)
		}
		if got := resultText(t, tk.Result); !strings.Contains(got, "attempt 2") {
			t.Fatalf("expected the second attempt to finish the task, got %q", got)
		}
		if !strings.Contains(w2.Output(), id) {
			t.Fatalf("worker-2 never ran the task")
		}
		t.Logf("%s: recovered %s after kill -9 (lease 2s)", s.be.Name, time.Since(killed).Round(10*time.Millisecond))
	})
}

func TestNothingStaysWorking(t *testing.T) {
	t.Parallel()
	onBrokers(t, func(t *testing.T, s *system) {
		s.worker(t, "worker", "--concurrency", "8")
		c := harness.NewClient(s.mcpURL, true)

		var ids []string
		for i := range 20 {
			switch i % 4 {
			case 0:
				ids = append(ids, c.StartTask(t, "fail", map[string]any{}))
			default:
				ids = append(ids, c.StartTask(t, "wait", map[string]any{"ms": 50 * i}))
			}
		}
		for _, id := range ids[:3] {
			_ = c.Call(context.Background(), "tasks/cancel", map[string]any{"taskId": id}, nil)
		}
		for _, id := range ids {
			tk := c.WaitStatus(t, id, 30*time.Second, "completed", "failed", "cancelled")
			if tk.Status == "failed" {
				t.Fatalf("task %s failed: %+v", id, tk.Error)
			}
		}
	})
}
