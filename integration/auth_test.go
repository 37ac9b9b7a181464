package integration

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mcpqueue/mcpqueue/auth"
	"github.com/mcpqueue/mcpqueue/auth/authtest"
	"github.com/mcpqueue/mcpqueue/auth/jwtauth"
	"github.com/mcpqueue/mcpqueue/integration/harness"
	"github.com/mcpqueue/mcpqueue/taskstate"
)

// bearer adds an Authorization header to every request.
type bearer struct {
	token string
	next  http.RoundTripper
}

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return b.next.RoundTrip(r)
}

// authClient is a 2026-07-28 client (tasks extension declared) that sends token.
func authClient(mcpURL, token string) *harness.Client {
	c := harness.NewClient(mcpURL, true)
	c.HTTP.Transport = bearer{token: token, next: http.DefaultTransport}
	return c
}

// authSystem is a system whose api trusts iss, a test issuer.
type authSystem struct {
	*system
	iss *authtest.Issuer
}

// newAuthSystem is newSystem with the api trusting a new alg issuer.
func newAuthSystem(t *testing.T, broker, alg string, apiArgs ...string) *authSystem {
	t.Helper()
	iss := authtest.NewIssuer(t, alg)
	s := newSystem(t, broker, append([]string{"--auth-jwks-url", iss.JWKSURL, "--auth-issuer", iss.URL}, apiArgs...)...)
	return &authSystem{system: s, iss: iss}
}

// token is a token of s's issuer for subject sub, with scopes, for s's api.
func (s *authSystem) token(t *testing.T, sub string, scopes ...string) string {
	return s.iss.Mint(t, s.iss.Claims(sub, s.mcpURL, scopes...))
}

// client is a client that sends s.token(t, sub, scopes...).
func (s *authSystem) client(t *testing.T, sub string, scopes ...string) *harness.Client {
	return authClient(s.mcpURL, s.token(t, sub, scopes...))
}

// discover builds a valid 2026-07-28 server/discover request.
func discover(t *testing.T, mcpURL string) *http.Request {
	t.Helper()
	return modernPost(t, mcpURL, 1, "server/discover", map[string]any{}, map[string]any{})
}

func do(t *testing.T, req *http.Request) (*http.Response, []byte) {
	t.Helper()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, body
}

