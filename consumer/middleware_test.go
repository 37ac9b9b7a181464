package consumer_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mcpqueue/mcpqueue/consumer"
	"github.com/mcpqueue/mcpqueue/consumer/consumertest"
	"github.com/mcpqueue/mcpqueue/producer"
	"github.com/mcpqueue/mcpqueue/taskstate"
)

// trace records, in order, what middleware and handlers did.
type trace struct {
	mu    sync.Mutex
	steps []string
}

func (tr *trace) add(step string) {
	tr.mu.Lock()
	tr.steps = append(tr.steps, step)
	tr.mu.Unlock()
}

// take returns the steps so far, space-separated, and forgets them.
func (tr *trace) take() string {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	s := strings.Join(tr.steps, " ")
	tr.steps = nil
	return s
}

// mw is a middleware that records "name>" before the run and "<name" after.
func (tr *trace) mw(name string) func(consumer.Handler) consumer.Handler {
	return func(next consumer.Handler) consumer.Handler {
		return func(ctx context.Context, req *consumer.Request) (json.RawMessage, error) {
			tr.add(name + ">")
			res, err := next(ctx, req)
			tr.add("<" + name)
			return res, err
		}
	}
}

// tool registers tool name on m; its handler records step and answers
// with it.
func (tr *trace) tool(m *consumer.Mux, name, step string) {
	consumer.Handle(m, consumer.Tool{Name: name}, func(ctx context.Context, c *consumer.Call[none]) (*consumer.Result, error) {
		tr.add(step)
		return consumer.TextResult(step), nil
	})
}

// recv waits for ch's next value, at most 15s.
func recv[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(15 * time.Second):
		t.Fatalf("no %s within 15s", what)
		panic("unreachable")
	}
}

// call runs tool on h and fails t unless it completed with text want.
func call(t *testing.T, h *consumertest.Harness, tool, want string) {
	t.Helper()
	out, err := h.Call(t.Context(), tool, none{})
	if err != nil {
		t.Fatal(err)
	}
	if out.Status != taskstate.Completed || out.Text() != want {
		t.Fatalf("%s: %s %q %+v, want completed %q", tool, out.Status, out.Text(), out.Error, want)
	}
}

// The first middleware is the outermost, across Use calls too; tools
// registered before and after Use, and middleware added while the worker
// runs, all count.
func TestUseOrderAndLateRegistration(t *testing.T) {
	t.Parallel()
	tr := &trace{}
	m := consumer.NewMux()
	tr.tool(m, "before", "before")
	m.Use(tr.mw("a"), tr.mw("b"))
	m.Use(tr.mw("c"))
	tr.tool(m, "after", "after")
	h := consumertest.New(t, m, nil)

	for _, tool := range []string{"before", "after"} {
		call(t, h, tool, tool)
		if got, want := tr.take(), "a> b> c> "+tool+" <c <b <a"; got != want {
			t.Errorf("%s ran %q, want %q", tool, got, want)
		}
	}
	m.Use(tr.mw("d"))
	call(t, h, "after", "after")
	if got, want := tr.take(), "a> b> c> d> after <d <c <b <a"; got != want {
		t.Errorf("after a Use on the running Mux: %q, want %q", got, want)
	}
}

type ctxKey struct{}

// A middleware sees the run's task, owner, attempt and arguments; the
// context it passes on is the handler's, cancellation included.
func TestUseRequestAndContext(t *testing.T) {
	t.Parallel()
	type seen struct {
		kind, name, task, owner, args string
		attempt                       int
	}
	got := make(chan seen, 1)
	m := consumer.NewMux()
	m.Use(func(next consumer.Handler) consumer.Handler {
		return func(ctx context.Context, req *consumer.Request) (json.RawMessage, error) {
			got <- seen{req.Kind(), req.Name(), req.TaskID(), req.Owner(), string(req.Arguments()), req.Attempt()}
			return next(context.WithValue(ctx, ctxKey{}, "from middleware"), req)
		}
	})
	started := make(chan string, 1)
	ended := make(chan error, 1)
	release := make(chan struct{})
	consumer.Handle(m, consumer.Tool{Name: "wait"}, func(ctx context.Context, c *consumer.Call[WordCountArgs]) (*consumer.Result, error) {
		started <- fmt.Sprint(ctx.Value(ctxKey{}))
		select {
		case <-ctx.Done():
			ended <- context.Cause(ctx)
		case <-release: // the test failed: let the harness close
		}
		return nil, ctx.Err()
	})
	h := consumertest.New(t, m, nil)
	t.Cleanup(func() { close(release) }) // before the harness's Close

	r, err := h.Start(t.Context(), "wait", WordCountArgs{Text: "a b"}, consumertest.Owner("alice"))
	if err != nil {
		t.Fatal(err)
	}
	if v := recv(t, started, "handler run"); v != "from middleware" {
		t.Errorf("the handler's ctx carries %q, want the middleware's value", v)
	}
	want := seen{kind: taskstate.KindTool, name: "wait", task: r.ID(), owner: "alice", args: `{"text":"a b"}`, attempt: 1}
	if s := recv(t, got, "middleware run"); s != want {
		t.Errorf("the middleware saw %+v, want %+v", s, want)
	}
	if err := r.Cancel(t.Context()); err != nil {
		t.Fatal(err)
	}
	if cause := recv(t, ended, "end of the handler's ctx"); !errors.Is(cause, consumer.ErrTaskCancelled) {
		t.Errorf("the handler's ctx ended with %v, want ErrTaskCancelled", cause)
	}
	out, err := r.Wait(t.Context())
	if err != nil || out.Status != taskstate.Cancelled {
		t.Fatalf("want cancelled, got %+v %v", out, err)
	}
}

