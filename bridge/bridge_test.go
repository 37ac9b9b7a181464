package bridge

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/rs/zerolog"

	"github.com/mcpqueue/mcpqueue/consumer"
	"github.com/mcpqueue/mcpqueue/internal/testenv"
)

// The test binary doubles as the MCP server under test: a go-sdk server on
// stdio (a real child process speaking the stdio transport), started with
// MCPQ_BRIDGE_TEST_SERVER=1.
func TestMain(m *testing.M) {
	if os.Getenv("MCPQ_BRIDGE_TEST_SERVER") == "1" {
		testServer()
		return
	}
	os.Exit(m.Run())
}

type echoIn struct {
	Text string `json:"text" jsonschema:"what to echo"`
}
type echoOut struct {
	Echo string `json:"echo"`
}

func testServer() {
	if err := newTestServer().Run(context.Background(), &mcp.StdioTransport{}); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

// newTestServer is the go-sdk server the tests relay (over stdio, and over
// Streamable HTTP in http_test.go).
func newTestServer() *mcp.Server {
	s := mcp.NewServer(&mcp.Implementation{Name: "bridge-test", Version: "1"}, nil)
	mcp.AddTool(s, &mcp.Tool{Name: "echo", Title: "Echo", Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true}},
		func(ctx context.Context, req *mcp.CallToolRequest, in echoIn) (*mcp.CallToolResult, echoOut, error) {
			return nil, echoOut{Echo: in.Text}, nil
		})
	// slow reports progress once a tick until it is cancelled or has
	// counted to its steps; a cancellation is written to $MCPQ_MARKER.
	mcp.AddTool(s, &mcp.Tool{Name: "slow"}, func(ctx context.Context, req *mcp.CallToolRequest, in struct {
		Steps int `json:"steps"`
	}) (*mcp.CallToolResult, any, error) {
		for i := 1; i <= in.Steps; i++ {
			_ = req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{
				ProgressToken: req.Params.GetProgressToken(), Progress: float64(i), Total: float64(in.Steps)})
			select {
			case <-ctx.Done():
				_ = os.WriteFile(os.Getenv("MCPQ_MARKER"), []byte("cancelled at step "+fmt.Sprint(i)), 0o644)
				return nil, nil, ctx.Err()
			case <-time.After(20 * time.Millisecond):
			}
		}
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "counted"}}}, nil, nil
	})
	mcp.AddTool(s, &mcp.Tool{Name: "ask"}, func(ctx context.Context, req *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
		r, err := req.Session.Elicit(ctx, &mcp.ElicitParams{Message: "Who?", RequestedSchema: json.RawMessage(`{"type":"object","properties":{"name":{"type":"string"}}}`)})
		if err != nil {
			return nil, nil, err
		}
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: fmt.Sprintf("%s: %v", r.Action, r.Content["name"])}}}, nil, nil
	})
	mcp.AddTool(s, &mcp.Tool{Name: "roots"}, func(ctx context.Context, req *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
		r, err := req.Session.ListRoots(ctx, nil) //nolint:staticcheck // roots are deprecated in 2026-07-28 but still relayed
		if err != nil {
			return nil, nil, err
		}
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: r.Roots[0].URI}}}, nil, nil
	})
	mcp.AddTool(s, &mcp.Tool{Name: "die"}, func(ctx context.Context, req *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
		os.Exit(3)
		return nil, nil, nil
	})
	mcp.AddTool(s, &mcp.Tool{Name: "env"}, func(ctx context.Context, req *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
		b, _ := json.Marshal(os.Environ())
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: string(b)}}}, nil, nil
	})
	// grow adds a tool: go-sdk announces it with list_changed.
	mcp.AddTool(s, &mcp.Tool{Name: "grow"}, func(ctx context.Context, req *mcp.CallToolRequest, in struct {
		Name string `json:"name"`
	}) (*mcp.CallToolResult, any, error) {
		mcp.AddTool(s, &mcp.Tool{Name: in.Name}, func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, any, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "grown"}}}, nil, nil
		})
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "ok"}}}, nil, nil
	})
	s.AddPrompt(&mcp.Prompt{Name: "hello", Arguments: []*mcp.PromptArgument{{Name: "who", Required: true}}},
		func(ctx context.Context, req *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
			return &mcp.GetPromptResult{Messages: []*mcp.PromptMessage{{Role: "user", Content: &mcp.TextContent{Text: "hello " + req.Params.Arguments["who"]}}}}, nil
		})
	return s
}

