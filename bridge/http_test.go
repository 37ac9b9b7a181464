package bridge

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
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
	"github.com/mcpqueue/mcpqueue/internal/redistest"
	"github.com/mcpqueue/mcpqueue/internal/testenv"
)

const testToken = "s3cr3t-token-value"

// upstream is the go-sdk test server behind its Streamable-HTTP handler,
// with what reached it recorded and faults to inject.
type upstream struct {
	srv *httptest.Server

	mu       sync.Mutex
	seen     []string // "METHOD rpc-method" per request, "GET", "DELETE"
	versions []string // MCP-Protocol-Version of each POST after initialize
	noAuth   int      // requests without the bearer token
	noSess   int      // POSTs after initialize without Mcp-Session-Id
	refuse   func(r *http.Request, body []byte) int
}

func newUpstream(t *testing.T, jsonResponse bool) *upstream {
	t.Helper()
	u := &upstream{}
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return newTestServer() }, &mcp.StreamableHTTPOptions{JSONResponse: jsonResponse})
	u.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(body))
		var m struct {
			Method string `json:"method"`
		}
		_ = json.Unmarshal(body, &m)
		u.mu.Lock()
		u.seen = append(u.seen, strings.TrimSpace(r.Method+" "+m.Method))
		if r.Header.Get("Authorization") != "Bearer "+testToken {
			u.noAuth++
		}
		if r.Method == http.MethodPost && m.Method != "initialize" && m.Method != "server/discover" { // discover: the era probe
			u.versions = append(u.versions, r.Header.Get("MCP-Protocol-Version"))
			if r.Header.Get("Mcp-Session-Id") == "" {
				u.noSess++
			}
		}
		refuse := u.refuse
		u.mu.Unlock()
		if refuse != nil {
			if code := refuse(r, body); code != 0 {
				http.Error(w, "refused by the test", code)
				return
			}
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(u.srv.Close)
	return u
}

func (u *upstream) saw(what string) bool {
	u.mu.Lock()
	defer u.mu.Unlock()
	return slices.Contains(u.seen, what)
}

func startHTTPRelay(t *testing.T, u *upstream, log *redistest.SyncBuffer) *relayed {
	t.Helper()
	mux := consumer.NewMux()
	logger := zerolog.New(io.MultiWriter(zerolog.NewTestWriter(t), log)).Level(zerolog.DebugLevel)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	h := HTTPServer{URL: u.srv.URL + "/mcp?key=in-the-query", Headers: map[string]string{"Authorization": "Bearer " + testToken}}
	r, err := Serve(ctx, mux, h.Dialer(logger), &Options{Logger: logger, CancelGrace: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r.Close() })
	return &relayed{r: r, mux: mux}
}

