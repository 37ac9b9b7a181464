// Package harness starts real mcpqueue processes (nats-server, api, workers)
// for integration tests and talks to them the way an MCP client does. It is
// used only by tests.
package harness

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/mcpqueue/mcpqueue/internal/procs"
	"github.com/mcpqueue/mcpqueue/internal/redistest"
)

// Bins are the binaries under test, built once per test binary.
type Bins struct {
	Dir         string
	API         string
	Worker      string
	Conformance string
	NATSServer  string
	// ExternalWorker is examples/external-worker, built in its own module.
	ExternalWorker string
	// GoSDKWorker is examples/gosdk-worker: a go-sdk server behind gosdk.Serve.
	GoSDKWorker string
	// MCPServer is integration/mcpserver: a stdio MCP server whose tools change.
	MCPServer string
}

var (
	buildOnce sync.Once
	built     *Bins
	buildErr  error

	plainOnce sync.Once
	plain     *Bins
	plainErr  error
)

// RepoRoot is the module root.
func RepoRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Clean(filepath.Join(filepath.Dir(file), "..", ".."))
}

// Prefix is tag and the test name (lower case, "/" and "-" as "_"): the
// stream, bucket and key prefix of one test, so tests run side by side.
func Prefix(tag, testName string) string {
	return tag + strings.ToLower(strings.NewReplacer("/", "_", "-", "_").Replace(testName))
}

// Build compiles api, worker, the conformance worker and nats-server (from
// the module version in go.mod) into a temp dir, once; with
// MCPQ_RACE_BINARIES=1 with the race detector.
func Build(t testing.TB) *Bins {
	t.Helper()
	buildOnce.Do(func() { built, buildErr = build(os.Getenv("MCPQ_RACE_BINARIES") == "1", true) })
	if buildErr != nil {
		t.Fatalf("building binaries: %v", buildErr)
	}
	return built
}

// BuildPlain compiles api, worker and nats-server without the race
// detector, whatever MCPQ_RACE_BINARIES says, once: for the tests that
// measure a process's memory or move hundreds of megabytes, which the
// detector's shadow memory and its 5-10x slowdown would distort (the same
// code paths run under -race in the other tests). Bins' other fields are
// empty.
func BuildPlain(t testing.TB) *Bins {
	t.Helper()
	plainOnce.Do(func() { plain, plainErr = build(false, false) })
	if plainErr != nil {
		t.Fatalf("building binaries without -race: %v", plainErr)
	}
	return plain
}

// build compiles the binaries into a new temp dir: all of them, or with
// all false only api, worker and nats-server.
func build(race, all bool) (*Bins, error) {
	dir, err := os.MkdirTemp("", "mcpq-bins-")
	if err != nil {
		return nil, err
	}
	b := &Bins{Dir: dir,
		API: filepath.Join(dir, "api"), Worker: filepath.Join(dir, "worker"),
		NATSServer: filepath.Join(dir, "nats-server")}
	pkgs := map[string]string{b.API: "./cmd/api", b.Worker: "./cmd/worker", b.NATSServer: "github.com/nats-io/nats-server/v2"}
	if all {
		b.Conformance = filepath.Join(dir, "conformance")
		b.ExternalWorker = filepath.Join(dir, "external-worker")
		b.GoSDKWorker = filepath.Join(dir, "gosdk-worker")
		b.MCPServer = filepath.Join(dir, "mcpserver")
		pkgs[b.Conformance] = "./examples/conformance"
		pkgs[b.ExternalWorker] = "examples/external-worker"
		pkgs[b.GoSDKWorker] = "./examples/gosdk-worker"
		pkgs[b.MCPServer] = "./integration/mcpserver"
	}
	for out, pkg := range pkgs {
		args := []string{"build", "-o", out}
		if race {
			args = append(args, "-race")
		}
		dir := RepoRoot()
		if strings.HasPrefix(pkg, "examples/external-worker") {
			// Its own module: built from its directory, as its
			// author would.
			dir, pkg = filepath.Join(dir, pkg), "."
		}
		cmd := exec.Command("go", append(args, pkg)...)
		cmd.Dir = dir
		if msg, err := cmd.CombinedOutput(); err != nil {
			return nil, fmt.Errorf("go build %s: %w\n%s", pkg, err, msg)
		}
	}
	return b, nil
}

