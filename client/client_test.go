package client_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mcpqueue/mcpqueue/client"
	"github.com/mcpqueue/mcpqueue/consumer"
)

type none struct{}

type textArgs struct {
	Text string `json:"text"`
}

// testTools are the tools of the tests' server; cancelled counts the
// handlers of "block" that saw their context end.
func testTools(cancelled *atomic.Int64) *consumer.Mux {
	mux := exampleTools()
	consumer.Handle(mux, consumer.Tool{Name: "echo"},
		func(ctx context.Context, c *consumer.Call[textArgs]) (*consumer.Result, error) {
			return consumer.TextResult("echo: " + c.Args.Text), nil
		})
	consumer.Handle(mux, consumer.Tool{Name: "greet", TaskSupport: consumer.TaskForbidden},
		func(ctx context.Context, c *consumer.Call[textArgs]) (*consumer.Result, error) {
			return consumer.TextResult("Hello, " + c.Args.Text + "!"), nil
		})
	consumer.Handle(mux, consumer.Tool{Name: "tool_error"},
		func(ctx context.Context, c *consumer.Call[none]) (*consumer.Result, error) {
			return nil, consumer.ToolError(errors.New("bad input, try again"))
		})
	consumer.Handle(mux, consumer.Tool{Name: "protocol_fail"},
		func(ctx context.Context, c *consumer.Call[none]) (*consumer.Result, error) {
			return nil, &consumer.ProtocolError{Code: -32050, Message: "custom failure"}
		})
	consumer.Handle(mux, consumer.Tool{Name: "block"},
		func(ctx context.Context, c *consumer.Call[none]) (*consumer.Result, error) {
			<-ctx.Done()
			cancelled.Add(1)
			return nil, ctx.Err()
		})
	// ask_twice asks one question after the other: inline, the second
	// MRTR round must carry the first answer back (requestState).
	consumer.Handle(mux, consumer.Tool{Name: "ask_twice"},
		func(ctx context.Context, c *consumer.Call[none]) (*consumer.Result, error) {
			schema := map[string]any{"type": "object", "properties": map[string]any{"name": map[string]any{"type": "string"}}}
			first, err := c.Elicit(ctx, "first", "First name?", schema)
			if err != nil {
				return nil, err
			}
			second, err := c.Elicit(ctx, "second", "Second name?", schema)
			if err != nil {
				return nil, err
			}
			return consumer.TextResult(fmt.Sprintf("%v and %v", first.Content["name"], second.Content["name"])), nil
		})
	// ask_all asks for an elicitation, a sampling and the roots at once.
	consumer.Handle(mux, consumer.Tool{Name: "ask_all"},
		func(ctx context.Context, c *consumer.Call[none]) (*consumer.Result, error) {
			answers, err := c.Ask(ctx,
				consumer.Elicitation("name", "Your name?", map[string]any{"type": "object", "properties": map[string]any{"name": map[string]any{"type": "string"}}}),
				consumer.Sampling("haiku", map[string]any{"messages": []any{map[string]any{"role": "user", "content": map[string]any{"type": "text", "text": "a haiku"}}}, "maxTokens": 50}),
				consumer.RootsList("roots"))
			if err != nil {
				return nil, err
			}
			var e struct {
				Content struct {
					Name string `json:"name"`
				} `json:"content"`
			}
			var s struct {
				Model   string `json:"model"`
				Content struct {
					Text string `json:"text"`
				} `json:"content"`
			}
			var r struct {
				Roots []struct {
					URI string `json:"uri"`
				} `json:"roots"`
			}
			_ = json.Unmarshal(answers[0], &e)
			_ = json.Unmarshal(answers[1], &s)
			_ = json.Unmarshal(answers[2], &r)
			return consumer.TextResult(fmt.Sprintf("name=%s model=%s text=%s roots=%d:%s", e.Content.Name, s.Model, s.Content.Text, len(r.Roots), r.Roots[0].URI)), nil
		})
	return mux
}

