package integration

// The task gateway against a server nobody here wrote (issue #33,
// acceptance 1): the reference 2026-07-28 tasks server of panyam/mcpkit
// (internal/peertest; skipped where its binary is absent) relayed by
// `worker --mcp-config` in both upstream eras, and called as tasks by both
// official clients: upstream tasks followed, an elicitation answered
// through our tasks/update, a cancel that reaches the upstream task.

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/mcpqueue/mcpqueue/integration/harness"
	"github.com/mcpqueue/mcpqueue/internal/peertest"
)

// peerWorker starts the reference server and a worker relaying it twice:
// with prefix "ref." in the era probed (2026-07-28, its tasks followed)
// and, with prefix "v1.", pinned to 2025-11-25 (initialize, plain calls).
func peerWorker(t *testing.T, s *system) (*peertest.Server, *harness.Proc) {
	t.Helper()
	peer := peertest.Start(t)
	cfg := filepath.Join(t.TempDir(), "mcp.json")
	conf, _ := json.Marshal(map[string]any{"mcpServers": map[string]any{
		"ref":    map[string]any{"url": peer.URL, "prefix": "ref."}, // the demo tools have a greet
		"ref-v1": map[string]any{"url": peer.URL, "protocol": "2025-11-25", "prefix": "v1."},
	}})
	if err := os.WriteFile(cfg, conf, 0o600); err != nil {
		t.Fatal(err)
	}
	w := s.bridgeWorker(t, s.bins.Worker, "worker", nil, "--concurrency", "4", "--mcp-config", cfg)
	return peer, w
}

// upstreamTaskOf is the reference server's task that ran our task id,
// from the worker's log.
func upstreamTaskOf(t *testing.T, w *harness.Proc, taskID string) string {
	t.Helper()
	re := regexp.MustCompile(`"upstream_task":"([^"]+)","call":"mcpq-` + regexp.QuoteMeta(taskID) + `-`)
	var up string
	harness.Eventually(t, 30*time.Second, func() (bool, string) {
		if m := re.FindStringSubmatch(w.Output()); m != nil {
			up = m[1]
		}
		return up != "", "no upstream task logged for " + taskID
	})
	return up
}

// wantOneInput fails the test unless the client answered one input request.
func wantOneInput(t *testing.T, r clientSummary) {
	t.Helper()
	if r.InputRequests == nil || *r.InputRequests != 1 {
		t.Fatalf("elicit: %+v, want one input request", r)
	}
}

