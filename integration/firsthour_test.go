package integration

// What a new user meets in the first hour of running the binaries: a port
// already taken, a typo on the command line, a bad flag value, the page at
// "/", a demo tool that asks for input, Ctrl-C, the logs in a file, an api
// on Redis that runs no tools itself.

import (
	"fmt"
	"net/http"
	"net/url"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mcpqueue/mcpqueue/integration/harness"
)

// A second all-in-one api exits at once, non-zero, naming the address in
// use: the HTTP one, or the embedded NATS's.
func TestAPIAddressInUse(t *testing.T) {
	t.Parallel()
	b := harness.Build(t)
	mcpURL, be, _ := harness.AllInOne(t, b)
	httpAddr := strings.TrimSuffix(strings.TrimPrefix(mcpURL, "http://"), "/mcp")
	natsAddr := strings.TrimPrefix(be.NATSURL, "nats://")
	free := fmt.Sprintf("127.0.0.1:%d", harness.FreePort(t))
	for _, c := range []struct {
		name, listen, natsListen, want string
	}{
		{"http", httpAddr, fmt.Sprintf("127.0.0.1:%d", harness.FreePort(t)), "api: listen " + httpAddr + ": address already in use"},
		{"nats", free, natsAddr, "api: embedded NATS: listen " + natsAddr + ": address already in use"},
	} {
		start := time.Now()
		out, code := runBinary(t, b.API, nil, "--listen", c.listen, "--nats-listen", c.natsListen,
			"--data-dir", filepath.Join(t.TempDir(), "data"))
		took := time.Since(start)
		t.Logf("%s in use: exit status %d after %s", c.name, code, took.Round(time.Millisecond))
		if code == 0 || !strings.Contains(out, c.want) {
			t.Errorf("%s in use: exit status %d, output:\n%s\nwant a non-zero status and %q", c.name, code, out, c.want)
		}
		if took > 5*time.Second {
			t.Errorf("%s in use: the api took %s to give up; want at once", c.name, took)
		}
	}
}

// A word that is not a command is refused (status 2) with the commands;
// help and --help print the usage, which names them; a bad flag value is
// one line naming the flag, the value and the form wanted (status 2, no
// usage), in api and worker alike.
func TestCommandLineMistakes(t *testing.T) {
	t.Parallel()
	b := harness.Build(t)
	// An unreachable NATS: a mistake that started a server would fail to
	// connect, and runBinary would report it, instead of exiting at once.
	nats := []string{"--nats", "nats://127.0.0.1:1"}
	for _, c := range []struct {
		bin  string
		args []string
		code int
		want []string
		line bool // the output must be this one line
	}{
		{b.API, []string{"help"}, 0, []string{"api tasks <command>", "api tools <command>", "-listen"}, false},
		{b.API, []string{"--help"}, 0, []string{"api tasks <command>", "api tools <command>", "-listen"}, false},
		{b.API, append(nats, "task", "list"), 2, []string{`api: unknown command "task": the commands are tasks, tools, schedules and help`}, true},
		{b.API, append(nats, "tasks", "list"), 2, []string{"api: tasks is a command: put it first"}, true},
		{b.API, append(nats, "--lease", "5"), 2, []string{`api: --lease "5": want a duration with a unit, such as 500ms, 30s or 5m`}, true},
		{b.API, append(nats, "--concurrency", "many"), 2, []string{`api: --concurrency "many": want an integer`}, true},
		{b.API, append(nats, "--insecure-no-auth=yes"), 2, []string{`api: --insecure-no-auth "yes": want true, false, 1 or 0`}, true},
		{b.API, append(nats, "--leese", "5"), 2, []string{"api: flag provided but not defined: -leese (api -h lists the flags)"}, true},
		{b.Worker, append(nats, "--lease", "5"), 2, []string{`worker: --lease "5": want a duration with a unit, such as 500ms, 30s or 5m`}, true},
		{b.Worker, append(nats, "--lease"), 2, []string{"worker: flag needs an argument: -lease (worker -h lists the flags)"}, true},
		{b.Worker, append(nats, "run"), 2, []string{`worker: unexpected argument "run": a worker takes flags only`}, true},
	} {
		name := filepath.Base(c.bin) + " " + strings.Join(c.args, " ")
		out, code := runBinary(t, c.bin, nil, c.args...)
		if code != c.code {
			t.Errorf("%s: exit status %d, want %d; output:\n%s", name, code, c.code, out)
			continue
		}
		for _, w := range c.want {
			if !strings.Contains(out, w) {
				t.Errorf("%s: output does not contain %q:\n%s", name, w, out)
			}
		}
		if c.line && strings.Count(out, "\n") != 1 {
			t.Errorf("%s: want one line, got %d:\n%s", name, strings.Count(out, "\n"), out)
		}
	}
}