func newServer(t *testing.T, opts ...func(*serverConfig)) (*server, *atomic.Int64) {
	t.Helper()
	var cancelled atomic.Int64
	srv, err := startServer(testTools(&cancelled), opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Close)
	return srv, &cancelled
}

func newClient(t *testing.T, url string, opts ...client.Option) *client.Client {
	t.Helper()
	c, err := client.New(url, append([]client.Option{client.WithPollFloor(5 * time.Millisecond)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// versions are the ways a client picks its wire: by asking, or fixed.
var versions = []string{"", client.Version2026, client.Version2025}

func name(v string) string {
	if v == "" {
		return "discover"
	}
	return v
}

// answerAll answers every kind of input request.
func answerAll(ctx context.Context, req client.InputRequest) (client.InputResponse, error) {
	switch req.Method {
	case client.MethodElicit:
		return client.Accept(map[string]any{"name": "Ada"}), nil
	case client.MethodSample:
		return client.SampledText("test-model", "autumn moon"), nil
	case client.MethodRoots:
		return client.RootsResponse(client.Root{URI: "file:///work", Name: "work"}), nil
	}
	return client.InputResponse{}, fmt.Errorf("unexpected %s", req.Method)
}

// Every way a call can end, on both wires, as a task and inline.
func TestCallOutcomes(t *testing.T) {
	t.Parallel()
	srv, _ := newServer(t)
	ctx := t.Context()
	for _, v := range versions {
		for _, tasks := range []bool{true, false} {
			t.Run(fmt.Sprintf("%s/tasks=%v", name(v), tasks), func(t *testing.T) {
				opts := []client.Option{client.WithVersion(v)}
				if !tasks {
					opts = append(opts, client.WithoutTasks())
				}
				c := newClient(t, srv.URL, opts...)
				res, err := c.Call(ctx, "echo", textArgs{Text: "hi"})
				if err != nil || res.Text() != "echo: hi" || res.IsError {
					t.Fatalf("echo: %+v %v", res, err)
				}
				if got := res.TaskID != ""; got != tasks {
					t.Fatalf("echo ran as a task: %v, want %v (%s)", got, tasks, res.Raw)
				}
				res, err = c.Call(ctx, "greet", textArgs{Text: "Ada"})
				if err != nil || res.Text() != "Hello, Ada!" || res.TaskID != "" {
					t.Fatalf("greet (never a task): %+v %v", res, err)
				}
				res, err = c.Call(ctx, "tool_error", nil)
				if err != nil || !res.IsError || res.Text() != "bad input, try again" {
					t.Fatalf("tool_error: %+v %v", res, err)
				}
				_, err = c.Call(ctx, "protocol_fail", nil)
				var e *client.Error
				if !errors.As(err, &e) || e.Code != -32050 || e.Message != "custom failure" {
					t.Fatalf("protocol_fail: %v, want the tool's JSON-RPC error -32050", err)
				}
				_, err = c.Call(ctx, "no_such_tool", nil)
				if !errors.As(err, &e) || e.Code != -32602 || !strings.Contains(e.Message, "no_such_tool") {
					t.Fatalf("unknown tool: %v", err)
				}
			})
		}
	}
}

// The input handler answers elicitation, sampling and roots: in a task
// (tasks/update on 2026-07-28, responses to the tasks/result stream's
// requests on 2025-11-25) and inline (MRTR rounds; the tools/call stream).
func TestInputHandler(t *testing.T) {
	t.Parallel()
	srv, _ := newServer(t)
	for _, v := range []string{client.Version2026, client.Version2025} {
		for _, tasks := range []bool{true, false} {
			t.Run(fmt.Sprintf("%s/tasks=%v", v, tasks), func(t *testing.T) {
				var asked atomic.Int64
				seen := map[string]string{}
				handler := func(ctx context.Context, req client.InputRequest) (client.InputResponse, error) {
					asked.Add(1)
					seen[req.Method] = req.TaskID
					return answerAll(ctx, req)
				}
				opts := []client.Option{client.WithVersion(v), client.WithInputHandler(handler)}
				if !tasks {
					opts = append(opts, client.WithoutTasks())
				}
				c := newClient(t, srv.URL, opts...)
				res, err := c.Call(t.Context(), "ask_all", nil)
				if err != nil {
					t.Fatal(err)
				}
				if want := "name=Ada model=test-model text=autumn moon roots=1:file:///work"; res.Text() != want {
					t.Fatalf("result %q, want %q", res.Text(), want)
				}
				if asked.Load() != 3 {
					t.Fatalf("the handler was asked %d times, want once per request (3)", asked.Load())
				}
				for m, id := range seen {
					if id != res.TaskID {
						t.Fatalf("%s came with task %q, the result with %q", m, id, res.TaskID)
					}
				}
				res, err = c.Call(t.Context(), "ask_twice", nil)
				if err != nil || res.Text() != "Ada and Ada" || asked.Load() != 5 {
					t.Fatalf("ask_twice: %+v %v (asked %d, want 5)", res, err, asked.Load())
				}
			})
		}
	}
}

// Without an input handler the client declares no input capability; the
// server refuses the request, and Call leaves no task behind.
func TestNoInputHandler(t *testing.T) {
	t.Parallel()
	srv, _ := newServer(t)
	c := newClient(t, srv.URL)
	_, err := c.Call(t.Context(), "confirm_action", ConfirmArgs{Action: "x"})
	var e *client.Error
	if !errors.As(err, &e) || e.Code != -32021 {
		t.Fatalf("got %v, want -32021 (missing client capability)", err)
	}
}

// A task Call gives up on for another reason than its context (here the
// input handler's error) is cancelled too: Call leaves no task behind.
func TestCallCancelsWhatItGivesUp(t *testing.T) {
	t.Parallel()
	srv, _ := newServer(t)
	p := newProxy(srv.URL)
	defer p.Close()
	refuse := client.WithInputHandler(func(ctx context.Context, req client.InputRequest) (client.InputResponse, error) {
		return client.InputResponse{}, errors.New("nobody at the keyboard")
	})
	c := newClient(t, p.URL, client.WithVersion(client.Version2026), refuse)
	if _, err := c.Call(t.Context(), "confirm_action", ConfirmArgs{Action: "x"}); err == nil || !strings.Contains(err.Error(), "nobody at the keyboard") {
		t.Fatalf("Call: %v, want the handler's error", err)
	}
	cancels := p.calls("tasks/cancel")
	if len(cancels) != 1 {
		t.Fatalf("%d tasks/cancel sent, want 1", len(cancels))
	}
	var id string
	_ = json.Unmarshal(cancels[0].params["taskId"], &id)
	if again, err := c.Resume(t.Context(), id); err != nil || again.Status() != "cancelled" {
		t.Fatalf("the task: %v %v, want cancelled", again, err)
	}
}

// When the context of Call ends, the task is cancelled on the server: the
// handler sees its context end and the task reads cancelled.
func TestCancelWhenContextEnds(t *testing.T) {
	t.Parallel()
	for _, v := range []string{client.Version2026, client.Version2025} {
		t.Run(v, func(t *testing.T) {
			t.Parallel()
			srv, cancelled := newServer(t)
			p := newProxy(srv.URL)
			defer p.Close()
			c := newClient(t, p.URL, client.WithVersion(v))
			ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
			defer cancel()
			_, err := c.Call(ctx, "block", nil)
			if !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("Call: %v, want the context's deadline", err)
			}
			if n := len(p.calls("tasks/cancel")); n != 1 {
				t.Fatalf("%d tasks/cancel sent, want 1", n)
			}
			// Task.Wait does the same for a task from Start.
			task, err := c.Start(t.Context(), "block", nil)
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel = context.WithTimeout(t.Context(), 300*time.Millisecond)
			defer cancel()
			if _, err := task.Wait(ctx); !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("Wait: %v, want the context's deadline", err)
			}
			if n := len(p.calls("tasks/cancel")); n != 2 {
				t.Fatalf("%d tasks/cancel sent, want 2", n)
			}
			if again, err := c.Resume(t.Context(), task.ID()); err != nil || again.Status() != "cancelled" {
				t.Fatalf("after Wait's deadline: %v %v, want cancelled", again, err)
			}
			if err := eventually(5*time.Second, func() error {
				if cancelled.Load() != 2 {
					return errNotYet
				}
				return nil
			}); err != nil {
				t.Fatalf("%d handlers saw their context end, want 2", cancelled.Load())
			}
		})
	}
}

// A task started by one client is resumed by id from another (2026-07-28:
// the id is the handle), waited for, and cancelled.
func TestResume(t *testing.T) {
	t.Parallel()
	srv, _ := newServer(t)
	ctx := t.Context()
	task, err := newClient(t, srv.URL).Start(ctx, "wait", WaitArgs{Ms: 200})
	if err != nil || task.ID() == "" || task.Key() == "" {
		t.Fatalf("Start: %+v %v", task, err)
	}
	again, err := newClient(t, srv.URL).Resume(ctx, task.ID())
	if err != nil {
		t.Fatal(err)
	}
	res, err := again.Wait(ctx)
	if err != nil || res.Text() != "waited" || res.TaskID != task.ID() {
		t.Fatalf("Wait after Resume: %+v %v", res, err)
	}
	if _, err := newClient(t, srv.URL).Resume(ctx, "nosuchtask0000000000"); err == nil {
		t.Fatal("Resume of an unknown id succeeded")
	}
}

// Wait polls at the task's pollIntervalMs, and never faster than the floor.
func TestPollInterval(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name        string
		hint, floor time.Duration
	}{{"hint", 150 * time.Millisecond, 5 * time.Millisecond}, {"floor", 10 * time.Millisecond, 150 * time.Millisecond}} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			srv, _ := newServer(t, func(c *serverConfig) { c.poll = tc.hint })
			p := newProxy(srv.URL)
			defer p.Close()
			c, err := client.New(p.URL, client.WithPollFloor(tc.floor))
			if err != nil {
				t.Fatal(err)
			}
			if _, err := c.Call(t.Context(), "wait", WaitArgs{Ms: 700}); err != nil {
				t.Fatal(err)
			}
			gets := p.calls("tasks/get")
			if len(gets) < 2 {
				t.Fatalf("%d tasks/get, want several", len(gets))
			}
			for i := 1; i < len(gets); i++ {
				var hint int64
				_ = json.Unmarshal(gets[i-1].result["pollIntervalMs"], &hint)
				want := max(time.Duration(hint)*time.Millisecond, tc.floor)
				if gap := gets[i].at.Sub(gets[i-1].at); gap < want-5*time.Millisecond {
					t.Fatalf("tasks/get %d came %s after the previous one, which asked for %d ms (floor %s)", i, gap, hint, tc.floor)
				}
			}
		})
	}
}

