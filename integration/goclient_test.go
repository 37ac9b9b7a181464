package integration

// The Go client (package client) against real processes: api + worker on
// both brokers with the demo tools, server-everything behind the stdio
// bridge, and a server nobody here wrote (the tasks extension's reference
// server, panyam/mcpkit examples/tasks-v2).

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mcpqueue/mcpqueue/client"
	"github.com/mcpqueue/mcpqueue/integration/harness"
)

// goClient is a client of url on revision version, with opts.
func goClient(t *testing.T, url, version string, opts ...client.Option) *client.Client {
	t.Helper()
	c, err := client.New(url, append([]client.Option{client.WithVersion(version), client.WithPollFloor(20 * time.Millisecond)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// confirmer accepts every elicitation with confirm: true and counts them.
func confirmer(n *atomic.Int64) client.Option {
	return client.WithInputHandler(func(ctx context.Context, req client.InputRequest) (client.InputResponse, error) {
		if req.Method != client.MethodElicit {
			return client.InputResponse{}, fmt.Errorf("unexpected %s", req.Method)
		}
		n.Add(1)
		return client.Accept(map[string]any{"confirm": true, "name": "Ada Lovelace"}), nil
	})
}

// statusOf is the status of task id as c reads it (tasks/get).
func statusOf(t *testing.T, c *client.Client, id string) string {
	t.Helper()
	task, err := c.Resume(t.Context(), id)
	if err != nil {
		return "unreadable: " + err.Error()
	}
	return task.Status()
}

// The demo tools through a real api and worker, on both brokers and both
// wires: a task, an inline call, input through the callback (in a task and
// inline), cancel when the context ends, and the README's agent.
func TestGoClientDemoTools(t *testing.T) {
	t.Parallel()
	onBrokers(t, func(t *testing.T, s *system) {
		s.worker(t, "worker")
		listTools(t, s.mcpURL, "render_report", "confirm_action", "wait", "greet")
		ctx := t.Context()
		for _, v := range []string{client.Version2026, client.Version2025} {
			// As a task: the report and its structured result.
			c := goClient(t, s.mcpURL, v)
			res, err := c.Call(ctx, "render_report", map[string]any{"title": "Q3", "pages": 2})
			if err != nil || res.TaskID == "" {
				t.Fatalf("%s: render_report as a task: %+v %v", v, res, err)
			}
			var rep struct {
				Title string `json:"title"`
				Pages int    `json:"pages"`
			}
			if err := res.Decode(&rep); err != nil || rep.Title != "Q3" || rep.Pages != 2 {
				t.Fatalf("%s: the report %+v %v (%s)", v, rep, err, res.Raw)
			}
			// Inline: a client without tasks, and a tool that never is one.
			res, err = goClient(t, s.mcpURL, v, client.WithoutTasks()).Call(ctx, "render_report", map[string]any{"title": "inline", "pages": 1})
			if err != nil || res.TaskID != "" || !strings.Contains(res.Text(), "inline") {
				t.Fatalf("%s: render_report inline: %+v %v", v, res, err)
			}
			res, err = c.Call(ctx, "greet", map[string]any{"name": "Ada"})
			if err != nil || res.Text() != "Hello, Ada!" || res.TaskID != "" {
				t.Fatalf("%s: greet: %+v %v", v, res, err)
			}

			// Input through the callback, in a task and inline.
			for _, tasks := range []bool{true, false} {
				var asked atomic.Int64
				opts := []client.Option{confirmer(&asked)}
				if !tasks {
					opts = append(opts, client.WithoutTasks())
				}
				res, err := goClient(t, s.mcpURL, v, opts...).Call(ctx, "confirm_action", map[string]any{"action": "rotate the keys"})
				if err != nil || res.Text() != "Confirmed: rotate the keys" || asked.Load() != 1 || (res.TaskID != "") != tasks {
					t.Fatalf("%s tasks=%v: confirm_action: %+v %v (asked %d)", v, tasks, res, err, asked.Load())
				}
			}

			// The context ends: the task is cancelled on the server.
			task, err := c.Start(ctx, "wait", map[string]any{"ms": 120_000})
			if err != nil || task.ID() == "" {
				t.Fatalf("%s: Start wait: %+v %v", v, task, err)
			}
			short, cancel := context.WithTimeout(ctx, time.Second)
			_, err = task.Wait(short)
			cancel()
			if !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("%s: Wait: %v, want the deadline", v, err)
			}
			if st := statusOf(t, c, task.ID()); st != "cancelled" {
				t.Fatalf("%s: after the deadline the task is %s, want cancelled", v, st)
			}
		}

		// The README's agent, built and run as a user would.
		agent := filepath.Join(t.TempDir(), "go-agent")
		build := exec.Command("go", "build", "-o", agent, "./examples/go-agent")
		build.Dir = harness.RepoRoot()
		if out, err := build.CombinedOutput(); err != nil {
			t.Fatalf("go build ./examples/go-agent: %v\n%s", err, out)
		}
		out, err := exec.CommandContext(ctx, agent, s.mcpURL, "render_report", `{"title":"Agent","pages":1}`).CombinedOutput()
		if err != nil || !strings.Contains(string(out), `\"Agent\": 1 pages rendered`) {
			t.Fatalf("go-agent: %v\n%s", err, out)
		}
	})
}

// server-everything behind `worker --mcp-stdio`, called through the Go
// client on both wires: plain tools as tasks and inline, an elicitation
// answered through the callback, and cancel reaching the child.
func TestGoClientEverything(t *testing.T) {
	t.Parallel()
	onBrokers(t, func(t *testing.T, s *system) {
		node, script := everything(t)
		s.bridgeWorker(t, s.bins.Worker, "worker", nil, "--concurrency", "2", "--mcp-stdio", node+" "+script+" stdio")
		listTools(t, s.mcpURL, "echo", "get-sum", "trigger-elicitation-request", "trigger-long-running-operation")
		ctx := t.Context()
		for _, v := range []string{client.Version2026, client.Version2025} {
			for _, tasks := range []bool{true, false} {
				var asked atomic.Int64
				opts := []client.Option{confirmer(&asked)}
				if !tasks {
					opts = append(opts, client.WithoutTasks())
				}
				c := goClient(t, s.mcpURL, v, opts...)
				res, err := c.Call(ctx, "echo", map[string]any{"message": "from Go"})
				// With tasks, a call that ends within the api's inline wait is
				// answered with its result (adaptive completion): no task id
				// to check for here, only its absence without tasks.
				if err != nil || res.Text() != "Echo: from Go" || (!tasks && res.TaskID != "") {
					t.Fatalf("%s tasks=%v: echo: %+v %v", v, tasks, res, err)
				}
				res, err = c.Call(ctx, "get-sum", map[string]any{"a": 2, "b": 40})
				if err != nil || res.Text() != "The sum of 2 and 40 is 42." {
					t.Fatalf("%s tasks=%v: get-sum: %+v %v", v, tasks, res, err)
				}
				res, err = c.Call(ctx, "trigger-elicitation-request", map[string]any{})
				if err != nil || !strings.Contains(string(res.Raw), "Ada Lovelace") || asked.Load() != 1 || (res.TaskID != "") != tasks {
					t.Fatalf("%s tasks=%v: elicitation: %+v %v (asked %d)", v, tasks, res, err, asked.Load())
				}
			}
			c := goClient(t, s.mcpURL, v)
			task, err := c.Start(ctx, "trigger-long-running-operation", map[string]any{"duration": 60, "steps": 60})
			if err != nil || task.ID() == "" {
				t.Fatalf("%s: Start: %+v %v", v, task, err)
			}
			short, cancel := context.WithTimeout(ctx, 2*time.Second)
			_, err = task.Wait(short)
			cancel()
			if !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("%s: Wait: %v", v, err)
			}
			if st := statusOf(t, c, task.ID()); st != "cancelled" {
				t.Fatalf("%s: the long operation is %s after the deadline, want cancelled", v, st)
			}
		}
	})
}

// The Go client against the tasks extension's reference server
// (panyam/mcpkit examples/tasks-v2, an in-memory server nobody here wrote):
// its fixture tools as tasks and inline, an elicitation answered through
// tasks/update, an MRTR round before a task, and a cancel. The binary is
// built by ../shared/peers/mcpkit/build.sh (see its README); the test takes
// its path from MCPQ_PEER_BIN and is skipped when that is unset.
func TestGoClientReferenceServer(t *testing.T) {
	bin := os.Getenv("MCPQ_PEER_BIN")
	if bin == "" {
		t.Skip("MCPQ_PEER_BIN is unset: build the reference server with ../shared/peers/mcpkit/build.sh and name it there")
	}
	t.Parallel()
	port := harness.FreePort(t)
	p := harness.Start(t, "mcpkit-peer", bin, []string{"MCPKIT_PEER_QUIET=1"}, "--addr", fmt.Sprintf("127.0.0.1:%d", port))
	url := fmt.Sprintf("http://127.0.0.1:%d/mcp", port)
	ctx := t.Context()
	var c *client.Client
	harness.Eventually(t, 30*time.Second, func() (bool, string) {
		c = goClient(t, url, "") // the client finds out what the server speaks
		_, err := c.Tools(ctx)
		return err == nil, fmt.Sprintf("tools/list: %v\n%s", err, p.Output())
	})

	res, err := c.Call(ctx, "greet", map[string]any{"name": "Luca"})
	if err != nil || res.Text() != "Hello, Luca!" || res.TaskID != "" {
		t.Fatalf("greet: %+v %v", res, err)
	}
	res, err = c.Call(ctx, "slow_compute", map[string]any{"seconds": 1, "label": "go"})
	if err != nil || res.TaskID == "" || res.Text() != `Computation "go" completed after 1 seconds. Result: 42.` {
		t.Fatalf("slow_compute as a task: %+v %v", res, err)
	}
	// Inline (no tasks extension declared). The reference server answers a
	// run of a second or more with an empty result when no task may hold
	// it (its handler returns GoAsyncResult outside a task), so inline is
	// the instant run here.
	res, err = goClient(t, url, "", client.WithoutTasks()).Call(ctx, "slow_compute", map[string]any{"seconds": 0, "label": "inline"})
	if err != nil || res.TaskID != "" || res.Text() != `Computation "inline" completed instantly. Result: 42.` {
		t.Fatalf("slow_compute inline: %+v %v", res, err)
	}
	res, err = c.Call(ctx, "failing_job", map[string]any{})
	if err != nil || !res.IsError || res.TaskID == "" {
		t.Fatalf("failing_job: %+v %v, want a completed task with isError", res, err)
	}
	_, err = c.Call(ctx, "protocol_error_job", map[string]any{})
	var e *client.Error
	if !errors.As(err, &e) || e.Code == 0 {
		t.Fatalf("protocol_error_job: %v, want the task's JSON-RPC error", err)
	}

	var asked atomic.Int64
	withInput := goClient(t, url, "", confirmer(&asked))
	res, err = withInput.Call(ctx, "confirm_delete", map[string]any{"filename": "old.txt"})
	if err != nil || res.TaskID == "" || asked.Load() != 1 || res.Text() != "deleted 'old.txt'" {
		t.Fatalf("confirm_delete: %+v %v (asked %d)", res, err, asked.Load())
	}
	res, err = withInput.Call(ctx, "multi_input", map[string]any{})
	if err != nil || res.TaskID == "" || asked.Load() != 3 || res.Text() != `name="Ada Lovelace" confirmed=true` {
		t.Fatalf("multi_input (two requests at once): %+v %v (asked %d)", res, err, asked.Load())
	}
	res, err = withInput.Call(ctx, "test_tool_with_task", map[string]any{})
	if err != nil || res.TaskID == "" || asked.Load() != 4 || res.Text() != "Hello, Ada Lovelace! (computed in task)" {
		t.Fatalf("test_tool_with_task (MRTR, then a task): %+v %v (asked %d)", res, err, asked.Load())
	}

	task, err := c.Start(ctx, "slow_compute", map[string]any{"seconds": 30, "label": "cancel me"})
	if err != nil || task.ID() == "" {
		t.Fatalf("Start: %+v %v", task, err)
	}
	short, cancel := context.WithTimeout(ctx, time.Second)
	_, err = task.Wait(short)
	cancel()
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Wait: %v", err)
	}
	harness.Eventually(t, 10*time.Second, func() (bool, string) {
		st := statusOf(t, c, task.ID())
		return st == "cancelled", "the task is " + st
	})
}
