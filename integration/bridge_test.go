package integration

// Bring your MCP server: @modelcontextprotocol/server-everything (pinned in
// integration/node) behind `worker --mcp-stdio` / `--mcp-config`, and a
// go-sdk server behind gosdk.Serve (examples/gosdk-worker), driven through a
// real api by the official clients of both protocol revisions.

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mcpqueue/mcpqueue/integration/harness"
)

// everything is how to start server-everything: the pinned Node 22 and the
// package's entry point (stdio transport).
func everything(t *testing.T) (node, script string) {
	t.Helper()
	node = officialNode(t)
	script = filepath.Join(officialNodeDir(), "node_modules", "@modelcontextprotocol", "server-everything", "dist", "index.js")
	if _, err := os.Stat(script); err != nil {
		t.Fatalf("server-everything not installed: %v", err)
	}
	return node, script
}

// bridgeWorker starts a worker binary whose tools come from MCP servers
// (args: --mcp-stdio / --mcp-config …) with env added to the test's, and
// waits until it runs.
func (s *system) bridgeWorker(t *testing.T, bin, name string, env []string, args ...string) *harness.Proc {
	t.Helper()
	all := append(append([]string{}, s.be.Args...), "--prefix", s.prefix, "--log-json")
	p := harness.Start(t, name, bin, env, append(all, args...)...)
	// Node may take a while to start on a loaded machine.
	p.WaitOutput(t, "worker running", 90*time.Second)
	return p
}

// listTools is tools/list through the Go client, by name, once it lists
// every one of want (a worker's catalog entries reach an api's cache
// through the store's change feed: soon, not at once).
func listTools(t *testing.T, mcpURL string, want ...string) map[string]map[string]json.RawMessage {
	t.Helper()
	var byName map[string]map[string]json.RawMessage
	harness.Eventually(t, 30*time.Second, func() (bool, string) {
		var out struct {
			Tools []map[string]json.RawMessage `json:"tools"`
		}
		if err := harness.NewClient(mcpURL, true).Call(context.Background(), "tools/list", nil, &out); err != nil {
			return false, "tools/list: " + err.Error()
		}
		byName = map[string]map[string]json.RawMessage{}
		for _, tl := range out.Tools {
			var n string
			_ = json.Unmarshal(tl["name"], &n)
			byName[n] = tl
		}
		for _, w := range want {
			if byName[w] == nil {
				return false, fmt.Sprintf("tools/list lacks %s (has %d tools)", w, len(byName))
			}
		}
		return true, ""
	})
	return byName
}

