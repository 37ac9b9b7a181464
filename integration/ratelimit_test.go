package integration

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/mcpqueue/mcpqueue/consumer"
	"github.com/mcpqueue/mcpqueue/integration/harness"
	"github.com/mcpqueue/mcpqueue/internal/testenv"
)

// TestRateLimitPerTool (issue 32, item 4): two worker processes with 40
// slots each serve the demo's wait tool under --tool-rate-limit wait=5/1s; 30
// calls at once start at most 5 in any one second across both (each
// handler start as its worker logs it), all complete and none fails or
// uses a second attempt, and a waiting task says why in its statusMessage.
func TestRateLimitPerTool(t *testing.T) {
	t.Parallel()
	onBrokers(t, func(t *testing.T, s *system) {
		limit := consumer.Rate{N: 5, Per: time.Second}
		w1 := s.worker(t, "worker-1", "--concurrency", "40", "--tool-rate-limit", "wait=5/1s")
		w2 := s.worker(t, "worker-2", "--concurrency", "40", "--tool-rate-limit", "wait=5/1s")
		c := harness.NewClient(s.mcpURL, true)
		ids := startAll(t, c, 30, "wait", map[string]any{"ms": 0})

		waiting := consumer.RateWait("wait", limit)
		harness.Eventually(t, 10*time.Second, func() (bool, string) {
			for _, id := range ids {
				if tk, err := c.GetTask(context.Background(), id); err == nil && tk.StatusMessage == waiting {
					return true, ""
				}
			}
			return false, "no task shows " + waiting
		})
		for _, id := range ids {
			tk := c.WaitStatus(t, id, 60*time.Second, "completed", "failed", "cancelled")
			if tk.Status != "completed" || !strings.Contains(resultText(t, tk.Result), "(attempt 1)") {
				t.Fatalf("task %s: %s %s %s, want completed on its first attempt", id, tk.Status, tk.StatusMessage, tk.Result)
			}
		}
		starts := handlerStarts(t, w1, w2)
		if len(starts) != 30 {
			t.Fatalf("%d handler starts for 30 tasks", len(starts))
		}
		most := testenv.MaxInWindow(starts, limit.Per)
		t.Logf("30 starts over %s, at most %d in any %s (%d on worker-1)", span(starts), most, limit.Per, len(handlerStarts(t, w1)))
		if most > limit.N {
			t.Fatalf("%d starts in one window of %s, over the limit of %s", most, limit.Per, limit)
		}
	})
}

// handlerStarts are the handler start times the processes logged ("task
// running", its started field).
func handlerStarts(t *testing.T, procs ...*harness.Proc) []time.Time {
	t.Helper()
	var out []time.Time
	for _, p := range procs {
		for _, line := range strings.Split(p.Output(), "\n") {
			if !strings.Contains(line, `"message":"task running"`) {
				continue
			}
			var l struct {
				Started time.Time `json:"started"`
			}
			if err := json.Unmarshal([]byte(line), &l); err != nil || l.Started.IsZero() {
				t.Fatalf("a task running line without its start time: %s (%v)", line, err)
			}
			out = append(out, l.Started)
		}
	}
	return out
}

// span is how long from the first of times to the last.
func span(times []time.Time) time.Duration {
	first, last := times[0], times[0]
	for _, x := range times {
		if x.Before(first) {
			first = x
		}
		if x.After(last) {
			last = x
		}
	}
	return last.Sub(first).Round(time.Millisecond)
}
