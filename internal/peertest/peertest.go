// Package peertest runs the reference MCP server that tests measure the
// task gateway against (issue #33): the in-memory 2026-07-28 tasks server of
// panyam/mcpkit (examples/tasks-v2, built as ../shared/peers/README.md
// says). MCPQ_PEER_BIN names the binary (default
// /work/peers/mcpkit-tasks-v2); a test on a machine without it is skipped,
// with the reason. For _test files only.
package peertest

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"
)

// DefaultBin is where the reference server is looked for without
// MCPQ_PEER_BIN.
const DefaultBin = "/work/peers/mcpkit-tasks-v2"

// Bin is the reference server's binary, or a skip of t when it is absent.
func Bin(t testing.TB) string {
	t.Helper()
	bin := os.Getenv("MCPQ_PEER_BIN")
	if bin == "" {
		bin = DefaultBin
	}
	if st, err := os.Stat(bin); err != nil || st.IsDir() || st.Mode()&0o111 == 0 {
		t.Skipf("the reference MCP server %s is not here (build it as ../shared/peers/README.md says, or set MCPQ_PEER_BIN): %v", bin, err)
	}
	return bin
}

// Server is a running reference server; Stop and Start restart it on the
// same address (its tasks are lost: they live in memory).
type Server struct {
	// URL is its MCP endpoint, http://127.0.0.1:PORT/mcp.
	URL  string
	bin  string
	addr string

	mu  sync.Mutex
	cmd *exec.Cmd
}

// Start starts the reference server on a free loopback port for the
// length of t.
func Start(t testing.TB) *Server {
	t.Helper()
	bin := Bin(t)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	_ = l.Close()
	s := &Server{URL: "http://" + addr + "/mcp", bin: bin, addr: addr}
	t.Cleanup(s.Stop)
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	return s
}

// Start (re)starts the server and waits until it accepts connections.
func (s *Server) Start() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd != nil {
		return nil
	}
	cmd := exec.Command(s.bin, "--addr", s.addr)
	cmd.Env = append(os.Environ(), "MCPKIT_PEER_QUIET=1")
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("peertest: start %s: %w", s.bin, err)
	}
	s.cmd = cmd
	deadline := time.Now().Add(30 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", s.addr, time.Second)
		if err == nil {
			_ = c.Close()
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("peertest: %s does not listen on %s: %w", s.bin, s.addr, err)
		}
		time.Sleep(50 * time.Millisecond) // polling a port: the server gives no other sign
	}
}

// Stop kills the server (its tasks are gone).
func (s *Server) Stop() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil {
		return
	}
	_ = s.cmd.Process.Kill()
	_ = s.cmd.Wait()
	s.cmd = nil
}

// Status is the server's status of one of its tasks, asked directly
// (2026-07-28 tasks/get): how a test sees a cancel reach the upstream.
func (s *Server) Status(taskID string) (string, error) {
	body := `{"jsonrpc":"2.0","id":1,"method":"tasks/get","params":{"taskId":` + quote(taskID) + `,"_meta":{` +
		`"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"extensions":{"io.modelcontextprotocol/tasks":{}}}}}}`
	req, err := http.NewRequest(http.MethodPost, s.URL, strings.NewReader(body))
	if err != nil {
		return "", err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("MCP-Protocol-Version", "2026-07-28")
	req.Header.Set("Mcp-Method", "tasks/get")
	req.Header.Set("Mcp-Name", taskID)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	var m struct {
		Result struct {
			Status string `json:"status"`
		} `json:"result"`
		Error *struct {
			Message string `json:"message"`
		} `json:"error"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&m); err != nil {
		return "", fmt.Errorf("peertest: tasks/get %s: HTTP %s: %w", taskID, resp.Status, err)
	}
	if m.Error != nil {
		return "", fmt.Errorf("peertest: tasks/get %s: %s", taskID, m.Error.Message)
	}
	return m.Result.Status, nil
}

func quote(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}