// Acceptance 1: server-everything behind `worker --mcp-stdio`, with both
// official clients. The command is wrapped in a tee of the child's standard
// input, so the test reads what the child received.
func TestBridgeEverythingWithOfficialClients(t *testing.T) {
	t.Parallel()
	onBrokers(t, func(t *testing.T, s *system) {
		node, script := everything(t)
		received := filepath.Join(t.TempDir(), "child-stdin.log")
		cmd := fmt.Sprintf(`/bin/sh -c 'tee -a %s | exec %s %s stdio'`, received, node, script)
		s.bridgeWorker(t, s.bins.Worker, "worker", nil, "--concurrency", "2", "--mcp-stdio", cmd)

		tools := listTools(t, s.mcpURL, "echo", "get-sum", "trigger-long-running-operation", "trigger-elicitation-request", "get-env", "get-structured-content")
		if in := string(tools["echo"]["inputSchema"]); !strings.Contains(in, `"message"`) {
			t.Fatalf("echo's inputSchema %s", in)
		}
		if a := string(tools["echo"]["annotations"]); !strings.Contains(a, `"readOnlyHint":true`) {
			t.Fatalf("echo's annotations %s", a)
		}
		if out := string(tools["get-structured-content"]["outputSchema"]); !strings.Contains(out, "temperature") {
			t.Fatalf("get-structured-content's outputSchema %s", out)
		}
		// The server declares 2025-11-25 tasks: its task-required tool is
		// relayed and run as its task (issue #33, bridge/legacytask.go).
		if _, demo := tools["simulate-research-query"]; !demo {
			t.Fatal("simulate-research-query (taskSupport required, the server declares tasks) was not relayed")
		}

		// Prompts are relayed too (always inline).
		var prompts struct {
			Prompts []struct{ Name string } `json:"prompts"`
		}
		ctx := context.Background()
		if err := harness.NewClient(s.mcpURL, true).Call(ctx, "prompts/list", nil, &prompts); err != nil || !strings.Contains(fmt.Sprint(prompts), "{args-prompt}") {
			t.Fatalf("prompts/list: %+v %v", prompts, err)
		}
		var prompt struct {
			Messages []struct {
				Content struct {
					Text string `json:"text"`
				} `json:"content"`
			} `json:"messages"`
		}
		if err := harness.NewClient(s.mcpURL, true).Call(ctx, "prompts/get", map[string]any{"name": "args-prompt", "arguments": map[string]any{"city": "Paris", "state": "Texas"}}, &prompt); err != nil ||
			len(prompt.Messages) != 1 || prompt.Messages[0].Content.Text != "What's weather in Paris, Texas?" {
			t.Fatalf("prompts/get args-prompt: %+v %v", prompt, err)
		}

		// 2026-07-28 official client: plain tools complete as tasks.
		e := runOfficialClient(t, s.mcpURL, "list-and-settle", "echo", `{"message":"from the queue"}`, "Echo: from the queue")
		g := runOfficialClient(t, s.mcpURL, "list-and-settle", "get-sum", `{"a":2,"b":40}`, "The sum of 2 and 40 is 42.")
		if e.Status != "completed" || g.Status != "completed" {
			t.Fatalf("summaries %+v %+v", e, g)
		}

		// A long operation's progress notifications show on tasks/get.
		c := harness.NewClient(s.mcpURL, true)
		id := c.StartTask(t, "trigger-long-running-operation", map[string]any{"duration": 2, "steps": 4})
		last, seen := progressUntilDone(t, c, id)
		if last.Status != "completed" || !strings.Contains(resultText(t, last.Result), "Long running operation completed") {
			t.Fatalf("long operation ended %s: %+v", last.Status, last)
		}
		if len(seen) < 2 || !seen["progress 4/4"] {
			t.Fatalf("tasks/get showed progress %v, want several steps up to progress 4/4", seen)
		}

		// An elicitation: input_required, answered with tasks/update.
		el := runOfficialClient(t, s.mcpURL, "elicit", "trigger-elicitation-request", `{}`,
			"User provided the requested information", `{"action":"accept","content":{"name":"Ada Lovelace"}}`)
		if el.Status != "completed" || el.InputRequests == nil || *el.InputRequests != 1 || !slices.Contains(el.Statuses, "input_required") {
			t.Fatalf("elicitation summary %+v", el)
		}
		if tk := taskFromGo(t, s.mcpURL, el.TaskID); !strings.Contains(string(tk.Result), "Name: Ada Lovelace") {
			t.Fatalf("the server did not get the answer: %s", tk.Result)
		}

		// tasks/cancel reaches the child as notifications/cancelled.
		cn := runOfficialClient(t, s.mcpURL, "cancel", "trigger-long-running-operation", `{"duration":60,"steps":60}`, "progress ")
		if cn.Status != "cancelled" || cn.ElapsedMs >= 60000 {
			t.Fatalf("cancel summary %+v", cn)
		}
		harness.Eventually(t, 10*time.Second, func() (bool, string) {
			b, _ := os.ReadFile(received)
			for _, line := range strings.Split(string(b), "\n") {
				if strings.Contains(line, `"method":"notifications/cancelled"`) && strings.Contains(line, `"reason":"consumer: task cancelled"`) {
					return true, ""
				}
			}
			return false, "the child never received notifications/cancelled"
		})

		// 2025-11-25 official client, same front end, same tools.
		var v1 clientSummary
		runNodeClient(t, "sdk-v1-tasks.mjs", s.mcpURL, "stream-result", []string{"echo", `{"message":"legacy"}`, "Echo: legacy"}, &v1)
		runNodeClient(t, "sdk-v1-tasks.mjs", s.mcpURL, "stream-result", []string{"get-sum", `{"a":1,"b":2}`, "The sum of 1 and 2 is 3."}, &v1)
		runNodeClient(t, "sdk-v1-tasks.mjs", s.mcpURL, "stream-result", []string{"trigger-long-running-operation", `{"duration":1,"steps":2}`, "Long running operation completed"}, &v1)
		runNodeClient(t, "sdk-v1-tasks.mjs", s.mcpURL, "elicit", []string{"trigger-elicitation-request", `{}`,
			`{"action":"accept","content":{"name":"Grace Hopper"}}`, "User provided the requested information"}, &v1)
		runNodeClient(t, "sdk-v1-tasks.mjs", s.mcpURL, "cancel", []string{"trigger-long-running-operation", `{"duration":60,"steps":60}`, "progress "}, &v1)
		if v1.Status != "cancelled" {
			t.Fatalf("2025-11-25 cancel summary %+v", v1)
		}
	})
}