// TestAuthAPITokens runs the shared token table against the real api
// binary trusting a test issuer whose JWKS is served on loopback: the
// status and WWW-Authenticate challenge for each token, the protected
// resource metadata at both well-known URLs, and principal B unable to see
// or touch principal A's task, with the denial in the audit log.
func TestAuthAPITokens(t *testing.T) {
	t.Parallel()
	scopes := []string{"mcp:tools", "mcp:tasks"}
	s := newAuthSystem(t, "nats", jwtauth.RS256, "--auth-scopes", "mcp:tools,mcp:tasks")
	mcpURL, iss := s.mcpURL, s.iss
	base := strings.TrimSuffix(mcpURL, "/mcp")
	metadataURL := base + "/.well-known/oauth-protected-resource/mcp"

	// The audience is the canonical resource URI, derived from --listen.
	for _, c := range authtest.Cases(t, iss, mcpURL, scopes) {
		req := discover(t, mcpURL)
		c.Apply(req)
		resp, body := do(t, req)
		if err := c.Check(resp.StatusCode, resp.Header, metadataURL, scopes); err != nil {
			t.Errorf("%s: %v (%s)", c.Name, err, body)
		}
	}

	// RFC 9728 metadata, where the challenge points and at the root.
	for _, u := range []string{metadataURL, base + auth.WellKnownPath} {
		resp, body := do(t, must(http.NewRequestWithContext(t.Context(), http.MethodGet, u, nil)))
		var m auth.Metadata
		if err := json.Unmarshal(body, &m); err != nil || resp.StatusCode != 200 {
			t.Fatalf("GET %s: %d %s", u, resp.StatusCode, body)
		}
		if m.Resource != mcpURL || len(m.AuthorizationServers) != 1 || m.AuthorizationServers[0] != iss.URL ||
			strings.Join(m.ScopesSupported, " ") != "mcp:tools mcp:tasks" || strings.Join(m.BearerMethodsSupported, " ") != "header" {
			t.Errorf("GET %s: %s", u, body)
		}
	}

	// A's task, probed by B.
	s.worker(t, "worker")
	a, bob := s.client(t, "alice", scopes...), s.client(t, "bob", scopes...)
	id := a.StartTask(t, "wait", map[string]any{"ms": 60000})
	a.WaitStatus(t, id, 20*time.Second, "working")
	unknown := taskstate.NewID()
	for _, method := range []string{"tasks/get", "tasks/cancel", "tasks/update"} {
		params := func(id string) map[string]any {
			p := map[string]any{"taskId": id}
			if method == "tasks/update" {
				p["inputResponses"] = map[string]any{}
			}
			return p
		}
		errA := bob.Call(context.Background(), method, params(id), nil)
		errU := bob.Call(context.Background(), method, params(unknown), nil)
		var ra, ru *harness.RPCError
		if !errors.As(errA, &ra) || !errors.As(errU, &ru) {
			t.Fatalf("%s by B: A's task %v, unknown id %v; want errors", method, errA, errU)
		}
		if ra.Code != ru.Code || ra.Status != ru.Status || strings.ReplaceAll(ra.Message, id, "<ID>") != strings.ReplaceAll(ru.Message, unknown, "<ID>") {
			t.Errorf("%s by B: A's task answers %+v, an unknown id %+v", method, ra, ru)
		}
	}
	if tk := a.WaitStatus(t, id, 5*time.Second, "working"); tk.Status != "working" {
		t.Fatalf("A's task after B's probes: %+v", tk)
	}
	s.api.WaitOutput(t, "task access denied", 5*time.Second)
	wantB := auth.Principal{Issuer: iss.URL, Subject: "bob"}.Owner()
	for _, line := range strings.Split(s.api.Output(), "\n") {
		if strings.Contains(line, "task access denied") && (!strings.Contains(line, wantB) || !strings.Contains(line, id)) {
			t.Errorf("audit line without principal or task: %s", line)
		}
	}
	if err := a.Call(context.Background(), "tasks/cancel", map[string]any{"taskId": id}, nil); err != nil {
		t.Fatalf("A cancels its task: %v", err)
	}
	a.WaitStatus(t, id, 10*time.Second, "cancelled")
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

// TestAuthAPIStartup: without auth, api listens only on loopback unless
// told --insecure-no-auth; auth settings that cannot work stop it at once;
// a static HS256 key works behind a non-loopback address.
func TestAuthAPIStartup(t *testing.T) {
	t.Parallel()
	b := harness.Build(t)
	iss := authtest.NewIssuer(t, jwtauth.ES256)

	refused := func(want string, args ...string) {
		t.Helper()
		p := harness.Start(t, "api", b.API, nil, append([]string{"--nats", "nats://127.0.0.1:1", "--log-json"}, args...)...)
		harness.Eventually(t, 10*time.Second, func() (bool, string) { return p.Exited(), "api still running with " + strings.Join(args, " ") })
		if !strings.Contains(p.Output(), want) {
			t.Errorf("api %s: output lacks %q:\n%s", strings.Join(args, " "), want, p.Output())
		}
	}
	open := fmt.Sprintf("0.0.0.0:%d", harness.FreePort(t))
	refused("--insecure-no-auth", "--listen", open)
	refused("--insecure-no-auth", "--listen", fmt.Sprintf(":%d", harness.FreePort(t)))
	refused("--public-url", "--listen", open, "--auth-jwks-url", iss.JWKSURL, "--auth-issuer", iss.URL)
	refused("needs --auth-jwks-url", "--auth-issuer", iss.URL)
	refused("--auth-issuer is required", "--auth-jwks-url", iss.JWKSURL)
	refused("must be https", "--auth-jwks-url", "http://idp.example/jwks", "--auth-issuer", iss.URL)

	prefix := harness.Prefix("it", t.Name())
	be := harness.NewBackend(t, b, "nats", prefix)
	serve := func(name string, port int, args ...string) string {
		t.Helper()
		all := append(append([]string{}, be.Args...), "--prefix", prefix+name, "--log-json", "--listen", fmt.Sprintf("0.0.0.0:%d", port))
		p := harness.Start(t, name, b.API, nil, append(all, args...)...)
		base := fmt.Sprintf("http://127.0.0.1:%d", port)
		p.WaitHealthy(t, base+"/healthz", 20*time.Second)
		return base + "/mcp"
	}

	// Overridden: open, and no token needed.
	mcpURL := serve("api_open", harness.FreePort(t), "--insecure-no-auth")
	if resp, body := do(t, discover(t, mcpURL)); resp.StatusCode != 200 {
		t.Errorf("--insecure-no-auth: %d %s", resp.StatusCode, body)
	}

	// A static key, on a non-loopback address with a public URL.
	key := []byte("a static key of at least thirty-two bytes\n")
	keyFile := filepath.Join(t.TempDir(), "hs256.key")
	if err := os.WriteFile(keyFile, key, 0o600); err != nil {
		t.Fatal(err)
	}
	port := harness.FreePort(t)
	public := fmt.Sprintf("http://127.0.0.1:%d", port)
	mcpURL = serve("api_hs256", port, "--public-url", public, "--auth-hs256-key-file", keyFile, "--auth-issuer", "https://idp.example")
	claims := iss.Claims("alice", public+"/mcp")
	claims["iss"] = "https://idp.example"
	for _, tc := range []struct {
		name, token string
		status      int
	}{
		{"HS256 with the key", authtest.HS256(t, bytes.TrimSpace(key), claims), 200},
		{"HS256 with the key file's newline", authtest.HS256(t, key, claims), 401},
		{"ES256 from a JWKS issuer", iss.Mint(t, claims), 401},
		{"no token", "", 401},
	} {
		req := discover(t, mcpURL)
		if tc.token != "" {
			req.Header.Set("Authorization", "Bearer "+tc.token)
		}
		resp, body := do(t, req)
		if resp.StatusCode != tc.status {
			t.Errorf("%s: %d %s, want %d", tc.name, resp.StatusCode, body, tc.status)
		}
		if tc.status == 401 && !strings.Contains(resp.Header.Get("WWW-Authenticate"), `resource_metadata="`+public+`/.well-known/oauth-protected-resource/mcp"`) {
			t.Errorf("%s: challenge %q", tc.name, resp.Header.Get("WWW-Authenticate"))
		}
	}
}

// TestAuthConsoleTenantAdmins: with a tenant claim, console admins are named
// by tenant and subject. A token for the admin's subject in another tenant
// gets 403 on every console API path; the admin itself gets 200; a bare
// subject in --console-admins stops the api at start.
func TestAuthConsoleTenantAdmins(t *testing.T) {
	t.Parallel()
	s := newAuthSystem(t, "nats", jwtauth.RS256, "--auth-tenant-claim", "tenant", "--console-admins", "tenant-a/admin")
	mcpURL, iss := s.mcpURL, s.iss
	base := strings.TrimSuffix(mcpURL, "/mcp")
	mint := func(sub, tenant string) string {
		c := iss.Claims(sub, mcpURL)
		c["tenant"] = tenant
		return iss.Mint(t, c)
	}
	s.worker(t, "worker")
	user := authClient(mcpURL, mint("user", "tenant-a"))
	id := user.StartTask(t, "wait", map[string]any{"ms": 60000})
	user.WaitStatus(t, id, 20*time.Second, "working")

	console := func(method, path, token string) (int, string) {
		req := must(http.NewRequestWithContext(t.Context(), method, base+path, nil))
		req.Header.Set("Authorization", "Bearer "+token)
		resp, body := do(t, req)
		return resp.StatusCode, string(body)
	}
	evil := mint("admin", "evil-tenant")
	for _, p := range [][2]string{
		{"GET", "/console/api/tasks"},
		{"GET", "/console/api/tasks/" + id},
		{"GET", "/console/api/events"},
		{"GET", "/console/api/nope"},
		{"POST", "/console/api/tasks/" + id + "/cancel"},
	} {
		if code, body := console(p[0], p[1], evil); code != 403 {
			t.Errorf("%s %s as admin of evil-tenant: %d %s, want 403", p[0], p[1], code, body)
		}
	}
	if tk := user.WaitStatus(t, id, 5*time.Second, "working"); tk.Status != "working" {
		t.Fatalf("the task after the refused cancel: %+v", tk)
	}
	admin := mint("admin", "tenant-a")
	if code, body := console("GET", "/console/api/tasks", admin); code != 200 || !strings.Contains(body, id) {
		t.Fatalf("GET /console/api/tasks as tenant-a/admin: %d %.200s, want 200 listing %s", code, body, id)
	}
	if code, body := console("POST", "/console/api/tasks/"+id+"/cancel", admin); code != 200 {
		t.Fatalf("cancel as tenant-a/admin: %d %s", code, body)
	}
	if tk := user.WaitStatus(t, id, 10*time.Second, "cancelled"); !strings.Contains(tk.StatusMessage, "console by tenant-a/admin") {
		t.Fatalf("cancelled task: %+v", tk)
	}

	// A bare subject would match in every tenant: refused at start.
	p := harness.Start(t, "api", s.bins.API, nil, "--nats", "nats://127.0.0.1:1", "--log-json", "--auth-jwks-url", iss.JWKSURL,
		"--auth-issuer", iss.URL, "--auth-tenant-claim", "tenant", "--console-admins", "admin")
	harness.Eventually(t, 10*time.Second, func() (bool, string) { return p.Exited(), "api still running with a bare console admin" })
	if out := p.Output(); !strings.Contains(out, `admin \"admin\": with a tenant claim, name an admin as tenant/subject`) {
		t.Fatalf("api with a bare console admin and a tenant claim: output lacks the reason:\n%s", out)
	}
}

// TestAuthRequestStateBound: a requestState is sealed for the principal it
// was issued to. Principal A (tenant t1) answers round 1 of a two-round call;
// principal B (tenant t2) retries with A's round-2 requestState and its own
// answer: refused exactly as a tampered state is. The state on
// the wire does not show A's answer. A's own retry completes, with both
// answers.
func TestAuthRequestStateBound(t *testing.T) {
	t.Parallel()
	eachBroker(t, func(t *testing.T, broker string) {
		s := newAuthSystem(t, broker, jwtauth.RS256, "--auth-tenant-claim", "tenant")
		s.conformanceWorker(t, "fixtures")
		client := func(sub, tenant string) *harness.Client {
			c := s.iss.Claims(sub, s.mcpURL)
			c["tenant"] = tenant
			return authClient(s.mcpURL, s.iss.Mint(t, c))
		}
		alice, bob := client("alice", "t1"), client("bob", "t2")
		const tool, secret = "test_input_required_result_multi_round", "alice-private-answer"
		type round struct {
			ResultType    string                     `json:"resultType"`
			InputRequests map[string]json.RawMessage `json:"inputRequests"`
			RequestState  string                     `json:"requestState"`
			Content       []struct{ Text string }    `json:"content"`
		}
		call := func(c *harness.Client, state string, answers map[string]any) (round, error) {
			p := map[string]any{"name": tool, "arguments": map[string]any{}}
			if state != "" {
				p["requestState"], p["inputResponses"] = state, answers
			}
			var r round
			err := c.Call(t.Context(), "tools/call", p, &r)
			return r, err
		}
		accept := func(key, field, value string) map[string]any {
			return map[string]any{key: map[string]any{"action": "accept", "content": map[string]any{field: value}}}
		}

		var r1 round
		harness.Eventually(t, 20*time.Second, func() (bool, string) { // until the worker has published its tools
			var err error
			r1, err = call(alice, "", nil)
			return err == nil, fmt.Sprintf("round 1: %v", err)
		})
		if r1.ResultType != "input_required" || r1.RequestState == "" || r1.InputRequests["step1"] == nil {
			t.Fatalf("round 1: %+v", r1)
		}
		r2, err := call(alice, r1.RequestState, accept("step1", "name", secret))
		if err != nil || r2.ResultType != "input_required" || r2.RequestState == "" || r2.InputRequests["step2"] == nil {
			t.Fatalf("round 2: %+v %v", r2, err)
		}
		// A's answer rides in the round-2 state, but not readably.
		for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.RawStdEncoding, base64.URLEncoding, base64.RawURLEncoding} {
			for _, part := range append([]string{r2.RequestState}, strings.Split(r2.RequestState, ".")...) {
				if b, err := enc.DecodeString(part); err == nil && bytes.Contains(b, []byte(secret)) {
					t.Errorf("the round-2 requestState shows A's answer in clear: %q", b)
				}
			}
		}
		if strings.Contains(r2.RequestState, secret) || strings.Contains(r2.RequestState, tool) {
			t.Errorf("the round-2 requestState shows A's call in clear: %s", r2.RequestState)
		}

		// B replays A's state with its own answer; and a tampered state.
		raw := []byte(r2.RequestState)
		if mid := len(raw) / 2; raw[mid] == 'A' { // one letter for another: still base64, no longer A's state
			raw[mid] = 'B'
		} else {
			raw[mid] = 'A'
		}
		_, errReplay := call(bob, r2.RequestState, accept("step2", "color", "blue"))
		_, errTampered := call(bob, string(raw), accept("step2", "color", "blue"))
		var replay, tampered *harness.RPCError
		if !errors.As(errReplay, &replay) || !errors.As(errTampered, &tampered) {
			t.Fatalf("B's retries: with A's state %v, with a tampered state %v; want errors", errReplay, errTampered)
		}
		if replay.Code != -32602 || replay.Code != tampered.Code || replay.Status != tampered.Status ||
			replay.Message != tampered.Message || string(replay.Data) != string(tampered.Data) {
			t.Errorf("B with A's state: %+v; with a tampered state: %+v; want the same -32602", replay, tampered)
		}
		// A's own retry completes with both answers.
		done, err := call(alice, r2.RequestState, accept("step2", "color", "blue"))
		if err != nil || done.ResultType != "complete" || len(done.Content) == 0 || done.Content[0].Text != secret+" likes blue" {
			t.Fatalf("A's round 3: %+v %v", done, err)
		}
	})
}