// One idempotency key per logical call, in the header and in _meta, the
// same on every retry after a failure in transit; another call gets
// another; WithKey sets it.
func TestIdempotencyKey(t *testing.T) {
	t.Parallel()
	for _, v := range []string{client.Version2026, client.Version2025} {
		t.Run(v, func(t *testing.T) {
			t.Parallel()
			srv, _ := newServer(t)
			p := newProxy(srv.URL)
			defer p.Close()
			// The first tools/call reaches the server, but its answer is
			// lost with the connection; the second gets a 503.
			p.drop = func(method string, n int) (int, bool) {
				switch {
				case method == "tools/call" && n == 1:
					return 0, true
				case method == "tools/call" && n == 2:
					return http.StatusServiceUnavailable, false
				}
				return 0, false
			}
			c := newClient(t, p.URL, client.WithVersion(v), client.WithRetries(2))
			res, err := c.Call(t.Context(), "echo", textArgs{Text: "once"})
			if err != nil || res.Text() != "echo: once" {
				t.Fatalf("Call through a flaky network: %+v %v", res, err)
			}
			calls := p.calls("tools/call")
			if len(calls) != 3 {
				t.Fatalf("%d tools/call sent, want 3 (two failed in transit)", len(calls))
			}
			key := calls[0].header.Get("Idempotency-Key")
			if len(key) < 16 {
				t.Fatalf("Idempotency-Key %q", key)
			}
			for i, e := range calls {
				if e.header.Get("Idempotency-Key") != key || e.metaKey() != key {
					t.Fatalf("attempt %d: header %q, _meta %q; want %q on every attempt", i, e.header.Get("Idempotency-Key"), e.metaKey(), key)
				}
			}
			if _, err := c.Call(t.Context(), "echo", textArgs{Text: "twice"}, client.WithKey("my-key-1")); err != nil {
				t.Fatal(err)
			}
			calls = p.calls("tools/call")
			if last := calls[len(calls)-1]; last.header.Get("Idempotency-Key") != "my-key-1" || last.metaKey() != "my-key-1" {
				t.Fatalf("WithKey: header %q, _meta %q", last.header.Get("Idempotency-Key"), last.metaKey())
			}
			if _, err := c.Call(t.Context(), "echo", textArgs{Text: "again"}); err != nil {
				t.Fatal(err)
			}
			calls = p.calls("tools/call")
			if k := calls[len(calls)-1].header.Get("Idempotency-Key"); k == key || k == "my-key-1" || k == "" {
				t.Fatalf("a new call reused the key %q", k)
			}
			// Without retries the first failure is the answer.
			p.drop = func(method string, n int) (int, bool) { return http.StatusServiceUnavailable, false }
			_, err = newClient(t, p.URL, client.WithVersion(v), client.WithRetries(0)).Call(t.Context(), "echo", textArgs{Text: "x"})
			var e *client.Error
			if !errors.As(err, &e) || e.HTTPStatus != http.StatusServiceUnavailable {
				t.Fatalf("WithRetries(0): %v, want the 503", err)
			}
		})
	}
}