// FreePort returns a loopback port that was free a moment ago.
func FreePort(t testing.TB) int {
	t.Helper()
	port, err := procs.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	return port
}

// Proc is a running child process with its output captured.
type Proc struct {
	*procs.Proc
	Name string
	out  *SyncBuffer
}

// SyncBuffer is a buffer safe for concurrent writers: process output, log
// sinks of in-process components (redistest's, which a Redis server's
// output goes to as well).
type SyncBuffer = redistest.SyncBuffer

// Start runs bin with args; it is killed at test cleanup, and its output is
// logged if the test failed.
func Start(t testing.TB, name, bin string, env []string, args ...string) *Proc {
	t.Helper()
	return start(t, "", name, bin, env, nil, args)
}

// StartIn is Start in working directory dir.
func StartIn(t testing.TB, dir, name, bin string, env []string, args ...string) *Proc {
	t.Helper()
	return start(t, dir, name, bin, env, nil, args)
}

// start is StartIn with the output also copied to also (nil: only kept in memory).
func start(t testing.TB, dir, name, bin string, env []string, also io.Writer, args []string) *Proc {
	t.Helper()
	p := &Proc{Name: name, out: &SyncBuffer{}}
	var out io.Writer = p.out
	if also != nil {
		out = io.MultiWriter(p.out, also)
	}
	var err error
	if p.Proc, err = procs.StartIn(dir, bin, env, out, false, args...); err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
	t.Cleanup(func() {
		p.Kill()
		if strings.Contains(p.out.String(), "WARNING: DATA RACE") {
			t.Errorf("%s reported a data race (binaries built with MCPQ_RACE_BINARIES=1)", name)
		}
		if t.Failed() {
			t.Logf("---- %s output ----\n%s", name, tail(p.out.String(), 8000))
		}
	})
	return p
}

func tail(s string, n int) string {
	if len(s) > n {
		return "…" + s[len(s)-n:]
	}
	return s
}

// Output is everything the process printed so far.
func (p *Proc) Output() string { return p.out.String() }

// Stop sends SIGTERM and waits up to d for a clean exit; it reports the exit error.
func (p *Proc) Stop(d time.Duration) error {
	if !p.Proc.Stop(d) {
		return fmt.Errorf("%s did not exit within %s after SIGTERM", p.Name, d)
	}
	return p.Err()
}

// WaitOutput polls the output until it contains s or the deadline passes.
func (p *Proc) WaitOutput(t testing.TB, s string, within time.Duration) {
	t.Helper()
	Eventually(t, within, func() (bool, string) {
		return strings.Contains(p.Output(), s), fmt.Sprintf("%s output never contained %q", p.Name, s)
	})
}

// WaitLine polls the output until one line contains every one of parts or
// the deadline passes.
func (p *Proc) WaitLine(t testing.TB, within time.Duration, parts ...string) {
	t.Helper()
	Eventually(t, within, func() (bool, string) {
		for _, line := range strings.Split(p.Output(), "\n") {
			if !slices.ContainsFunc(parts, func(s string) bool { return !strings.Contains(line, s) }) {
				return true, ""
			}
		}
		return false, fmt.Sprintf("%s output never had a line with all of %q", p.Name, parts)
	})
}