// wantUpstreamCancelled fails the test unless the client's task ended
// cancelled, and waits until the reference server reports the upstream
// task of it cancelled.
func wantUpstreamCancelled(t *testing.T, peer *peertest.Server, w *harness.Proc, r clientSummary) {
	t.Helper()
	if r.Status != "cancelled" {
		t.Fatalf("cancel: %+v", r)
	}
	up := upstreamTaskOf(t, w, r.TaskID)
	harness.Eventually(t, 30*time.Second, func() (bool, string) {
		st, err := peer.Status(up)
		return err == nil && st == "cancelled", "upstream task " + up + ": " + st + " " + errString(err)
	})
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

func TestGatewayReferenceServerOfficialClients(t *testing.T) {
	peertest.Bin(t)
	officialNode(t)
	t.Parallel()
	onBrokers(t, func(t *testing.T, s *system) {
		peer, w := peerWorker(t, s)
		listTools(t, s.mcpURL, "ref.greet", "ref.slow_compute", "ref.confirm_delete", "v1.greet")

		// 2026-07-28 client (ext-tasks).
		r := runOfficialClient(t, s.mcpURL, "list-and-settle", "ref.slow_compute", `{"seconds":1,"label":"ext"}`, `Computation "ext" completed`)
		upstreamTaskOf(t, w, r.TaskID) // ran as an upstream task
		wantOneInput(t, runOfficialClient(t, s.mcpURL, "elicit", "ref.confirm_delete", `{"filename":"gw-ext.txt"}`, "deleted 'gw-ext.txt'"))
		wantUpstreamCancelled(t, peer, w, runOfficialClient(t, s.mcpURL, "cancel", "ref.slow_compute", `{"seconds":60}`, "upstream task"))
		// The upstream pinned to 2025-11-25: a plain call, a task here.
		runOfficialClient(t, s.mcpURL, "list-and-settle", "v1.greet", `{"name":"Ada"}`, "Hello, Ada!")

		// 2025-11-25 client (sdk 1.x experimental tasks).
		runLegacyClient(t, s.mcpURL, "stream-result", "ref.slow_compute", `{"seconds":1,"label":"v1"}`, `Computation "v1" completed`)
		wantOneInput(t, runLegacyClient(t, s.mcpURL, "elicit", "ref.confirm_delete", `{"filename":"gw-v1.txt"}`, `{"action":"accept","content":{"confirm":true}}`, "deleted 'gw-v1.txt'").clientSummary)
		wantUpstreamCancelled(t, peer, w, runLegacyClient(t, s.mcpURL, "cancel", "ref.slow_compute", `{"seconds":60}`, "upstream task").clientSummary)
	})
}

// Acceptance 2: the upstream stopped mid-run and started again, the task
// completes after retries (their statusMessage naming the upstream); the
// upstream gone for good, the task fails naming it and the last error.
func TestGatewayUpstreamRestartAndGone(t *testing.T) {
	peertest.Bin(t)
	t.Parallel()
	onBrokers(t, func(t *testing.T, s *system) {
		peer := peertest.Start(t)
		cfg := filepath.Join(t.TempDir(), "mcp.json")
		conf, _ := json.Marshal(map[string]any{"mcpServers": map[string]any{"ref": map[string]any{"url": peer.URL, "prefix": "ref."}}})
		if err := os.WriteFile(cfg, conf, 0o600); err != nil {
			t.Fatal(err)
		}
		w := s.bridgeWorker(t, s.bins.Worker, "worker", nil, "--max-attempts", "6", "--mcp-config", cfg)
		listTools(t, s.mcpURL, "ref.slow_compute")
		c := harness.NewClient(s.mcpURL, true)

		id := c.StartTask(t, "ref.slow_compute", map[string]any{"seconds": 3, "label": "restart"})
		first := upstreamTaskOf(t, w, id)
		peer.Stop()
		var retrying string
		harness.Eventually(t, 60*time.Second, func() (bool, string) {
			tk, err := c.GetTask(t.Context(), id)
			if err != nil {
				return false, err.Error()
			}
			retrying = tk.StatusMessage
			return tk.Status == "working" && strings.Contains(tk.StatusMessage, "retrying") && strings.Contains(tk.StatusMessage, `mcp server "ref"`),
				tk.Status + ": " + tk.StatusMessage
		})
		if strings.Contains(retrying, first) {
			t.Fatalf("the statusMessage %q shows the upstream task's id (a bearer handle)", retrying)
		}
		if err := peer.Start(); err != nil {
			t.Fatal(err)
		}
		tk := c.WaitStatus(t, id, 90*time.Second, "completed", "failed", "cancelled")
		if tk.Status != "completed" || !strings.Contains(resultText(t, tk.Result), `Computation "restart" completed`) {
			t.Fatalf("after the upstream came back the task ended %s: %+v (retrying said %q)", tk.Status, tk, retrying)
		}
		t.Logf("while the upstream was down: %q", retrying)

		peer.Stop() // for good
		id = c.StartTask(t, "ref.greet", map[string]any{"name": "nobody"})
		tk = c.WaitStatus(t, id, 3*time.Minute, "completed", "failed", "cancelled")
		if tk.Status != "failed" || !strings.Contains(tk.StatusMessage, `mcp server "ref"`) || !strings.Contains(tk.StatusMessage, "connection refused") ||
			!strings.Contains(tk.StatusMessage, "attempt 6 of 6") {
			t.Fatalf("with the upstream gone the task ended %s: %q, want failed naming the upstream, the last error and the attempts", tk.Status, tk.StatusMessage)
		}
		t.Logf("gone for good: %q", tk.StatusMessage)
	})
}