// The token source's token authenticates every request; tasks belong to
// their principal.
func TestTokenSource(t *testing.T) {
	t.Parallel()
	srv, _ := newServer(t, func(c *serverConfig) { c.front.Auth = tokens{} })
	as := func(who string) client.Option {
		return client.WithTokenSource(func(ctx context.Context) (string, error) { return who, nil })
	}
	ctx := t.Context()
	for _, v := range []string{client.Version2026, client.Version2025} {
		alice := newClient(t, srv.URL, client.WithVersion(v), as("alice"))
		task, err := alice.Start(ctx, "wait", WaitArgs{Ms: 50})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := alice.Resume(ctx, task.ID()); err != nil {
			t.Fatalf("%s: alice resumes her task: %v", v, err)
		}
		_, err = newClient(t, srv.URL, client.WithVersion(v), as("bob")).Resume(ctx, task.ID())
		var e *client.Error
		if !errors.As(err, &e) || e.Code != -32602 {
			t.Fatalf("%s: bob resumes alice's task: %v, want an unknown task", v, err)
		}
		_, err = newClient(t, srv.URL, client.WithVersion(v)).Call(ctx, "echo", textArgs{Text: "x"})
		if !errors.As(err, &e) || e.HTTPStatus != http.StatusUnauthorized {
			t.Fatalf("%s: no token: %v, want HTTP 401", v, err)
		}
		// Asking the server what it speaks stops at the 401 too.
		_, err = newClient(t, srv.URL).Tools(ctx)
		if !errors.As(err, &e) || e.HTTPStatus != http.StatusUnauthorized || !strings.Contains(err.Error(), "server/discover") {
			t.Fatalf("no token, discovering: %v, want server/discover's HTTP 401", err)
		}
		failing := client.WithTokenSource(func(ctx context.Context) (string, error) { return "", errors.New("vault sealed") })
		if _, err := newClient(t, srv.URL, client.WithVersion(v), failing).Tools(ctx); err == nil || !strings.Contains(err.Error(), "vault sealed") {
			t.Fatalf("%s: a failing token source: %v", v, err)
		}
	}
}