// Eventually polls cond every 20ms until it holds or within passes.
func Eventually(t testing.TB, within time.Duration, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		ok, why := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("condition not met within %s: %s", within, why)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Backend is how api and worker processes reach their broker: the flags
// that select and address it.
type Backend struct {
	Name string // "nats" or "asynq"
	Args []string
	// Redis makes a client of the asynq backend's Redis for reading the
	// store (nil: one of the --redis URL).
	Redis func() *redis.Client
	// NATS is the nats-server process (nats backend only).
	NATS *Proc
	// Home is the working directory of an all-in-one api (AllInOne), whose
	// data/ holds its embedded NATS's key; NATSURL that NATS.
	Home, NATSURL string
}

// NATS starts a nats-server process with JetStream and file storage.
func NATS(t testing.TB, b *Bins) (url string, p *Proc) {
	t.Helper()
	port := FreePort(t)
	dir := t.TempDir()
	p = Start(t, "nats-server", b.NATSServer, nil, "-a", "127.0.0.1", "-p", fmt.Sprint(port), "-js", "-sd", dir)
	p.WaitOutput(t, "Server is ready", 20*time.Second)
	return fmt.Sprintf("nats://127.0.0.1:%d", port), p
}

// RedisURL is the Redis the asynq backend tests use: MCPQ_TEST_REDIS, or
// the private redis-server this test binary starts on first use
// (redistest.Addr).
func RedisURL(t testing.TB) string {
	t.Helper()
	return redistest.URL(t)
}

// NewBackend starts what backend name needs (a nats-server for "nats";
// "asynq" uses the Redis of RedisURL) and removes the test's Redis keys, all
// named by prefix, when the test ends.
func NewBackend(t testing.TB, b *Bins, name, prefix string) Backend {
	t.Helper()
	switch name {
	case "nats":
		url, p := NATS(t, b)
		return Backend{Name: name, Args: []string{"--nats", url}, NATS: p}
	case "asynq":
		url := RedisURL(t)
		t.Cleanup(func() { dropRedisKeys(t, url, prefix) })
		return Backend{Name: name, Args: []string{"--broker", "asynq", "--redis", url}}
	}
	t.Fatalf("unknown backend %q", name)
	return Backend{}
}

// dropRedisKeys deletes the keys a system with this prefix made: its own
// ("<prefix>:…") and its tools' Asynq queues' ("asynq:{<prefix>.tool.…}:…").
func dropRedisKeys(t testing.TB, url, prefix string) {
	opt, err := redis.ParseURL(url)
	if err != nil {
		return
	}
	rdb := redis.NewClient(opt)
	defer rdb.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, pattern := range []string{prefix + ":*", "asynq:{" + prefix + ".*"} {
		iter := rdb.Scan(ctx, 0, pattern, 500).Iterator()
		var keys []string
		for iter.Next(ctx) {
			keys = append(keys, iter.Val())
		}
		if len(keys) > 0 {
			_ = rdb.Del(ctx, keys...).Err()
		}
	}
	queues, _ := rdb.SMembers(ctx, "asynq:queues").Result()
	for _, q := range queues {
		if strings.HasPrefix(q, prefix+".") {
			_ = rdb.SRem(ctx, "asynq:queues", q).Err()
		}
	}
}

// API starts the api on be and waits until /healthz answers.
func API(t testing.TB, b *Bins, be Backend, prefix string, extra ...string) (mcpURL string, p *Proc) {
	t.Helper()
	return APILogged(t, b, be, prefix, "api", "", nil, extra...)
}

// Worker starts a worker binary (b.Worker or b.Conformance) on be and waits until it runs.
func Worker(t testing.TB, bin, name string, be Backend, prefix string, extra ...string) *Proc {
	t.Helper()
	args := append(append([]string{}, be.Args...), "--prefix", prefix, "--log-json")
	p := Start(t, name, bin, nil, append(args, extra...)...)
	p.WaitOutput(t, "worker running", 20*time.Second)
	return p
}

// Client speaks the 2026-07-28 wire to one endpoint.
type Client struct {
	URL   string
	Tasks bool // declare the tasks extension
	HTTP  *http.Client
	mu    sync.Mutex
	id    int

	// Meta are more _meta entries every request carries (a scheduled
	// call's io.mcpqueue/not-before).
	Meta map[string]any
}

// NewClient returns a client; tasks says whether it declares the extension.
func NewClient(url string, tasks bool) *Client {
	return &Client{URL: url, Tasks: tasks, HTTP: &http.Client{Timeout: 3 * time.Minute}}
}

// RPCError is an error answer.
type RPCError struct {
	Code    int             `json:"code"`
	Message string          `json:"message"`
	Data    json.RawMessage `json:"data"`
	Status  int             `json:"-"`
}

func (e *RPCError) Error() string {
	return fmt.Sprintf("rpc %d (HTTP %d): %s", e.Code, e.Status, e.Message)
}

// Call sends one request and decodes the result into out (if non-nil).
func (c *Client) Call(ctx context.Context, method string, params map[string]any, out any) error {
	resp, err := c.HTTP.Do(c.Request(ctx, method, params))
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		raw = procs.LastSSEData(raw)
	}
	var env struct {
		Result json.RawMessage `json:"result"`
		Error  *RPCError       `json:"error"`
	}
	if err := json.Unmarshal(raw, &env); err != nil {
		return fmt.Errorf("HTTP %d: undecodable body %q: %w", resp.StatusCode, raw, err)
	}
	if env.Error != nil {
		env.Error.Status = resp.StatusCode
		return env.Error
	}
	if out != nil {
		return json.Unmarshal(env.Result, out)
	}
	return nil
}