// Acceptance 2 and 4: kill -9 of the child mid-call ends the task — done on
// a retry, or failed naming the server and its exit status after the last
// attempt — and the child's environment holds only what the configuration
// names (the worker's own secrets do not reach it).
func TestBridgeChildKilledAndEnvironment(t *testing.T) {
	t.Parallel()
	onBrokers(t, func(t *testing.T, s *system) {
		node, script := everything(t)
		cfg := filepath.Join(t.TempDir(), "mcp.json")
		conf, _ := json.Marshal(map[string]any{"mcpServers": map[string]any{
			"everything": map[string]any{
				"command": node, "args": []string{script, "stdio"}, "env": map[string]string{"MCPQ_BRIDGE_MARK": "configured"},
			},
			// The same server again, under a prefix, with a short timeout.
			"hasty": map[string]any{"command": node, "args": []string{script, "stdio"}, "prefix": "hasty.", "timeout": "1500ms"},
		}})
		if err := os.WriteFile(cfg, conf, 0o600); err != nil {
			t.Fatal(err)
		}
		w := s.bridgeWorker(t, s.bins.Worker, "worker", []string{"MCPQ_STATE_KEY=the-workers-secret", "MCPQ_BRIDGE_WORKER_ONLY=1"},
			"--concurrency", "1", "--max-attempts", "2", "--mcp-config", cfg)
		c := harness.NewClient(s.mcpURL, true)
		listTools(t, s.mcpURL, "get-env", "trigger-long-running-operation", "hasty.trigger-long-running-operation")

		// The environment, read back through get-env (inline call).
		res, err := harness.NewClient(s.mcpURL, false).CallTool(context.Background(), "get-env", map[string]any{})
		if err != nil {
			t.Fatalf("get-env: %v", err)
		}
		env := childEnv(t, res)
		keys := make([]string, 0, len(env))
		for k := range env {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		if !slices.Equal(keys, []string{"MCPQ_BRIDGE_MARK", "PATH"}) || env["MCPQ_BRIDGE_MARK"] != "configured" || env["PATH"] != "/usr/local/bin:/usr/bin:/bin" {
			t.Fatalf("the child's environment is %v", env)
		}

		// A client without tasks gets the elicitation inline (MRTR) and
		// retries with the answer: the call runs again and completes.
		inline := harness.NewClient(s.mcpURL, false)
		first, err := inline.CallTool(context.Background(), "trigger-elicitation-request", map[string]any{})
		if err != nil || string(first["resultType"]) != `"input_required"` {
			t.Fatalf("inline elicitation: %v %v", first, err)
		}
		var reqs map[string]struct {
			Method string `json:"method"`
		}
		_ = json.Unmarshal(first["inputRequests"], &reqs)
		if len(reqs) != 1 || reqs["input_1"].Method != "elicitation/create" {
			t.Fatalf("inline input requests %s", first["inputRequests"])
		}
		var done map[string]json.RawMessage
		if err := inline.Call(context.Background(), "tools/call", map[string]any{"name": "trigger-elicitation-request", "arguments": map[string]any{},
			"inputResponses": map[string]any{"input_1": map[string]any{"action": "accept", "content": map[string]any{"name": "Inline"}}},
			"requestState":   json.RawMessage(first["requestState"])}, &done); err != nil {
			t.Fatalf("inline retry: %v", err)
		}
		if raw, _ := json.Marshal(done); !strings.Contains(string(raw), "Name: Inline") {
			t.Fatalf("inline retry result %s", raw)
		}

		// The tool's timeout cancels the call on the child and fails the task.
		id := c.StartTask(t, "hasty.trigger-long-running-operation", map[string]any{"duration": 30, "steps": 30})
		if tk := c.WaitStatus(t, id, 60*time.Second, "failed", "completed", "cancelled"); tk.Status != "failed" || !strings.Contains(tk.Error.Message, "timed out after 1.5s") {
			t.Fatalf("a call past its timeout ended %s: %+v", tk.Status, tk.Error)
		}
		w.WaitOutput(t, `"server":"hasty","request"`, 10*time.Second) // sent notifications/cancelled
		if !strings.Contains(w.Output(), `"reason":"consumer: tool timed out"`) {
			t.Fatal("no notifications/cancelled for the timed-out call")
		}

		// kill -9 of the child while it runs the call: a retry completes it.
		id = c.StartTask(t, "trigger-long-running-operation", map[string]any{"duration": 2, "steps": 2})
		pid := runningChild(t, c, w, "everything", id, 0)
		killed := time.Now()
		if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
			t.Fatalf("kill -9 %d: %v", pid, err)
		}
		var retried bool
		var tk *harness.Task
		harness.Eventually(t, 90*time.Second, func() (bool, string) {
			var err error
			if tk, err = c.GetTask(context.Background(), id); err != nil {
				return false, err.Error()
			}
			retried = retried || strings.Contains(tk.StatusMessage, fmt.Sprintf(`attempt 1 of 2 failed, retrying: mcp server "everything": pid %d exited: signal: killed`, pid))
			return tk.Status == "completed" || tk.Status == "failed" || tk.Status == "cancelled", tk.Status + ": " + tk.StatusMessage
		})
		if tk.Status != "completed" || !retried {
			t.Fatalf("after kill -9 the task ended %s (retry message seen: %v): %+v", tk.Status, retried, tk)
		}
		t.Logf("kill -9 to completed on a fresh child: %s", time.Since(killed).Round(time.Millisecond))

		// Killed on every attempt: failed, naming the server and how it ended.
		id = c.StartTask(t, "trigger-long-running-operation", map[string]any{"duration": 30, "steps": 30})
		one := runningChild(t, c, w, "everything", id, 0)
		_ = syscall.Kill(one, syscall.SIGKILL)
		second := runningChild(t, c, w, "everything", id, one)
		_ = syscall.Kill(second, syscall.SIGKILL)
		tk = c.WaitStatus(t, id, 60*time.Second, "failed", "completed", "cancelled")
		want := fmt.Sprintf(`mcp server "everything": pid %d exited: signal: killed`, second)
		if tk.Status != "failed" || tk.Error == nil || !strings.Contains(tk.Error.Message, want) || !strings.Contains(tk.Error.Message, "attempt 2 of 2") {
			t.Fatalf("killed twice the task ended %s: %+v (error %+v), want failed with %q", tk.Status, tk, tk.Error, want)
		}
	})
}