// A call made without tasks that the api hands over past its inline wait
// (200 ms here) is followed through tasks_result to the task's own result,
// and the tool ran once; Cancel of a handed-over task calls tasks_cancel,
// which reaches the handler.
func TestHandover(t *testing.T) {
	t.Parallel()
	var runs, cancelled atomic.Int64
	mux := consumer.NewMux()
	consumer.Handle(mux, consumer.Tool{Name: "slow"}, func(ctx context.Context, c *consumer.Call[WaitArgs]) (*consumer.Result, error) {
		runs.Add(1)
		select {
		case <-time.After(time.Duration(c.Args.Ms) * time.Millisecond):
			return consumer.TextResult("slow done"), nil
		case <-ctx.Done():
			cancelled.Add(1)
			return nil, ctx.Err()
		}
	})
	srv, err := startServer(mux, func(c *serverConfig) { c.front.HandleAfter = 200 * time.Millisecond })
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	for i, v := range []string{client.Version2026, client.Version2025} {
		p := newProxy(srv.URL)
		defer p.Close()
		c := newClient(t, p.URL, client.WithVersion(v), client.WithoutTasks())
		res, err := c.Call(t.Context(), "slow", WaitArgs{Ms: 1000})
		if err != nil || res.Text() != "slow done" || res.TaskID == "" {
			t.Fatalf("%s: %v %v", v, res, err)
		}
		if n := len(p.calls("tools/call")); n < 2 {
			t.Fatalf("%s: %d tools/call, want the call and at least one tasks_result", v, n)
		}
		if runs.Load() != int64(2*i+1) {
			t.Fatalf("%s: the tool ran %d times, want once per call", v, runs.Load())
		}
		task, err := c.Start(t.Context(), "slow", WaitArgs{Ms: 60000})
		if err != nil || task.ID() == "" {
			t.Fatalf("%s: Start: %v", v, err)
		}
		if err := task.Cancel(t.Context()); err != nil {
			t.Fatalf("%s: Cancel: %v", v, err)
		}
		deadline := time.Now().Add(10 * time.Second)
		for cancelled.Load() != int64(i+1) {
			if time.Now().After(deadline) {
				t.Fatalf("%s: the handed-over task's handler was not cancelled (cancelled %d)", v, cancelled.Load())
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
}

// Tools lists the tools, with their task support on 2025-11-25.
func TestTools(t *testing.T) {
	t.Parallel()
	srv, _ := newServer(t)
	for _, v := range []string{client.Version2026, client.Version2025} {
		tools, err := newClient(t, srv.URL, client.WithVersion(v)).Tools(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		byName := map[string]client.Tool{}
		for _, tl := range tools {
			byName[tl.Name] = tl
		}
		if len(byName["echo"].InputSchema) == 0 {
			t.Fatalf("%s: echo: %+v", v, byName["echo"])
		}
		want := map[string]string{client.Version2026: "", client.Version2025: "forbidden"}[v]
		if byName["greet"].TaskSupport != want {
			t.Fatalf("%s: greet's task support %q, want %q", v, byName["greet"].TaskSupport, want)
		}
	}
}

// New refuses what it cannot use, naming it.
func TestNewRefuses(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		url  string
		opt  client.Option
		want string
	}{
		{"127.0.0.1:8080/mcp", nil, `url "127.0.0.1:8080/mcp"`},
		{"ftp://x/mcp", nil, "want an absolute http or https URL"},
		{"http://x/mcp", client.WithVersion("2025-13-01"), `WithVersion("2025-13-01")`},
		{"http://x/mcp", client.WithRetries(-1), "WithRetries(-1)"},
		{"http://x/mcp", client.WithPollFloor(-time.Second), "WithPollFloor(-1s)"},
		{"http://x/mcp", client.WithHTTPClient(nil), "WithHTTPClient(nil)"},
		{"http://x/mcp", client.WithClientInfo("", "1"), "WithClientInfo"},
	} {
		var opts []client.Option
		if tc.opt != nil {
			opts = append(opts, tc.opt)
		}
		if _, err := client.New(tc.url, opts...); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("New(%q): %v, want an error naming %s", tc.url, err, tc.want)
		}
	}
	c := newClient(t, "http://127.0.0.1:1/mcp")
	if _, err := c.Start(t.Context(), "echo", nil, client.WithKey("has space")); err == nil || !strings.Contains(err.Error(), "WithKey") {
		t.Errorf("WithKey with a space: %v", err)
	}
	if _, err := c.Start(t.Context(), "", nil); err == nil || !strings.Contains(err.Error(), "tool name") {
		t.Errorf("empty tool: %v", err)
	}
}

// A 2025-11-25 session that ended (here by HTTP DELETE) is replaced by a
// new one on the next call.
func TestSessionGone(t *testing.T) {
	t.Parallel()
	srv, _ := newServer(t)
	p := newProxy(srv.URL)
	defer p.Close()
	c := newClient(t, p.URL, client.WithVersion(client.Version2025))
	if _, err := c.Call(t.Context(), "echo", textArgs{Text: "one"}); err != nil {
		t.Fatal(err)
	}
	calls := p.calls("tools/call")
	session := calls[len(calls)-1].header.Get("Mcp-Session-Id")
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodDelete, srv.URL, nil)
	req.Header.Set("Mcp-Session-Id", session)
	resp, err := http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("DELETE the session: %v %v", resp, err)
	}
	_ = resp.Body.Close()
	res, err := c.Call(t.Context(), "echo", textArgs{Text: "two"})
	if err != nil || res.Text() != "echo: two" {
		t.Fatalf("Call after the session ended: %v %v", res, err)
	}
	if n := len(p.calls("initialize")); n != 2 {
		t.Fatalf("%d initialize sent, want 2", n)
	}
	calls = p.calls("tools/call")
	if s := calls[len(calls)-1].header.Get("Mcp-Session-Id"); s == session || s == "" {
		t.Fatalf("the call after the session ended went with session %q (the old one: %q)", s, session)
	}
}