// Request is the HTTP request Call sends, for a test that reads the reply
// itself.
func (c *Client) Request(ctx context.Context, method string, params map[string]any) *http.Request {
	c.mu.Lock()
	c.id++
	id := c.id
	c.mu.Unlock()
	if params == nil {
		params = map[string]any{}
	}
	caps := map[string]any{"elicitation": map[string]any{}, "sampling": map[string]any{}}
	if c.Tasks {
		caps["extensions"] = map[string]any{"io.modelcontextprotocol/tasks": map[string]any{}}
	}
	meta := map[string]any{
		"io.modelcontextprotocol/protocolVersion":    "2026-07-28",
		"io.modelcontextprotocol/clientCapabilities": caps,
	}
	for k, v := range c.Meta {
		meta[k] = v
	}
	params["_meta"] = meta
	body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": id, "method": method, "params": params})
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, c.URL, bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("MCP-Protocol-Version", "2026-07-28")
	req.Header.Set("Mcp-Method", method)
	if n, ok := params["name"].(string); ok {
		req.Header.Set("Mcp-Name", n)
	}
	if n, ok := params["taskId"].(string); ok {
		req.Header.Set("Mcp-Name", n)
	}
	if n, ok := params["uri"].(string); ok && method == "resources/read" {
		req.Header.Set("Mcp-Name", n)
	}
	return req
}

// Task is the 2026-07-28 view of a task.
type Task struct {
	ResultType    string          `json:"resultType"`
	TaskID        string          `json:"taskId"`
	Status        string          `json:"status"`
	StatusMessage string          `json:"statusMessage"`
	Result        json.RawMessage `json:"result"`
	Error         *RPCError       `json:"error"`
}

// CallTool calls a tool and returns the raw result.
func (c *Client) CallTool(ctx context.Context, name string, args map[string]any) (map[string]json.RawMessage, error) {
	var out map[string]json.RawMessage
	err := c.Call(ctx, "tools/call", map[string]any{"name": name, "arguments": args}, &out)
	return out, err
}

// StartTask calls a tool and expects a task handle.
func (c *Client) StartTask(t testing.TB, name string, args map[string]any) string {
	t.Helper()
	var out Task
	if err := c.Call(context.Background(), "tools/call", map[string]any{"name": name, "arguments": args}, &out); err != nil {
		t.Fatalf("tools/call %s: %v", name, err)
	}
	if out.ResultType != "task" || out.TaskID == "" {
		t.Fatalf("tools/call %s: want a task handle, got %+v", name, out)
	}
	return out.TaskID
}

// GetTask calls tasks/get.
func (c *Client) GetTask(ctx context.Context, id string) (*Task, error) {
	var out Task
	err := c.Call(ctx, "tasks/get", map[string]any{"taskId": id}, &out)
	return &out, err
}

// WaitStatus polls tasks/get until the task reaches one of statuses.
func (c *Client) WaitStatus(t testing.TB, id string, within time.Duration, statuses ...string) *Task {
	t.Helper()
	var last *Task
	Eventually(t, within, func() (bool, string) {
		tk, err := c.GetTask(context.Background(), id)
		if err != nil {
			return false, err.Error()
		}
		last = tk
		for _, s := range statuses {
			if tk.Status == s {
				return true, ""
			}
		}
		return false, fmt.Sprintf("task %s is %s (%s), want %v", id, tk.Status, tk.StatusMessage, statuses)
	})
	return last
}
