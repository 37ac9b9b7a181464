package integration

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mcpqueue/mcpqueue/integration/harness"
)

// A run of tasks (completed, tool error, failed, input_required then
// completed, cancelled, queued with no worker) moves the api's and the
// worker's counters by exactly what happened, the queue gauges (per tool:
// pending, in flight) follow the queue, and /readyz depends on the broker
// and the store, not on workers being alive.
func TestMetrics(t *testing.T) {
	t.Parallel()
	onBrokers(t, func(t *testing.T, s *system) {
		api := strings.TrimSuffix(s.mcpURL, "/mcp")
		ctx := context.Background()

		// No worker yet: alive and ready (a pool at zero is not the
		// api's fault; calls queue until a worker starts).
		if code, body := harness.Get(api + "/healthz"); code != 200 {
			t.Fatalf("api /healthz: %d %s", code, body)
		}
		if code, body := harness.Get(api + "/readyz"); code != http.StatusOK {
			t.Fatalf("api /readyz without any worker: %d %q, want 200", code, body)
		}

		admin := fmt.Sprintf("http://127.0.0.1:%d", harness.FreePort(t))
		w1 := s.conformanceWorker(t, "worker-1", "--admin", strings.TrimPrefix(admin, "http://"))
		for _, u := range []string{api, admin} {
			harness.Eventually(t, 20*time.Second, func() (bool, string) {
				code, body := harness.Get(u + "/readyz")
				return code == 200, fmt.Sprintf("%s/readyz: %d %s", u, code, body)
			})
		}

		// Every /mcp request of this test goes through this client.
		c := harness.NewClient(s.mcpURL, true)
		var sent atomic.Int64
		c.HTTP.Transport = countingTransport{n: &sent, next: http.DefaultTransport}

		if _, err := c.CallTool(ctx, "greet", map[string]any{"name": "metrics"}); err != nil { // inline
			t.Fatalf("greet: %v", err)
		}
		toolErr := c.StartTask(t, "failing_job", nil)
		failed := c.StartTask(t, "protocol_error_job", nil)
		c.WaitStatus(t, toolErr, 30*time.Second, "completed")
		c.WaitStatus(t, failed, 30*time.Second, "failed")

		input := c.StartTask(t, "confirm_delete", map[string]any{"filename": "a.txt"})
		var asked struct {
			Status        string         `json:"status"`
			InputRequests map[string]any `json:"inputRequests"`
		}
		harness.Eventually(t, 20*time.Second, func() (bool, string) {
			err := c.Call(ctx, "tasks/get", map[string]any{"taskId": input}, &asked)
			return err == nil && asked.Status == "input_required", fmt.Sprintf("status %s, %v", asked.Status, err)
		})
		answers := map[string]any{}
		for k := range asked.InputRequests {
			answers[k] = map[string]any{"action": "accept", "content": map[string]any{"confirm": true}}
		}
		if err := c.Call(ctx, "tasks/update", map[string]any{"taskId": input, "inputResponses": answers}, nil); err != nil {
			t.Fatalf("tasks/update: %v", err)
		}
		c.WaitStatus(t, input, 30*time.Second, "completed")

		slow := c.StartTask(t, "slow_compute", map[string]any{"seconds": 60, "label": "x"})
		harness.Eventually(t, 20*time.Second, func() (bool, string) {
			return hasLine(w1.Output(), slow, "task running"), "the worker has not started " + slow
		})
		// The running job is in flight, nothing of the tool is pending.
		wantMetrics(t, api, map[string]float64{
			`mcpq_queue_pending{tool="slow_compute"}`:  0,
			`mcpq_queue_inflight{tool="slow_compute"}`: 1,
			`mcpq_queue_inflight{tool="greet"}`:        0,
		})
		if err := c.Call(ctx, "tasks/cancel", map[string]any{"taskId": slow}, nil); err != nil {
			t.Fatalf("tasks/cancel: %v", err)
		}
		c.WaitStatus(t, slow, 10*time.Second, "cancelled")
		harness.Eventually(t, 20*time.Second, func() (bool, string) {
			return hasLine(w1.Output(), slow, "task cancelled while running"), "the handler never saw the cancel"
		})

		// The worker wrote completed and failed; the api wrote cancelled.
		wantMetrics(t, admin, map[string]float64{
			`mcpq_tasks_finished_total{status="completed",tool="greet"}`:           1,
			`mcpq_tasks_finished_total{status="completed",tool="failing_job"}`:     1,
			`mcpq_tasks_finished_total{status="failed",tool="protocol_error_job"}`: 1,
			`mcpq_tasks_finished_total{status="completed",tool="confirm_delete"}`:  1,
			`mcpq_tasks_finished_total{status="cancelled",tool="slow_compute"}`:    0,
			`mcpq_task_pickup_seconds_count{tool="greet"}`:                         1,
			`mcpq_task_pickup_seconds_count{tool="slow_compute"}`:                  1,
			`mcpq_task_run_seconds_count{tool="slow_compute"}`:                     1,
			`mcpq_task_run_seconds_count{tool="confirm_delete"}`:                   1,
			`mcpq_task_input_wait_seconds_count{tool="confirm_delete"}`:            1,
			`mcpq_task_redeliveries_total{tool="confirm_delete"}`:                  0,
			`mcpq_tasks_created_total{tool="greet"}`:                               0,
			`mcpq_queue_depth`:                                                     0,
		})
		wantMetrics(t, api, map[string]float64{
			`mcpq_tasks_created_total{tool="greet"}`:                            1,
			`mcpq_tasks_created_total{tool="failing_job"}`:                      1,
			`mcpq_tasks_created_total{tool="protocol_error_job"}`:               1,
			`mcpq_tasks_created_total{tool="confirm_delete"}`:                   1,
			`mcpq_tasks_created_total{tool="slow_compute"}`:                     1,
			`mcpq_tasks_finished_total{status="cancelled",tool="slow_compute"}`: 1,
			`mcpq_tasks_finished_total{status="completed",tool="greet"}`:        0,
			`mcpq_http_requests_total{code="200",method="post"}`:                float64(sent.Load()),
			`mcpq_api_requests_total{era="2026-07-28",method="tools/call"}`:     5,
			`mcpq_queue_depth`: 0,
		})

		// With no worker, a new task waits in the queue; a new worker takes it.
		if err := w1.Stop(30 * time.Second); err != nil {
			t.Fatalf("stopping worker-1: %v", err)
		}
		queued := c.StartTask(t, "slow_compute", map[string]any{"seconds": 0, "label": "queued"})
		queued2 := c.StartTask(t, "slow_compute", map[string]any{"seconds": 0, "label": "queued"})
		other := c.StartTask(t, "failing_job", nil)
		wantMetrics(t, api, map[string]float64{
			`mcpq_queue_depth`: 3, `mcpq_tasks_created_total{tool="slow_compute"}`: 3,
			`mcpq_queue_pending{tool="slow_compute"}`: 2, `mcpq_queue_inflight{tool="slow_compute"}`: 0,
			`mcpq_queue_pending{tool="failing_job"}`: 1, `mcpq_queue_inflight{tool="failing_job"}`: 0,
		})
		admin2 := fmt.Sprintf("http://127.0.0.1:%d", harness.FreePort(t))
		s.conformanceWorker(t, "worker-2", "--admin", strings.TrimPrefix(admin2, "http://"))
		for _, id := range []string{queued, queued2, other} {
			c.WaitStatus(t, id, 30*time.Second, "completed")
		}
		wantMetrics(t, api, map[string]float64{`mcpq_queue_depth`: 0, `mcpq_queue_pending{tool="slow_compute"}`: 0, `mcpq_queue_pending{tool="failing_job"}`: 0})
		wantMetrics(t, admin2, map[string]float64{
			`mcpq_tasks_finished_total{status="completed",tool="slow_compute"}`: 2,
			`mcpq_task_pickup_seconds_count{tool="slow_compute"}`:               2,
			`mcpq_queue_pending{tool="slow_compute"}`:                           0,
		})
		// It waited at least as long as it took worker-2 to start.
		if sum := scrape(t, admin2)[`mcpq_task_pickup_seconds_sum{tool="slow_compute"}`]; sum <= 0 {
			t.Fatalf("pickup latency of the queued task: %v s", sum)
		}
	})
}

