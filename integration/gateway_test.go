package integration

// The task gateway: `worker --mcp-url` relays a remote Streamable-HTTP MCP
// server (server-everything in its streamableHttp mode, pinned in
// integration/node), and --mcp-config's "headers" reach the upstream
// without reaching the worker's log.

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpqueue/mcpqueue/integration/harness"
)

// gatewayNode is everything's node and script, or a skip where node is not
// installed and npm cannot install it.
func gatewayNode(t *testing.T) (node, script string) {
	t.Helper()
	if why := officialNodeInstalled(officialNodeDir()); why != "" {
		if _, err := exec.LookPath("npm"); err != nil {
			t.Skipf("node for server-everything is missing (%s) and there is no npm to install it", why)
		}
	}
	return everything(t)
}

// everythingHTTP starts server-everything's Streamable-HTTP transport on a
// free loopback port and returns its MCP endpoint.
func everythingHTTP(t *testing.T, node, script string) (string, *harness.Proc) {
	t.Helper()
	port := harness.FreePort(t)
	p := harness.Start(t, "everything-http", node, []string{fmt.Sprintf("PORT=%d", port)}, script, "streamableHttp")
	p.WaitOutput(t, fmt.Sprintf("listening on port %d", port), 90*time.Second)
	return fmt.Sprintf("http://127.0.0.1:%d/mcp", port), p
}

func TestBridgeGatewayEverythingOverHTTP(t *testing.T) {
	t.Parallel()
	onBrokers(t, func(t *testing.T, s *system) {
		node, script := gatewayNode(t)
		url, upstream := everythingHTTP(t, node, script)
		s.bridgeWorker(t, s.bins.Worker, "worker", nil, "--concurrency", "2", "--mcp-url", url)

		tools := listTools(t, s.mcpURL, "echo", "get-sum", "trigger-long-running-operation")
		if in := string(tools["echo"]["inputSchema"]); !strings.Contains(in, `"message"`) {
			t.Fatalf("echo's inputSchema %s", in)
		}
		// The sessions are the server's Streamable-HTTP sessions.
		upstream.WaitOutput(t, "Session initialized with ID", 10*time.Second)

		c := harness.NewClient(s.mcpURL, true)
		id := c.StartTask(t, "echo", map[string]any{"message": "through the gateway"})
		if tk := c.WaitStatus(t, id, 60*time.Second, "completed", "failed", "cancelled"); tk.Status != "completed" ||
			!strings.Contains(resultText(t, tk.Result), "Echo: through the gateway") {
			t.Fatalf("echo ended %s: %+v", tk.Status, tk)
		}

		// A long operation's progress (SSE events of the POST) shows on tasks/get.
		id = c.StartTask(t, "trigger-long-running-operation", map[string]any{"duration": 2, "steps": 4})
		last, seen := progressUntilDone(t, c, id)
		if last.Status != "completed" || !strings.Contains(resultText(t, last.Result), "Long running operation completed") {
			t.Fatalf("long operation ended %s: %+v", last.Status, last)
		}
		if len(seen) < 2 || !seen["progress 4/4"] {
			t.Fatalf("tasks/get showed progress %v, want several steps up to progress 4/4", seen)
		}
	})
}

// progressUntilDone polls task id until it ends: the last tasks/get and
// the "progress …" status messages seen on the way.
func progressUntilDone(t *testing.T, c *harness.Client, id string) (*harness.Task, map[string]bool) {
	t.Helper()
	last, all := statusUntilDone(t, c, id)
	seen := map[string]bool{}
	for m := range all {
		if strings.HasPrefix(m, "progress ") {
			seen[m] = true
		}
	}
	return last, seen
}

func TestBridgeGatewayBearerHeader(t *testing.T) {
	t.Parallel()
	const token = "gw-bearer-4f1c9e" // in the worker's environment only
	var withToken, without atomic.Int64
	srv := mcp.NewServer(&mcp.Implementation{Name: "gated", Version: "1"}, nil)
	mcp.AddTool(srv, &mcp.Tool{Name: "gated-hello"}, func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, any, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "hello, bearer"}}}, nil, nil
	})
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil)
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer "+token {
			without.Add(1)
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		withToken.Add(1)
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(up.Close)

	onBrokers(t, func(t *testing.T, s *system) {
		cfg := filepath.Join(t.TempDir(), "mcp.json")
		conf, _ := json.Marshal(map[string]any{"mcpServers": map[string]any{
			"gated": map[string]any{"url": up.URL + "/mcp", "headers": map[string]string{"Authorization": "Bearer ${GW_TEST_TOKEN}"}},
		}})
		if err := os.WriteFile(cfg, conf, 0o600); err != nil {
			t.Fatal(err)
		}
		w := s.bridgeWorker(t, s.bins.Worker, "worker", []string{"GW_TEST_TOKEN=" + token}, "--log-level", "debug", "--mcp-config", cfg)
		listTools(t, s.mcpURL, "gated-hello")
		c := harness.NewClient(s.mcpURL, true)
		id := c.StartTask(t, "gated-hello", map[string]any{})
		if tk := c.WaitStatus(t, id, 60*time.Second, "completed", "failed", "cancelled"); tk.Status != "completed" || !strings.Contains(resultText(t, tk.Result), "hello, bearer") {
			t.Fatalf("gated-hello ended %s: %+v", tk.Status, tk)
		}
		if withToken.Load() == 0 || without.Load() != 0 {
			t.Fatalf("upstream requests: %d with the bearer token, %d without", withToken.Load(), without.Load())
		}
		out := w.Output()
		if strings.Contains(out, token) || !strings.Contains(out, `"headers":["Authorization"]`) {
			t.Fatalf("the worker's log shows the token (or not even the header's name):\n%s", out)
		}
	})
}
