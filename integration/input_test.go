package integration

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/mcpqueue/mcpqueue/integration/harness"
)

// A worker dies while its task waits for input; the answer goes in through
// tasks/update while no worker holds the task; a new worker resumes the task
// with the stored answer, and the client is never asked again.
func TestKillWorkerWhileWaitingForInput(t *testing.T) {
	t.Parallel()
	onBrokers(t, func(t *testing.T, s *system) {
		lease := []string{"--lease", "2s"}
		w1 := s.conformanceWorker(t, "worker-1", lease...)
		c := harness.NewClient(s.mcpURL, true)
		ctx := context.Background()

		id := c.StartTask(t, "confirm_delete", map[string]any{"filename": "report.pdf"})
		var asked struct {
			Status        string                    `json:"status"`
			InputRequests map[string]map[string]any `json:"inputRequests"`
		}
		harness.Eventually(t, 20*time.Second, func() (bool, string) {
			if err := c.Call(ctx, "tasks/get", map[string]any{"taskId": id}, &asked); err != nil {
				return false, err.Error()
			}
			return asked.Status == "input_required", "status " + asked.Status
		})
		if len(asked.InputRequests) != 1 {
			t.Fatalf("want one input request, got %v", asked.InputRequests)
		}
		var key string
		for k := range asked.InputRequests {
			key = k
		}

		w1.Kill() // kill -9 while the handler waits on the task's replies
		answer := map[string]any{key: map[string]any{"action": "accept", "content": map[string]any{"confirm": true}}}
		if err := c.Call(ctx, "tasks/update", map[string]any{"taskId": id, "inputResponses": answer}, nil); err != nil {
			t.Fatalf("tasks/update: %v", err)
		}
		w2 := s.conformanceWorker(t, "worker-2", lease...)

		// Until the task ends, the client must never be asked again.
		var final *harness.Task
		harness.Eventually(t, s.recoveryBound(), func() (bool, string) {
			var tk struct {
				harness.Task
				InputRequests map[string]any `json:"inputRequests"`
			}
			if err := c.Call(ctx, "tasks/get", map[string]any{"taskId": id}, &tk); err != nil {
				return false, err.Error()
			}
			if tk.Status == "input_required" {
				t.Fatalf("the client was asked again after answering: %v", tk.InputRequests)
			}
			final = &tk.Task
			return tk.Status == "completed" || tk.Status == "failed" || tk.Status == "cancelled", "status " + tk.Status
		})
		if final.Status != "completed" || !strings.Contains(resultText(t, final.Result), "Deleted report.pdf") {
			t.Fatalf("task ended %s: %s", final.Status, final.Result)
		}
		out := w2.Output()
		if !strings.Contains(out, fmt.Sprintf(`"task":"%s"`, id)) {
			t.Fatalf("worker-2 never ran the task")
		}
		for _, line := range strings.Split(out, "\n") {
			if strings.Contains(line, id) && strings.Contains(line, "waiting for client input") {
				t.Fatalf("worker-2 asked for input again: %s", line)
			}
		}
	})
}