type countingTransport struct {
	n    *atomic.Int64
	next http.RoundTripper
}

func (c countingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	c.n.Add(1)
	return c.next.RoundTrip(r)
}

// hasLine reports whether a JSON log line names both the task and msg.
func hasLine(out, task, msg string) bool {
	for _, l := range strings.Split(out, "\n") {
		if strings.Contains(l, `"task":"`+task+`"`) && strings.Contains(l, `"message":"`+msg+`"`) {
			return true
		}
	}
	return false
}

// scrape reads base/metrics into series → value; a series is written as in
// the exposition format, labels sorted by name.
func scrape(t *testing.T, base string) map[string]float64 {
	t.Helper()
	code, body := harness.Get(base + "/metrics")
	if code != 200 {
		t.Fatalf("%s/metrics: %d %s", base, code, body)
	}
	out := map[string]float64{}
	for _, line := range strings.Split(body, "\n") {
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil {
			t.Fatalf("unreadable metrics line %q", line)
		}
		out[line[:i]] = v
	}
	return out
}

// wantMetrics waits until every series has its value (an absent series
// counts as 0): counters are bumped just after the writes a client sees.
func wantMetrics(t *testing.T, base string, want map[string]float64) {
	t.Helper()
	harness.Eventually(t, 10*time.Second, func() (bool, string) {
		got := scrape(t, base)
		for series, v := range want {
			if got[series] != v {
				return false, fmt.Sprintf("%s/metrics: %s = %v, want %v", base, series, got[series], v)
			}
		}
		return true, ""
	})
}