// fakeCall is the queue side of a call: what consumer.Call does with
// progress, logs and input, recorded. (The server side is real.)
type fakeCall struct {
	mu       sync.Mutex
	progress []string
	asked    []consumer.InputRequest
	answer   func(consumer.InputRequest) (json.RawMessage, error)
	owner    string
}

func (f *fakeCall) TaskID() string { return "t1" }
func (f *fakeCall) Owner() string  { return f.owner }
func (f *fakeCall) Progress(_ context.Context, p, total float64, msg string) error {
	f.mu.Lock()
	f.progress = append(f.progress, msg)
	f.mu.Unlock()
	return nil
}
func (f *fakeCall) Log(context.Context, string, any) error { return nil }
func (f *fakeCall) Ask(_ context.Context, reqs ...consumer.InputRequest) ([]json.RawMessage, error) {
	f.mu.Lock()
	f.asked = append(f.asked, reqs...)
	f.mu.Unlock()
	a, err := f.answer(reqs[0])
	return []json.RawMessage{a}, err
}

type relayed struct {
	r      *Relay
	mux    *consumer.Mux
	marker string
}

func startRelay(t *testing.T, env map[string]string, opts *Options) *relayed {
	t.Helper()
	marker := filepath.Join(t.TempDir(), "marker")
	e := map[string]string{"MCPQ_BRIDGE_TEST_SERVER": "1", "MCPQ_MARKER": marker}
	for k, v := range env {
		e[k] = v
	}
	mux := consumer.NewMux()
	if opts == nil {
		opts = &Options{}
	}
	opts.Logger = zerolog.New(zerolog.NewTestWriter(t))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	r, err := Serve(ctx, mux, Command{Path: os.Args[0], Env: e}.Dialer(opts.Logger), opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r.Close() })
	return &relayed{r: r, mux: mux, marker: marker}
}

func (x *relayed) call(t *testing.T, ctx context.Context, f *fakeCall, tool string, args string) (json.RawMessage, error) {
	t.Helper()
	return x.r.run(ctx, f, "tools/call", map[string]any{"name": tool, "arguments": json.RawMessage(args)})
}

func textOf(t *testing.T, raw json.RawMessage) string {
	t.Helper()
	var r struct {
		Content []struct{ Text string } `json:"content"`
	}
	if err := json.Unmarshal(raw, &r); err != nil || len(r.Content) == 0 {
		t.Fatalf("not a tool result with content: %s", raw)
	}
	return r.Content[0].Text
}

func TestRelayPublishesTheServersToolsAndPrompts(t *testing.T) {
	t.Parallel()
	x := startRelay(t, nil, &Options{Prefix: "t.", Sessions: 3})
	if x.r.Name() != "bridge-test" {
		t.Fatalf("name %q, want the server's own", x.r.Name())
	}
	var got []string
	for _, info := range x.mux.Tools() {
		got = append(got, info.Key())
		if info.Name == "t.echo" {
			if info.Title != "Echo" || !strings.Contains(string(info.Annotations), `"readOnlyHint":true`) ||
				!strings.Contains(string(info.InputSchema), `"text"`) || !strings.Contains(string(info.OutputSchema), `"echo"`) {
				t.Fatalf("echo published as %+v (schemas %s / %s)", info, info.InputSchema, info.OutputSchema)
			}
		}
	}
	want := []string{"prompt/t.hello", "t.ask", "t.die", "t.echo", "t.env", "t.grow", "t.roots", "t.slow"}
	if !slices.Equal(got, want) {
		t.Fatalf("tools %v, want %v", got, want)
	}
	res, err := x.call(t, context.Background(), &fakeCall{}, "echo", `{"text":"hi"}`)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(res), `"structuredContent":{"echo":"hi"}`) {
		t.Fatalf("echo result %s", res)
	}
	// A tool error stays a result (isError); a bad argument is the server's error.
	res, err = x.call(t, context.Background(), &fakeCall{}, "echo", `{"text":3}`)
	var pe *consumer.ProtocolError
	if err == nil && !strings.Contains(string(res), `"isError":true`) || err != nil && !errors.As(err, &pe) {
		t.Fatalf("bad arguments: %s %v", res, err)
	}
}