// A middleware that answers without calling next ends the task as its
// answer says, and the handler never runs.
func TestUseShortCircuit(t *testing.T) {
	t.Parallel()
	m := consumer.NewMux()
	m.Use(func(next consumer.Handler) consumer.Handler {
		return func(ctx context.Context, req *consumer.Request) (json.RawMessage, error) {
			switch req.Name() {
			case "refused":
				return nil, &consumer.ProtocolError{Code: -32001, Message: "not for you"}
			case "tool_error":
				return nil, consumer.ToolError(errors.New("say please"))
			case "cached":
				return json.RawMessage(`{"content":[{"type":"text","text":"from the cache"}]}`), nil
			case "nothing":
				return nil, nil
			}
			return next(ctx, req)
		}
	})
	var runs atomic.Int32
	for _, name := range []string{"refused", "tool_error", "cached", "nothing"} {
		consumer.Handle(m, consumer.Tool{Name: name}, func(ctx context.Context, c *consumer.Call[none]) (*consumer.Result, error) {
			runs.Add(1)
			return consumer.TextResult("ran"), nil
		})
	}
	h := consumertest.New(t, m, nil)
	outcome := func(tool string) *consumertest.Outcome {
		out, err := h.Call(t.Context(), tool, none{})
		if err != nil {
			t.Fatal(err)
		}
		return out
	}

	if out := outcome("refused"); out.Status != taskstate.Failed || out.Error.Code != -32001 || out.Error.Message != "not for you" {
		t.Errorf("refused: %s %+v", out.Status, out.Error)
	}
	if out := outcome("tool_error"); out.Status != taskstate.Completed || !out.Result.IsError || out.Text() != "say please" {
		t.Errorf("tool_error: %s %+v %q", out.Status, out.Result, out.Text())
	}
	if out := outcome("cached"); out.Status != taskstate.Completed || out.Result.IsError || out.Text() != "from the cache" {
		t.Errorf("cached: %s %+v %q", out.Status, out.Result, out.Text())
	}
	if out := outcome("nothing"); out.Status != taskstate.Failed || !strings.Contains(out.Error.Message, "neither a result nor an error") {
		t.Errorf("nothing: %s %+v", out.Status, out.Error)
	}
	if n := runs.Load(); n != 0 {
		t.Errorf("handlers ran %d times behind a middleware that answered", n)
	}
}

// A middleware that recovers turns a handler's panic into a tool error; a
// panic outside it (in a middleware further out) still fails the task, as
// the worker recovers around the whole chain.
func TestUseRecover(t *testing.T) {
	t.Parallel()
	m := consumer.NewMux()
	m.Use(func(next consumer.Handler) consumer.Handler {
		return func(ctx context.Context, req *consumer.Request) (json.RawMessage, error) {
			if req.Name() == "outer_panics" {
				panic("in the outer middleware")
			}
			return next(ctx, req)
		}
	}, func(next consumer.Handler) consumer.Handler {
		return func(ctx context.Context, req *consumer.Request) (res json.RawMessage, err error) {
			defer func() {
				if p := recover(); p != nil {
					res, err = nil, consumer.ToolError(fmt.Errorf("recovered: %v", p))
				}
			}()
			return next(ctx, req)
		}
	})
	for _, name := range []string{"panics", "outer_panics"} {
		consumer.Handle(m, consumer.Tool{Name: name}, func(ctx context.Context, c *consumer.Call[none]) (*consumer.Result, error) {
			panic("boom")
		})
	}
	h := consumertest.New(t, m, nil)

	out, err := h.Call(t.Context(), "panics", none{})
	if err != nil {
		t.Fatal(err)
	}
	if out.Status != taskstate.Completed || !out.Result.IsError || out.Text() != "recovered: boom" {
		t.Errorf("panics: %s %+v %q, want a tool error", out.Status, out.Error, out.Text())
	}
	out, err = h.Call(t.Context(), "outer_panics", none{})
	if err != nil {
		t.Fatal(err)
	}
	if out.Status != taskstate.Failed || !strings.Contains(out.Error.Message, `"outer_panics" panicked: in the outer middleware`) {
		t.Errorf("outer_panics: %s %+v, want failed by the worker's recovery", out.Status, out.Error)
	}
}