// The all-in-one as `go run ./cmd/api` starts it, its logs going to a file
// (a pipe here, not a terminal): GET / points at /mcp and /console/; the
// demo tool confirm_action asks for input and completes with the answer;
// Ctrl-C (SIGINT) when idle ends it within 2 s, exit status 0, without a
// NATS warning; no colour codes in the log.
func TestAllInOneFirstContact(t *testing.T) {
	t.Parallel()
	b := harness.Build(t)
	port, natsPort := harness.FreePort(t), harness.FreePort(t)
	api := harness.Start(t, "api-all-in-one", b.API, []string{"NATS_URL=", "MCPQ_PREFIX=", "MCPQ_LOG_JSON=", "NO_COLOR="},
		"--listen", fmt.Sprintf("127.0.0.1:%d", port),
		"--nats-listen", fmt.Sprintf("127.0.0.1:%d", natsPort),
		"--data-dir", filepath.Join(t.TempDir(), "data"),
		"--inline-wait", "-1s") // a task handle for every call of a task client
	base := fmt.Sprintf("http://127.0.0.1:%d", port)
	api.WaitHealthy(t, base+"/healthz", 30*time.Second)

	// The page at "/", and only there.
	code, body := harness.Get(base + "/")
	if code != http.StatusOK || !strings.Contains(body, `href="/mcp"`) || !strings.Contains(body, `href="/console/"`) {
		t.Errorf("GET /: %d %q; want 200 pointing at /mcp and /console/", code, body)
	}
	for _, c := range []struct {
		method, path string
		want         int
	}{{http.MethodHead, "/", 200}, {http.MethodPost, "/", 405}, {http.MethodGet, "/nope", 404}} {
		req, _ := http.NewRequest(c.method, base+c.path, nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_ = resp.Body.Close()
		if resp.StatusCode != c.want {
			t.Errorf("%s %s: %d, want %d", c.method, c.path, resp.StatusCode, c.want)
		}
	}

	// confirm_action: input_required with its question, then completed with
	// the answer.
	ctx := t.Context()
	cl := harness.NewClient(base+"/mcp", true)
	id := cl.StartTask(t, "confirm_action", map[string]any{"action": "delete the old backups"})
	var asked struct {
		Status        string `json:"status"`
		InputRequests map[string]struct {
			Method string `json:"method"`
			Params struct {
				Message string `json:"message"`
			} `json:"params"`
		} `json:"inputRequests"`
	}
	harness.Eventually(t, 20*time.Second, func() (bool, string) {
		err := cl.Call(ctx, "tasks/get", map[string]any{"taskId": id}, &asked)
		return err == nil && asked.Status == "input_required", fmt.Sprintf("status %s, %v", asked.Status, err)
	})
	answers := map[string]any{}
	for k, r := range asked.InputRequests {
		if r.Method != "elicitation/create" || !strings.Contains(r.Params.Message, `Go ahead with "delete the old backups"?`) {
			t.Errorf("input request %s: %+v; want an elicitation asking to go ahead", k, r)
		}
		answers[k] = map[string]any{"action": "accept", "content": map[string]any{"confirm": true}}
	}
	if len(answers) != 1 {
		t.Fatalf("confirm_action asked %d questions, want 1", len(answers))
	}
	if err := cl.Call(ctx, "tasks/update", map[string]any{"taskId": id, "inputResponses": answers}, nil); err != nil {
		t.Fatalf("tasks/update: %v", err)
	}
	if tk := cl.WaitStatus(t, id, 20*time.Second, "completed"); !strings.Contains(string(tk.Result), "Confirmed: delete the old backups") {
		t.Fatalf("confirm_action result: %s", tk.Result)
	}

	// Ctrl-C when idle.
	start := time.Now()
	if err := api.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	select {
	case <-api.Done():
	case <-time.After(10 * time.Second):
		t.Fatalf("the api did not exit within 10 s of SIGINT")
	}
	took := time.Since(start)
	t.Logf("the idle all-in-one api exited %s after SIGINT", took.Round(time.Millisecond))
	if took > 2*time.Second {
		t.Errorf("the idle all-in-one api took %s to exit after SIGINT; want at most 2 s", took)
	}
	if err := api.Err(); err != nil {
		t.Errorf("exit after SIGINT: %v", err)
	}
	out := api.Output()
	if strings.Contains(out, "NATS disconnected") {
		t.Errorf("a clean shutdown logged a NATS disconnect:\n%s", out)
	}
	if strings.Contains(out, "\x1b[") {
		t.Errorf("colour codes in a log that is not a terminal:\n%q", tail(out, 600))
	}
	if !strings.Contains(out, "INF api listening") {
		t.Errorf("want console-format log lines:\n%s", out)
	}
}

// An api on Redis runs no tools itself; with none in the catalog it says so
// at start, and how to start a worker there.
func TestAsynqAPIWithoutWorkersSaysSo(t *testing.T) {
	t.Parallel()
	b := harness.Build(t)
	prefix := harness.Prefix("fh", t.Name())
	be := harness.NewBackend(t, b, "asynq", prefix)
	_, api := harness.API(t, b, be, prefix)
	redisURL := be.Args[len(be.Args)-1]
	if u, err := url.Parse(redisURL); err == nil {
		redisURL = u.Redacted()
	}
	api.WaitLine(t, 20*time.Second, "no tools yet", "go run ./cmd/worker --broker asynq --redis "+redisURL+" --prefix "+prefix)
	if err := api.Stop(30 * time.Second); err != nil {
		t.Errorf("api exit: %v", err)
	}
}

// tail is the last n bytes of s.
func tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}