func TestProgressAndInputMapToTheCall(t *testing.T) {
	t.Parallel()
	x := startRelay(t, nil, nil)
	f := &fakeCall{}
	res, err := x.call(t, context.Background(), f, "slow", `{"steps":3}`)
	if err != nil || textOf(t, res) != "counted" {
		t.Fatalf("slow: %s %v", res, err)
	}
	f.mu.Lock()
	if len(f.progress) == 0 || f.progress[len(f.progress)-1] != "progress 3/3" {
		t.Errorf("progress reported %v, want it to end with progress 3/3", f.progress)
	}
	f.mu.Unlock()

	f = &fakeCall{answer: func(r consumer.InputRequest) (json.RawMessage, error) {
		return json.RawMessage(`{"action":"accept","content":{"name":"Ada"}}`), nil
	}}
	res, err = x.call(t, context.Background(), f, "ask", `{}`)
	if err != nil || textOf(t, res) != "accept: Ada" {
		t.Fatalf("ask: %s %v", res, err)
	}
	if len(f.asked) != 1 || f.asked[0].Method != "elicitation/create" || !strings.Contains(string(f.asked[0].Params.(json.RawMessage)), `"message":"Who?"`) {
		t.Fatalf("asked %+v", f.asked)
	}

	// Inline, the client has not answered yet: the call ends with
	// ErrInputRequired (the worker turns it into an InputRequiredResult).
	f = &fakeCall{answer: func(consumer.InputRequest) (json.RawMessage, error) { return nil, consumer.ErrInputRequired }}
	if _, err := x.call(t, context.Background(), f, "ask", `{}`); !errors.Is(err, consumer.ErrInputRequired) {
		t.Fatalf("ask without an answer: %v", err)
	}
}

func TestRootsRelayedOnlyWhenConfigured(t *testing.T) {
	t.Parallel()
	answer := func(consumer.InputRequest) (json.RawMessage, error) {
		return json.RawMessage(`{"roots":[{"uri":"file:///work"}]}`), nil
	}
	f := &fakeCall{answer: answer}
	res, err := startRelay(t, nil, &Options{Roots: true}).call(t, context.Background(), f, "roots", `{}`)
	if err != nil || textOf(t, res) != "file:///work" || len(f.asked) != 1 || f.asked[0].Method != "roots/list" {
		t.Fatalf("roots relayed: %s %v, asked %+v", res, err, f.asked)
	}
	f = &fakeCall{answer: answer}
	res, err = startRelay(t, nil, nil).call(t, context.Background(), f, "roots", `{}`)
	if len(f.asked) != 0 || err == nil && !strings.Contains(string(res), `"isError":true`) {
		t.Fatalf("roots not configured: %s %v, asked %+v", res, err, f.asked)
	}
}

func TestCancelReachesTheServer(t *testing.T) {
	t.Parallel()
	x := startRelay(t, nil, nil)
	f := &fakeCall{}
	ctx, cancel := context.WithCancelCause(context.Background())
	done := make(chan error, 1)
	go func() { _, err := x.call(t, ctx, f, "slow", `{"steps":100000}`); done <- err }()
	testenv.Eventually(t, 15*time.Second, "progress", func() bool { f.mu.Lock(); defer f.mu.Unlock(); return len(f.progress) > 0 })
	cancel(consumer.ErrTaskCancelled)
	if err := <-done; !errors.Is(err, consumer.ErrTaskCancelled) {
		t.Fatalf("cancelled call returned %v", err)
	}
	testenv.Eventually(t, 15*time.Second, "the server's handler cancelled", func() bool {
		b, _ := os.ReadFile(x.marker)
		return strings.HasPrefix(string(b), "cancelled at step")
	})
	// The session (answered or replaced) serves the next call.
	if res, err := x.call(t, context.Background(), &fakeCall{}, "echo", `{"text":"after"}`); err != nil || !strings.Contains(string(res), "after") {
		t.Fatalf("call after a cancel: %s %v", res, err)
	}
}

