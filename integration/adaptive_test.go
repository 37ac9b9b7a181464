package integration

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/mcpqueue/mcpqueue/integration/harness"
)

// Adaptive completion, end to end on real processes: a short call of a
// task-capable client comes back as its result, a long one as a handle —
// first after the bound (not measured yet), then, once the api has seen how
// long the tool takes, at once.
func TestAdaptiveCompletion(t *testing.T) {
	t.Parallel()
	const bound = 500 * time.Millisecond
	onBrokersWith(t, []string{"--inline-wait", bound.String()}, func(t *testing.T, s *system) {
		s.worker(t, "worker")
		c := harness.NewClient(s.mcpURL, true)
		ctx := context.Background()

		for tool, want := range map[string]string{"noop": "ok", "fail": ""} {
			out, err := c.CallTool(ctx, tool, map[string]any{})
			if err != nil {
				t.Fatalf("tools/call %s: %v", tool, err)
			}
			if string(out["resultType"]) != `"complete"` || out["taskId"] != nil {
				t.Fatalf("tools/call %s: want the result itself, got %s", tool, raw(out))
			}
			isError := string(out["isError"]) == "true"
			if isError != (tool == "fail") || !strings.Contains(string(out["content"]), want) {
				t.Fatalf("tools/call %s: result %s", tool, raw(out))
			}
		}

		// Not measured yet: the api waits the bound, then hands out the handle.
		long := func() (id string, took time.Duration) {
			t.Helper()
			start := time.Now()
			out, err := c.CallTool(ctx, "wait", map[string]any{"ms": 2000})
			took = time.Since(start)
			if err != nil {
				t.Fatalf("tools/call wait: %v", err)
			}
			var h harness.Task
			b, _ := json.Marshal(out)
			if err := json.Unmarshal(b, &h); err != nil || h.ResultType != "task" || h.TaskID == "" || h.Status != "working" {
				t.Fatalf("tools/call wait {ms:2000}: want a working task handle, got %s", b)
			}
			return h.TaskID, took
		}
		first, took := long()
		if took < bound {
			t.Fatalf("the first long call was answered after %s, before the inline bound %s ran out", took, bound)
		}
		if got := c.WaitStatus(t, first, 30*time.Second, "completed"); !strings.Contains(resultText(t, got.Result), "waited 2000 ms") {
			t.Fatalf("task %s: %+v", first, got)
		}
		// Now known to take 2s, far past the bound: the handle at once.
		second, took := long()
		if took >= bound {
			t.Fatalf("a call of a tool known to take 2s waited %s for the handle (bound %s)", took, bound)
		}
		c.WaitStatus(t, second, 30*time.Second, "completed")

		// A client without the tasks extension is unaffected: the result inline.
		out, err := harness.NewClient(s.mcpURL, false).CallTool(ctx, "noop", map[string]any{})
		if err != nil || !strings.Contains(string(out["content"]), "ok") {
			t.Fatalf("tools/call noop without tasks: %s, %v", raw(out), err)
		}
	})
}

func raw(m map[string]json.RawMessage) string {
	b, _ := json.Marshal(m)
	return string(b)
}