// childEnv decodes get-env's text (the child's process.env as JSON).
func childEnv(t *testing.T, res map[string]json.RawMessage) map[string]string {
	t.Helper()
	raw, _ := json.Marshal(res)
	var env map[string]string
	if err := json.Unmarshal([]byte(resultText(t, raw)), &env); err != nil {
		t.Fatalf("get-env text is not a JSON object: %v (%s)", err, raw)
	}
	return env
}

// runningChild waits until task id reports progress on a child other than
// not, and returns that child's pid: the newest one the worker (one
// session per server) started for server.
func runningChild(t *testing.T, c *harness.Client, w *harness.Proc, server, id string, not int) int {
	startedPid := regexp.MustCompile(`"server":"` + server + `","pid":(\d+),[^\n]*"message":"mcp server started"`)
	t.Helper()
	var pid int
	harness.Eventually(t, 90*time.Second, func() (bool, string) {
		tk, err := c.GetTask(context.Background(), id)
		if err != nil {
			return false, err.Error()
		}
		if !strings.HasPrefix(tk.StatusMessage, "progress ") {
			return false, "no progress yet: " + tk.Status + " " + tk.StatusMessage
		}
		m := startedPid.FindAllStringSubmatch(w.Output(), -1)
		if len(m) == 0 {
			return false, "no child started"
		}
		pid, _ = strconv.Atoi(m[len(m)-1][1])
		return pid != not, fmt.Sprintf("still child %d", pid)
	})
	return pid
}

