package integration

// The task gateway with a 2025-11-25 upstream that declares tasks (issue
// #33, item 1): server-everything's simulate-research-query (taskSupport
// "required") runs as the upstream's own task; its stages show as our
// task's status, its elicitation is answered through our tasks/update, and
// our tasks/cancel reaches the upstream task.

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/mcpqueue/mcpqueue/integration/harness"
)

func TestGatewayLegacyUpstreamTasks(t *testing.T) {
	t.Parallel()
	onBrokers(t, func(t *testing.T, s *system) {
		node, script := gatewayNode(t)
		url, upstream := everythingHTTP(t, node, script)
		w := s.bridgeWorker(t, s.bins.Worker, "worker", nil, "--concurrency", "2", "--mcp-url", url)
		listTools(t, s.mcpURL, "simulate-research-query")

		c := harness.NewClient(s.mcpURL, true)
		ctx := context.Background()
		id := c.StartTask(t, "simulate-research-query", map[string]any{"topic": "queues", "ambiguous": true})
		stages := map[string]bool{}
		var asked struct {
			Status        string         `json:"status"`
			StatusMessage string         `json:"statusMessage"`
			InputRequests map[string]any `json:"inputRequests"`
		}
		harness.Eventually(t, 60*time.Second, func() (bool, string) {
			err := c.Call(ctx, "tasks/get", map[string]any{"taskId": id}, &asked)
			if asked.StatusMessage != "" {
				stages[asked.StatusMessage] = true
			}
			return err == nil && asked.Status == "input_required", fmt.Sprintf("status %s %q, %v", asked.Status, asked.StatusMessage, err)
		})
		if len(asked.InputRequests) != 1 {
			t.Fatalf("input requests %v, want the upstream's one elicitation", asked.InputRequests)
		}
		answers := map[string]any{}
		for k := range asked.InputRequests {
			answers[k] = map[string]any{"action": "accept", "content": map[string]any{"interpretation": "technical"}}
		}
		if err := c.Call(ctx, "tasks/update", map[string]any{"taskId": id, "inputResponses": answers}, nil); err != nil {
			t.Fatalf("tasks/update: %v", err)
		}
		last, seen := statusUntilDone(t, c, id)
		for m := range seen {
			stages[m] = true
		}
		if last.Status != "completed" || !strings.Contains(string(last.Result), "queues") {
			t.Fatalf("research ended %s: %+v", last.Status, last)
		}
		upstreamStages := 0
		for m := range stages {
			if strings.HasSuffix(m, "...") {
				upstreamStages++
			}
		}
		if upstreamStages < 2 {
			t.Fatalf("status messages %v, want the upstream's stages", stages)
		}
		w.WaitOutput(t, "waiting on tasks/result", 10*time.Second)

		// Our cancel reaches the upstream task.
		id = c.StartTask(t, "simulate-research-query", map[string]any{"topic": "cancelled research"})
		harness.Eventually(t, 60*time.Second, func() (bool, string) {
			tk, err := c.GetTask(ctx, id)
			return err == nil && strings.HasSuffix(tk.StatusMessage, "..."), fmt.Sprintf("%+v %v", tk, err)
		})
		if err := c.Call(ctx, "tasks/cancel", map[string]any{"taskId": id}, nil); err != nil {
			t.Fatalf("tasks/cancel: %v", err)
		}
		w.WaitOutput(t, "sent tasks/cancel for the upstream task", 30*time.Second)
		_ = upstream
	})
}

// statusUntilDone polls task id until it ends: the last tasks/get and the
// status messages seen on the way.
func statusUntilDone(t *testing.T, c *harness.Client, id string) (*harness.Task, map[string]bool) {
	t.Helper()
	seen := map[string]bool{}
	var last *harness.Task
	harness.Eventually(t, 60*time.Second, func() (bool, string) {
		tk, err := c.GetTask(context.Background(), id)
		if err != nil {
			return false, err.Error()
		}
		last = tk
		seen[tk.StatusMessage] = true
		return tk.Status != "working" && tk.Status != "input_required", "still " + tk.Status
	})
	return last, seen
}