// A Mux narrowed by Only runs its parent's middleware (Use'd before or
// after Only), then its own; entries Replace installs keep their Mux's
// middleware inside, before the worker runs and while it does.
func TestUseOnlyAndReplace(t *testing.T) {
	t.Parallel()
	tr := &trace{}
	m := consumer.NewMux()
	tr.tool(m, "static", "static")
	m.Use(tr.mw("m"))
	sub := consumer.NewMux()
	sub.Use(tr.mw("sub"))
	tr.tool(sub, "a", "a")
	if err := m.Replace("g", sub); err != nil {
		t.Fatal(err)
	}
	sub.Use(tr.mw("late")) // after Replace: m's copy does not have it
	narrowed, err := m.Only("static", "a")
	if err != nil {
		t.Fatal(err)
	}
	narrowed.Use(tr.mw("only"))
	m.Use(tr.mw("m2"))
	onNarrowed := consumertest.New(t, narrowed, nil)
	onParent := consumertest.New(t, m, nil)

	for _, c := range []struct {
		h          *consumertest.Harness
		tool, want string
	}{
		{onNarrowed, "static", "m> m2> only> static <only <m2 <m"},
		{onNarrowed, "a", "m> m2> only> sub> a <sub <only <m2 <m"},
		{onParent, "a", "m> m2> sub> a <sub <m2 <m"},
	} {
		call(t, c.h, c.tool, c.tool)
		if got := tr.take(); got != c.want {
			t.Errorf("%s ran %q, want %q", c.tool, got, c.want)
		}
	}

	// Replaced while the workers run: the new a has no middleware of its
	// own, and runs m's (and the narrowed Mux's) all the same.
	sub2 := consumer.NewMux()
	tr.tool(sub2, "a", "a2")
	if err := m.Replace("g", sub2); err != nil {
		t.Fatal(err)
	}
	call(t, onNarrowed, "a", "a2")
	if got, want := tr.take(), "m> m2> only> a2 <only <m2 <m"; got != want {
		t.Errorf("a after the second Replace ran %q, want %q", got, want)
	}
}

// Middleware wraps prompts too, and tells them apart by Kind.
func TestUseWrapsPrompts(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	m := consumer.NewMux()
	kinds := make(chan string, 1)
	m.Use(func(next consumer.Handler) consumer.Handler {
		return func(ctx context.Context, req *consumer.Request) (json.RawMessage, error) {
			kinds <- req.Kind() + "/" + req.Name()
			return next(ctx, req)
		}
	})
	consumer.HandlePrompt(m, consumer.Prompt{Name: "greet"}, func(ctx context.Context, c *consumer.Call[map[string]string]) (*consumer.PromptResult, error) {
		return &consumer.PromptResult{Messages: []consumer.PromptMessage{{Role: "user", Content: consumer.Text("hello " + c.Args["who"])}}}, nil
	})
	e.run(t, m, nil)

	tk, err := e.prod.Create(t.Context(), &producer.Request{Kind: taskstate.KindPrompt, Tool: "greet", Arguments: json.RawMessage(`{"who":"bob"}`), Era: taskstate.Era20260728})
	if err != nil {
		t.Fatal(err)
	}
	done := e.waitFor(t, tk.ID, terminal)
	if done.Status != taskstate.Completed || !strings.Contains(string(done.Result), "hello bob") {
		t.Fatalf("prompt ended %s %s %+v", done.Status, done.Result, done.Error)
	}
	if k := recv(t, kinds, "middleware run"); k != "prompt/greet" {
		t.Errorf("the middleware saw %q, want prompt/greet", k)
	}
}