type regionArgs struct {
	Region string `json:"region" mcpheader:"Region"`
	Text   string `json:"text"`
}

// A tool that mirrors a parameter in a header (SEP-2243) gets the header:
// learned from tools/list after the first refusal, then sent at once.
func TestParamHeaders(t *testing.T) {
	t.Parallel()
	var cancelled atomic.Int64
	mux := testTools(&cancelled)
	consumer.Handle(mux, consumer.Tool{Name: "regional"},
		func(ctx context.Context, c *consumer.Call[regionArgs]) (*consumer.Result, error) {
			return consumer.TextResult(c.Args.Region + ": " + c.Args.Text), nil
		})
	srv, err := startServer(mux)
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	p := newProxy(srv.URL)
	defer p.Close()
	c := newClient(t, p.URL, client.WithVersion(client.Version2026))
	for _, region := range []string{"eu-west-1", " Zürich "} {
		res, err := c.Call(t.Context(), "regional", regionArgs{Region: region, Text: "hi"})
		if err != nil || res.Text() != region+": hi" {
			t.Fatalf("regional %q: %v %v", region, res, err)
		}
	}
	calls := p.calls("tools/call")
	if len(calls) != 3 || calls[1].header.Get("Mcp-Param-Region") != "eu-west-1" || calls[2].header.Get("Mcp-Param-Region") != "=?base64?IFrDvHJpY2gg?=" {
		t.Fatalf("%d tools/call; want the refused one, then one with the header, then one with it at once", len(calls))
	}
	if n := len(p.calls("tools/list")); n != 1 {
		t.Fatalf("tools/list read %d times, want once", n)
	}
}