// TestAuthOperatorScopes: a console admin named T1/admin sees and cancels
// T1's tasks only; */ops is a global operator and sees every tenant's. On the
// public port /metrics answers only a global operator's token (403 for a
// tenant's user or admin, 401 without a token).
func TestAuthOperatorScopes(t *testing.T) {
	t.Parallel()
	s := newAuthSystem(t, "nats", jwtauth.RS256, "--auth-tenant-claim", "tenant", "--console-admins", "T1/admin,*/ops")
	base := strings.TrimSuffix(s.mcpURL, "/mcp")
	mint := func(sub, tenant string) string {
		c := s.iss.Claims(sub, s.mcpURL)
		c["tenant"] = tenant
		return s.iss.Mint(t, c)
	}
	s.worker(t, "worker")
	start := func(tenant string) string {
		c := authClient(s.mcpURL, mint("user", tenant))
		id := c.StartTask(t, "wait", map[string]any{"ms": 60000})
		c.WaitStatus(t, id, 20*time.Second, "working")
		return id
	}
	t1, t2 := start("T1"), start("T2")
	get := func(method, path, token string) (int, string) {
		req := must(http.NewRequestWithContext(t.Context(), method, base+path, nil))
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, body := do(t, req)
		return resp.StatusCode, string(body)
	}
	admin, ops := mint("admin", "T1"), mint("ops", "T9")
	code, body := get("GET", "/console/api/tasks", admin)
	if code != 200 || !strings.Contains(body, t1) || strings.Contains(body, t2) {
		t.Fatalf("T1/admin lists: %d %.300s; want T1's task %s and not T2's %s", code, body, t1, t2)
	}
	if code, body := get("GET", "/console/api/tasks/"+t2, admin); code != 404 {
		t.Errorf("T1/admin reads T2's task: %d %.200s, want 404", code, body)
	}
	if code, body := get("POST", "/console/api/tasks/"+t2+"/cancel", admin); code != 404 {
		t.Errorf("T1/admin cancels T2's task: %d %.200s, want 404", code, body)
	}
	if code, body := get("GET", "/console/api/tasks", ops); code != 200 || !strings.Contains(body, t1) || !strings.Contains(body, t2) {
		t.Fatalf("*/ops lists: %d %.300s; want both tenants' tasks", code, body)
	}
	if code, body := get("POST", "/console/api/tasks/"+t2+"/cancel", ops); code != 200 {
		t.Fatalf("*/ops cancels T2's task: %d %.200s, want 200", code, body)
	}
	for _, c := range []struct {
		who, token string
		want       int
	}{{"no token", "", 401}, {"a T1 user", mint("user", "T1"), 403}, {"T1/admin", admin, 403}, {"*/ops", ops, 200}} {
		if code, body := get("GET", "/metrics", c.token); code != c.want || c.want == 200 && !strings.Contains(body, "mcpq_") {
			t.Errorf("/metrics as %s: %d %.200s, want %d", c.who, code, body, c.want)
		}
	}
}