// Acceptance 3: a go-sdk server's typed tool that calls req.Session.Elicit
// runs as a task through api, goes input_required and completes.
func TestGoSDKServerElicitsInATask(t *testing.T) {
	t.Parallel()
	onBrokers(t, func(t *testing.T, s *system) {
		officialNode(t)
		s.bridgeWorker(t, s.bins.GoSDKWorker, "gosdk-worker", nil)
		tools := listTools(t, s.mcpURL, "delete_file")
		if d := tools["delete_file"]; d == nil || !strings.Contains(string(d["outputSchema"]), `"deleted"`) || !strings.Contains(string(d["annotations"]), `"destructiveHint":true`) {
			t.Fatalf("delete_file as listed: %v", d)
		}
		file := fmt.Sprintf("notes-%d.txt", time.Now().UnixNano())
		el := runOfficialClient(t, s.mcpURL, "elicit", "delete_file", fmt.Sprintf(`{"filename":%q}`, file), "Deleted "+file)
		if el.Status != "completed" || !slices.Contains(el.Statuses, "input_required") || el.InputRequests == nil || *el.InputRequests != 1 {
			t.Fatalf("elicit summary %+v", el)
		}
		if tk := taskFromGo(t, s.mcpURL, el.TaskID); tk.Status != "completed" || !strings.Contains(string(tk.Result), `"structuredContent":{"deleted":"`+file+`"}`) {
			t.Fatalf("tasks/get from Go: %+v %s", tk, tk.Result)
		}
		var v1 clientSummary
		runNodeClient(t, "sdk-v1-tasks.mjs", s.mcpURL, "elicit", []string{"delete_file", fmt.Sprintf(`{"filename":%q}`, file),
			`{"action":"accept","content":{"confirm":true}}`, "Deleted " + file}, &v1)
	})
}

// A server's tools/list_changed takes effect in the running worker: a tool
// the server adds is listed by api and runs as a task; one it removes
// leaves tools/list and its calls get the unknown-tool error.
func TestBridgeToolListChanges(t *testing.T) {
	t.Parallel()
	onBrokers(t, func(t *testing.T, s *system) {
		s.bridgeWorker(t, s.bins.Worker, "worker", nil, "--mcp-stdio", s.bins.MCPServer)
		listTools(t, s.mcpURL, "grow", "prune")
		c := harness.NewClient(s.mcpURL, true)
		ctx := context.Background()
		if tk := c.WaitStatus(t, c.StartTask(t, "grow", map[string]any{"name": "sprout"}), 30*time.Second, "completed", "failed"); tk.Status != "completed" {
			t.Fatalf("grow ended %s: %+v", tk.Status, tk.Error)
		}
		listTools(t, s.mcpURL, "sprout")
		tk := c.WaitStatus(t, c.StartTask(t, "sprout", map[string]any{}), 30*time.Second, "completed", "failed")
		if tk.Status != "completed" || resultText(t, tk.Result) != "grown sprout" {
			t.Fatalf("sprout ended %s: %+v", tk.Status, tk)
		}

		if tk := c.WaitStatus(t, c.StartTask(t, "prune", map[string]any{"name": "sprout"}), 30*time.Second, "completed", "failed"); tk.Status != "completed" {
			t.Fatalf("prune ended %s: %+v", tk.Status, tk.Error)
		}
		harness.Eventually(t, 30*time.Second, func() (bool, string) {
			if listTools(t, s.mcpURL)["sprout"] != nil {
				return false, "sprout still in tools/list"
			}
			_, err := c.CallTool(ctx, "sprout", map[string]any{})
			return err != nil && strings.Contains(err.Error(), "Unknown tool"), fmt.Sprintf("calling the removed tool: %v", err)
		})
	})
}
