package integration

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mcpqueue/mcpqueue/integration/harness"
)

// Scheduled calls (issue #32 item 1): the tool count_run (integration/
// mcpserver, behind the worker's bridge) appends a line to its marker file
// each time it starts, so runsIn counts the handler's starts.

// scheduledStart calls count_run on url as a task not to start before at,
// and returns the task's id.
func scheduledStart(t *testing.T, url string, at time.Time, marker string) string {
	t.Helper()
	c := harness.NewClient(url, true)
	c.Meta = map[string]any{"io.mcpqueue/not-before": at.UTC().Format(time.RFC3339Nano)}
	return c.StartTask(t, "count_run", map[string]any{"marker": marker})
}

// ranOnce waits up to within for task id, scheduled for at, to complete,
// and fails unless it did so by one run of its handler (marker), not
// before its time.
func ranOnce(t *testing.T, c *harness.Client, id string, within time.Duration, at time.Time, marker string) {
	t.Helper()
	done := c.WaitStatus(t, id, within, "completed", "failed", "cancelled")
	if done.Status != "completed" || resultText(t, done.Result) != "run 1" {
		t.Fatalf("scheduled task: %s %q %s; want completed by its first run", done.Status, done.StatusMessage, done.Result)
	}
	if time.Now().Before(at) {
		t.Fatalf("completed %s before its time", time.Until(at))
	}
	if n := runsIn(t, marker); n != 1 {
		t.Fatalf("the scheduled handler started %d times, want once", n)
	}
}

// Issue 32, acceptance 1: a call scheduled 4 s ahead is not running at
// +2 s and has completed by +10 s, having run once; one cancelled before
// its (earlier) time never runs.
func TestScheduledCall(t *testing.T) {
	t.Parallel()
	onBrokers(t, func(t *testing.T, s *system) {
		s.bridgeWorker(t, s.bins.Worker, "worker", nil, "--mcp-stdio", s.bins.MCPServer)
		listTools(t, s.mcpURL, "count_run")
		c := harness.NewClient(s.mcpURL, true)
		dir := t.TempDir()
		marker, cancelled := filepath.Join(dir, "runs"), filepath.Join(dir, "cancelled")

		called := time.Now()
		at := called.Add(4 * time.Second)
		id := scheduledStart(t, s.mcpURL, at, marker)
		cid := scheduledStart(t, s.mcpURL, at.Add(-time.Second), cancelled)
		if err := c.Call(context.Background(), "tasks/cancel", map[string]any{"taskId": cid}, nil); err != nil {
			t.Fatalf("tasks/cancel of the scheduled task: %v", err)
		}
		tk, err := c.GetTask(context.Background(), id)
		if err != nil || tk.Status != "working" || !strings.HasPrefix(tk.StatusMessage, "scheduled for ") {
			t.Fatalf("scheduled task at once: %+v (%v); want working, \"scheduled for …\"", tk, err)
		}

		// The property under test is a time: look at +2 s.
		time.Sleep(time.Until(called.Add(2 * time.Second)))
		tk, err = c.GetTask(context.Background(), id)
		if err != nil || tk.Status != "working" || runsIn(t, marker) != 0 {
			t.Fatalf("at +2 s: %+v (%v), %d runs; want working, not started", tk, err, runsIn(t, marker))
		}

		ranOnce(t, c, id, time.Until(called.Add(10*time.Second)), at, marker)
		if n := runsIn(t, cancelled); n != 0 {
			t.Fatalf("the cancelled scheduled task's handler started %d times, want never", n)
		}
		if ct, err := c.GetTask(context.Background(), cid); err != nil || ct.Status != "cancelled" {
			t.Fatalf("cancelled scheduled task: %+v (%v)", ct, err)
		}
	})
}

// Issue 32, acceptance 1: the api and the worker killed (SIGKILL) while a
// call waits for its time neither lose nor double it: a new api and a new
// worker run it once.
func TestScheduledCallSurvivesKills(t *testing.T) {
	t.Parallel()
	apiArgs := []string{"--reap-interval", "1s"}
	onBrokersWith(t, apiArgs, func(t *testing.T, s *system) {
		w := s.bridgeWorker(t, s.bins.Worker, "worker-1", nil, "--mcp-stdio", s.bins.MCPServer)
		listTools(t, s.mcpURL, "count_run")
		marker := filepath.Join(t.TempDir(), "runs")
		at := time.Now().Add(5 * time.Second)
		id := scheduledStart(t, s.mcpURL, at, marker)
		s.api.Kill()
		w.Kill()

		url, _ := harness.API(t, s.bins, s.be, s.prefix, apiArgs...)
		s.bridgeWorker(t, s.bins.Worker, "worker-2", nil, "--mcp-stdio", s.bins.MCPServer)
		c := harness.NewClient(url, true)
		ranOnce(t, c, id, 90*time.Second, at, marker)
	})
}

// Issue 32, acceptance 1: the broker killed (SIGKILL) and restarted while a
// call waits for its time loses nothing: the record (and on Asynq the job
// in the scheduled set) are on disk, and the call runs once when due.
func TestScheduledCallSurvivesBrokerRestart(t *testing.T) {
	t.Parallel()
	eachBroker(t, func(t *testing.T, broker string) {
		b := harness.Build(t)
		logDir := harness.LogDir(t)
		var be harness.Backend
		var restart func()
		if broker == "nats" {
			n := harness.NATSFileServer(t, b, logDir)
			be, restart = harness.NATSBackend(n.URL()), func() { n.Restart(t) }
		} else {
			r := harness.StartRedis(t, logDir)
			be, restart = r.Backend(), func() { r.Restart(t) }
		}
		prefix := harness.Prefix("it", t.Name())
		url, api := harness.API(t, b, be, prefix, "--reap-interval", "1s")
		s := &system{bins: b, be: be, prefix: prefix, mcpURL: url, api: api}
		s.bridgeWorker(t, b.Worker, "worker", nil, "--mcp-stdio", b.MCPServer)
		listTools(t, url, "count_run")
		marker := filepath.Join(t.TempDir(), "runs")
		at := time.Now().Add(5 * time.Second)
		id := scheduledStart(t, url, at, marker)
		restart()
		ranOnce(t, harness.NewClient(url, true), id, 2*time.Minute, at, marker)
	})
}
