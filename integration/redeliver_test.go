package integration

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mcpqueue/mcpqueue/integration/harness"
)

// runsIn is how many runs of a step tool (integration/mcpserver) the
// marker file counts: each run appends a line.
func runsIn(t *testing.T, marker string) int {
	t.Helper()
	b, err := os.ReadFile(marker)
	if os.IsNotExist(err) {
		return 0
	}
	if err != nil {
		t.Fatal(err)
	}
	return strings.Count(string(b), "\n")
}

// Issue 28, acceptance 3: kill -9 of a worker while it runs a tool
// annotated idempotentHint: false ends the task failed, saying why, and the
// handler ran once; a tool annotated idempotentHint: true is redelivered
// to a second worker, which completes it. The tools are a go-sdk server's
// (integration/mcpserver) behind the workers' bridge, so the annotations
// come as a real server lists them.
func TestRedeliveryAfterWorkerKill(t *testing.T) {
	t.Parallel()
	onBrokers(t, func(t *testing.T, s *system) {
		args := []string{"--lease", "2s", "--mcp-stdio", s.bins.MCPServer}
		w1 := s.bridgeWorker(t, s.bins.Worker, "worker-1", nil, args...)
		tools := listTools(t, s.mcpURL, "unsafe_step", "safe_step")
		if a := string(tools["unsafe_step"]["annotations"]); !strings.Contains(a, `"idempotentHint":false`) {
			t.Fatalf("unsafe_step annotations as listed: %s", a)
		}
		if a := string(tools["safe_step"]["annotations"]); !strings.Contains(a, `"idempotentHint":true`) {
			t.Fatalf("safe_step annotations as listed: %s", a)
		}

		c := harness.NewClient(s.mcpURL, true)
		dir := t.TempDir()
		unsafeMarker, safeMarker := filepath.Join(dir, "unsafe"), filepath.Join(dir, "safe")
		unsafeID := c.StartTask(t, "unsafe_step", map[string]any{"marker": unsafeMarker})
		safeID := c.StartTask(t, "safe_step", map[string]any{"marker": safeMarker})
		harness.Eventually(t, 60*time.Second, func() (bool, string) {
			u, sf := runsIn(t, unsafeMarker), runsIn(t, safeMarker)
			return u == 1 && sf == 1, fmt.Sprintf("runs started: unsafe_step %d, safe_step %d", u, sf)
		})
		// Both handlers run on worker-1. A second worker joins; then
		// worker-1 dies without a word.
		w2 := s.bridgeWorker(t, s.bins.Worker, "worker-2", nil, args...)
		killed := time.Now()
		w1.Kill()

		unsafe := c.WaitStatus(t, unsafeID, s.recoveryBound(), "completed", "failed", "cancelled")
		want := `the worker running tool "unsafe_step" died (attempt 1); unsafe_step is not safe to repeat (idempotentHint: false), so it was not run again`
		if unsafe.Status != "failed" || unsafe.StatusMessage != want || unsafe.Error == nil || unsafe.Error.Message != want {
			t.Fatalf("unsafe_step after kill -9: %s %q (error %+v); want failed: %q", unsafe.Status, unsafe.StatusMessage, unsafe.Error, want)
		}
		failedAfter := time.Since(killed)

		safe := c.WaitStatus(t, safeID, s.recoveryBound(), "completed", "failed", "cancelled")
		if safe.Status != "completed" || resultText(t, safe.Result) != "run 2" {
			t.Fatalf("safe_step after kill -9: %s %q %s; want completed by its second run", safe.Status, safe.StatusMessage, safe.Result)
		}
		if !strings.Contains(w2.Output(), fmt.Sprintf(`"task":"%s"`, safeID)) {
			t.Fatal("worker-2 never ran safe_step's task")
		}
		if n := runsIn(t, unsafeMarker); n != 1 {
			t.Fatalf("unsafe_step's handler ran %d times, want once", n)
		}
		if n := runsIn(t, safeMarker); n != 2 {
			t.Fatalf("safe_step's handler ran %d times, want twice", n)
		}
		t.Logf("%s (lease 2s): unsafe_step failed %s after kill -9, safe_step completed by worker-2 %s after it",
			s.be.Name, failedAfter.Round(10*time.Millisecond), time.Since(killed).Round(10*time.Millisecond))
	})
}