func TestServerDeathIsRetryable(t *testing.T) {
	t.Parallel()
	x := startRelay(t, nil, nil)
	_, err := x.call(t, context.Background(), &fakeCall{}, "die", `{}`)
	if err == nil || !strings.Contains(err.Error(), `mcp server "bridge-test"`) || !strings.Contains(err.Error(), "exit status 3") {
		t.Fatalf("death mid-call: %v", err)
	}
	var re *consumer.RetryableError
	if errors.Is(err, consumer.ErrInputRequired) || !errors.As(err, &re) {
		t.Fatalf("death mid-call is %T, want consumer.Retryable", err)
	}
	// A fresh session serves the next call.
	if res, err := x.call(t, context.Background(), &fakeCall{}, "echo", `{"text":"again"}`); err != nil || !strings.Contains(string(res), "again") {
		t.Fatalf("call after a death: %s %v", res, err)
	}
}

func TestChildEnvironmentIsOnlyTheConfigured(t *testing.T) {
	t.Setenv("MCPQ_STATE_KEY", "secret-of-the-worker")
	x := startRelay(t, map[string]string{"GREETING": "hello"}, nil)
	res, err := x.call(t, context.Background(), &fakeCall{}, "env", `{}`)
	if err != nil {
		t.Fatal(err)
	}
	var env []string
	_ = json.Unmarshal([]byte(textOf(t, res)), &env)
	slices.Sort(env)
	want := []string{"GREETING=hello", "MCPQ_BRIDGE_TEST_SERVER=1", "MCPQ_MARKER=" + x.marker, "PATH=" + DefaultPath}
	if !slices.Equal(env, want) {
		t.Fatalf("the child's environment is %v, want %v", env, want)
	}
}

func TestListChangedUpdatesTheMux(t *testing.T) {
	t.Parallel()
	x := startRelay(t, nil, nil)
	if _, err := x.call(t, context.Background(), &fakeCall{}, "grow", `{"name":"sprout"}`); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 15*time.Second, "sprout relayed", func() bool {
		for _, info := range x.mux.Tools() {
			if info.Name == "sprout" {
				return true
			}
		}
		return false
	})
}

func TestParseCommandLine(t *testing.T) {
	for line, want := range map[string][]string{
		`npx -y @modelcontextprotocol/server-everything`: {"npx", "-y", "@modelcontextprotocol/server-everything"},
		`sh -c 'tee "$LOG" | exec node x.js'`:            {"sh", "-c", `tee "$LOG" | exec node x.js`},
		`a "b c" d\ e "q\"uote" ''`:                      {"a", "b c", "d e", `q"uote`, ""},
	} {
		got, err := ParseCommandLine(line)
		if err != nil || !slices.Equal(got, want) {
			t.Errorf("ParseCommandLine(%q) = %q, %v; want %q", line, got, err, want)
		}
	}
	for _, bad := range []string{``, `  `, `a 'b`, `a "b`} {
		if _, err := ParseCommandLine(bad); err == nil {
			t.Errorf("ParseCommandLine(%q) accepted", bad)
		}
	}
}

func TestLoadConfig(t *testing.T) {
	dir := t.TempDir()
	write := func(s string) string {
		p := filepath.Join(dir, fmt.Sprint(time.Now().UnixNano()))
		_ = os.WriteFile(p, []byte(s), 0o600)
		return p
	}
	servers, err := LoadConfig(write(`{"mcpServers": {
		"b": {"command": "npx", "args": ["-y", "x"], "env": {"HOME": "/h"}, "prefix": "b.", "concurrency": 2, "timeout": "90s"},
		"a": {"type": "stdio", "command": "/bin/srv"},
		"off": {"command": "x", "disabled": true}}}`))
	if err != nil {
		t.Fatal(err)
	}
	if len(servers) != 2 || servers[0].Name != "a" || servers[1].Name != "b" || servers[1].Prefix != "b." ||
		servers[1].Sessions != 2 || servers[1].Timeout != 90*time.Second || servers[1].Env["HOME"] != "/h" || !slices.Equal(servers[1].Args, []string{"-y", "x"}) {
		t.Fatalf("loaded %+v", servers)
	}
	for _, bad := range []string{`{"mcpServers": {"a": {"command": "x", "typo": 1}}}`, `{"mcpServers": {"a": {"type": "http", "command": "x"}}}`,
		`{"mcpServers": {"a": {}}}`, `{"mcpServers": {"a": {"command": "x", "timeout": "soon"}}}`} {
		if _, err := LoadConfig(write(bad)); err == nil {
			t.Errorf("LoadConfig accepted %s", bad)
		}
	}
}