// TestAuthSessionCap: with --max-sessions-per-principal 2 a principal's third
// 2025-11-25 session is refused with -32029 naming the cap, on both
// backends (the count is in the store); another principal opens its own.
func TestAuthSessionCap(t *testing.T) {
	t.Parallel()
	eachBroker(t, func(t *testing.T, broker string) {
		s := newAuthSystem(t, broker, jwtauth.ES256, "--max-sessions-per-principal", "2")
		initialize := func(sub string) (int, string, *harness.RPCError) {
			body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": map[string]any{
				"protocolVersion": "2025-11-25", "capabilities": map[string]any{}, "clientInfo": map[string]any{"name": "cap", "version": "1"},
			}})
			req := must(http.NewRequestWithContext(t.Context(), http.MethodPost, s.mcpURL, bytes.NewReader(body)))
			req.Header.Set("Authorization", "Bearer "+s.token(t, sub))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Accept", "application/json, text/event-stream")
			resp, raw := do(t, req)
			var env struct{ Error *harness.RPCError }
			_ = json.Unmarshal(raw, &env)
			return resp.StatusCode, resp.Header.Get("Mcp-Session-Id"), env.Error
		}
		for i := range 2 {
			if code, id, rerr := initialize("alice"); code != 200 || id == "" || rerr != nil {
				t.Fatalf("alice's session %d of 2: %d %q %v", i+1, code, id, rerr)
			}
		}
		code, id, rerr := initialize("alice")
		if id != "" || rerr == nil || rerr.Code != -32029 || !strings.Contains(rerr.Message, "too many sessions: a principal keeps at most 2") {
			t.Fatalf("alice's third session: %d %q %v, want -32029 too many sessions and no session", code, id, rerr)
		}
		if code, id, rerr := initialize("bob"); code != 200 || id == "" || rerr != nil {
			t.Fatalf("bob's session while alice is at the cap: %d %q %v", code, id, rerr)
		}
	})
}