func TestHTTPRelayCallsProgressInputAndListChanged(t *testing.T) {
	for _, mode := range []struct {
		name string
		json bool
	}{{"sse", false}, {"json", true}} {
		t.Run(mode.name, func(t *testing.T) {
			t.Parallel()
			u := newUpstream(t, mode.json)
			log := &redistest.SyncBuffer{}
			x := startHTTPRelay(t, u, log)
			if x.r.Name() != "bridge-test" {
				t.Fatalf("name %q", x.r.Name())
			}
			res, err := x.call(t, context.Background(), &fakeCall{}, "echo", `{"text":"over http"}`)
			if err != nil || !strings.Contains(string(res), `"structuredContent":{"echo":"over http"}`) {
				t.Fatalf("echo: %s %v", res, err)
			}
			if !mode.json { // a JSON-mode server sends no notifications during a request
				f := &fakeCall{}
				res, err = x.call(t, context.Background(), f, "slow", `{"steps":3}`)
				if err != nil || textOf(t, res) != "counted" {
					t.Fatalf("slow: %s %v", res, err)
				}
				f.mu.Lock()
				if len(f.progress) == 0 || f.progress[len(f.progress)-1] != "progress 3/3" {
					t.Errorf("progress %v, want it to end with progress 3/3", f.progress)
				}
				f.mu.Unlock()
				f = &fakeCall{answer: func(consumer.InputRequest) (json.RawMessage, error) {
					return json.RawMessage(`{"action":"accept","content":{"name":"Ada"}}`), nil
				}}
				if res, err = x.call(t, context.Background(), f, "ask", `{}`); err != nil || textOf(t, res) != "accept: Ada" {
					t.Fatalf("ask: %s %v", res, err)
				}
				// list_changed arrives on the GET stream (outside any request).
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
			_ = x.r.Close()
			u.mu.Lock()
			defer u.mu.Unlock()
			if u.noAuth != 0 || u.noSess != 0 {
				t.Fatalf("%d requests without the bearer header, %d POSTs without the session id (of %v)", u.noAuth, u.noSess, u.seen)
			}
			for _, v := range u.versions {
				if v != ProtocolVersion {
					t.Fatalf("MCP-Protocol-Version %q after initialize, want %s (%v)", v, ProtocolVersion, u.versions)
				}
			}
			if !mode.json && !slices.Contains(u.seen, "GET") || !slices.Contains(u.seen, "DELETE") {
				t.Fatalf("requests %v: want the GET stream and a DELETE on close", u.seen)
			}
			if l := log.String(); strings.Contains(l, testToken) || strings.Contains(l, "in-the-query") || !strings.Contains(l, "Authorization") {
				t.Fatalf("the log shows the header's value or the URL's query (or not even the header's name):\n%s", l)
			}
		})
	}
}

func TestHTTPWithoutGetStream(t *testing.T) {
	t.Parallel()
	u := newUpstream(t, false)
	u.refuse = func(r *http.Request, _ []byte) int {
		if r.Method == http.MethodGet {
			return http.StatusMethodNotAllowed
		}
		return 0
	}
	x := startHTTPRelay(t, u, &redistest.SyncBuffer{})
	testenv.Eventually(t, 10*time.Second, "the GET tried", func() bool { return u.saw("GET") })
	if res, err := x.call(t, context.Background(), &fakeCall{}, "echo", `{"text":"no get"}`); err != nil || !strings.Contains(string(res), "no get") {
		t.Fatalf("echo without a GET stream: %s %v", res, err)
	}
}

func TestHTTPErrorEndsTheSessionRetryably(t *testing.T) {
	t.Parallel()
	u := newUpstream(t, false)
	var fail sync.Once
	u.refuse = func(r *http.Request, body []byte) int {
		code := 0
		if bytes.Contains(body, []byte(`"boom"`)) {
			fail.Do(func() { code = http.StatusBadGateway })
		}
		return code
	}
	x := startHTTPRelay(t, u, &redistest.SyncBuffer{})
	_, err := x.call(t, context.Background(), &fakeCall{}, "echo", `{"text":"boom"}`)
	var re *consumer.RetryableError
	if err == nil || !errors.As(err, &re) || !strings.Contains(err.Error(), `mcp server "bridge-test"`) || !strings.Contains(err.Error(), "HTTP 502 Bad Gateway") ||
		strings.Contains(err.Error(), "in-the-query") {
		t.Fatalf("a 502 mid-call: %v (want Retryable naming the server and the HTTP status, not the URL's query)", err)
	}
	// A fresh session serves the next call.
	if res, err := x.call(t, context.Background(), &fakeCall{}, "echo", `{"text":"boom"}`); err != nil || !strings.Contains(string(res), "boom") {
		t.Fatalf("call after the 502: %s %v", res, err)
	}
}

func TestHTTPDeadServerEndsTheSession(t *testing.T) {
	t.Parallel()
	u := newUpstream(t, false)
	x := startHTTPRelay(t, u, &redistest.SyncBuffer{})
	f := &fakeCall{}
	done := make(chan error, 1)
	go func() { _, err := x.call(t, context.Background(), f, "slow", `{"steps":100000}`); done <- err }()
	testenv.Eventually(t, 15*time.Second, "progress", func() bool { f.mu.Lock(); defer f.mu.Unlock(); return len(f.progress) > 0 })
	u.srv.CloseClientConnections()
	u.srv.Close()
	select {
	case err := <-done:
		var re *consumer.RetryableError
		if err == nil || !errors.As(err, &re) || !strings.Contains(err.Error(), "event stream ended before it answered") {
			t.Fatalf("the server gone mid-call: %v", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the call still waits for a server that is gone")
	}
}

func TestCheckURL(t *testing.T) {
	for _, ok := range []string{"http://127.0.0.1:8080/mcp", "https://mcp.example.com/"} {
		if err := CheckURL(ok); err != nil {
			t.Errorf("CheckURL(%q): %v", ok, err)
		}
	}
	for _, bad := range []string{"", "mcp.example.com", "ftp://x/", "http://", "http://[::1/"} {
		if err := CheckURL(bad); err == nil {
			t.Errorf("CheckURL(%q) accepted", bad)
		}
	}
}

func TestLoadConfigURL(t *testing.T) {
	dir := t.TempDir()
	key := filepath.Join(dir, "key")
	if err := os.WriteFile(key, []byte("from-a-file\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("GW_TOKEN", "from-the-env")
	cfg := filepath.Join(dir, "mcp.json")
	write := func(s string) {
		if err := os.WriteFile(cfg, []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write(`{"mcpServers": {"remote": {"type": "http", "url": "https://mcp.example.com/mcp", "prefix": "r.", "concurrency": 3,
		"protocol": "2026-07-28", "timeout": "1m", "tools": {"slow": {"timeout": "90m"}},
		"headers": {"Authorization": "Bearer ${GW_TOKEN}", "X-Key": "@` + key + `", "X-Plain": "plain"}}}}`)
	servers, err := LoadConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	h := servers[0].HTTP
	if h.Protocol != ProtocolModern || servers[0].Timeout != time.Minute || servers[0].ToolTimeouts["slow"] != 90*time.Minute {
		t.Fatalf("protocol %q, timeouts %v %v", h.Protocol, servers[0].Timeout, servers[0].ToolTimeouts)
	}
	if len(servers) != 1 || h.URL != "https://mcp.example.com/mcp" || servers[0].Prefix != "r." || servers[0].Sessions != 3 ||
		h.Headers["Authorization"] != "Bearer from-the-env" || h.Headers["X-Key"] != "from-a-file" || h.Headers["X-Plain"] != "plain" {
		t.Fatalf("loaded %+v", servers)
	}
	for bad, want := range map[string]string{
		`{"mcpServers": {"a": {"command": "x", "url": "http://127.0.0.1/"}}}`:                      `both "command" and "url"`,
		`{"mcpServers": {"a": {"url": "127.0.0.1/mcp"}}}`:                                          "absolute http",
		`{"mcpServers": {"a": {"type": "sse", "url": "http://127.0.0.1/"}}}`:                       `type "sse"`,
		`{"mcpServers": {"a": {"url": "http://127.0.0.1/", "headers": {"A": "${GW_UNSET_VAR}"}}}}`: `header "A": environment variable GW_UNSET_VAR is not set`,
		`{"mcpServers": {"a": {"url": "http://127.0.0.1/", "headers": {"A": "@/nonexistent/k"}}}}`: "/nonexistent/k",
		`{"mcpServers": {"a": {"url": "http://127.0.0.1/", "args": ["x"]}}}`:                       `"args"`,
		`{"mcpServers": {"a": {"command": "x", "headers": {"A": "b"}}}}`:                           `"headers" are for a "url"`,
		`{"mcpServers": {"a": {}}}`: `needs a "command" or a "url"`,
		`{"mcpServers": {"a": {"url": "http://127.0.0.1/", "protocol": "2025-06-18"}}}`:            `unknown protocol "2025-06-18"`,
		`{"mcpServers": {"a": {"command": "x", "protocol": "2026-07-28"}}}`:                        `"protocol", "oauth" and "forwardIdentity" are for a "url"`,
		`{"mcpServers": {"a": {"url": "http://127.0.0.1/", "tools": {"t": {"timeout": "soon"}}}}}`: `tool "t": timeout "soon"`,
	} {
		write(bad)
		if _, err := LoadConfig(cfg); err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), `server "a"`) {
			t.Errorf("LoadConfig(%s) = %v, want an error naming the server and %s", bad, err, want)
		}
	}
}
