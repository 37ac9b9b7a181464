package consumertest_test

import (
	"context"
	"encoding/json"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mcpqueue/mcpqueue/consumer"
	"github.com/mcpqueue/mcpqueue/consumer/consumertest"
	"github.com/mcpqueue/mcpqueue/taskstate"
)

type who struct {
	Owner   string `json:"owner"`
	TaskID  string `json:"taskId"`
	Attempt int    `json:"attempt"`
	Sync    bool   `json:"sync"`
}

// The handler sees the call as a worker runs it: its owner, task id and
// attempt, in a task.
func TestCallSeesItsTask(t *testing.T) {
	t.Parallel()
	mux := consumer.NewMux()
	consumer.Handle(mux, consumer.Tool{Name: "whoami"}, func(ctx context.Context, c *consumer.Call[struct{}]) (who, error) {
		return who{c.Owner(), c.TaskID(), c.Attempt(), c.Sync()}, nil
	})
	h := consumertest.New(t, mux, nil)
	run, err := h.Start(t.Context(), "whoami", struct{}{}, consumertest.Owner("alice"))
	if err != nil {
		t.Fatal(err)
	}
	out, err := run.Wait(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	var got who
	if err := out.Decode(&got); err != nil {
		t.Fatal(err)
	}
	if want := (who{"alice", run.ID(), 1, false}); got != want {
		t.Fatalf("the handler saw %+v, want %+v", got, want)
	}
	if err := run.Cancel(t.Context()); !errors.Is(err, consumertest.ErrEnded) {
		t.Fatalf("Cancel of a completed call = %v, want ErrEnded", err)
	}
}

// Errors other than a ToolError fail the call with a JSON-RPC error.
func TestFailures(t *testing.T) {
	t.Parallel()
	mux := consumer.NewMux()
	consumer.Handle(mux, consumer.Tool{Name: "protocol"}, func(ctx context.Context, c *consumer.Call[struct{}]) (*consumer.Result, error) {
		return nil, &consumer.ProtocolError{Code: -32042, Message: "custom"}
	})
	consumer.Handle(mux, consumer.Tool{Name: "panics"}, func(ctx context.Context, c *consumer.Call[struct{}]) (*consumer.Result, error) {
		panic("boom")
	})
	consumer.Handle(mux, consumer.Tool{Name: "slow", Timeout: 50 * time.Millisecond}, func(ctx context.Context, c *consumer.Call[struct{}]) (*consumer.Result, error) {
		<-ctx.Done()
		return nil, ctx.Err()
	})
	h := consumertest.New(t, mux, nil)
	for tool, code := range map[string]int{"protocol": -32042, "panics": -32603, "slow": -32603} {
		out, err := h.Call(t.Context(), tool, struct{}{})
		if err != nil {
			t.Fatal(err)
		}
		if out.Status != taskstate.Failed || out.Error == nil || out.Error.Code != code || out.Result != nil {
			t.Errorf("%s: %s %+v %v, want failed with code %d", tool, out.Status, out.Error, out.Result, code)
		}
	}
}

// Several requests at once, of different methods, each answered from the
// script; log messages are heard in order.
func TestAskManyAndLogs(t *testing.T) {
	t.Parallel()
	mux := consumer.NewMux()
	consumer.Handle(mux, consumer.Tool{Name: "ask"}, func(ctx context.Context, c *consumer.Call[struct{}]) (*consumer.Result, error) {
		_ = c.Log(ctx, "info", "asking")
		answers, err := c.Ask(ctx,
			consumer.Sampling("draft", map[string]any{"maxTokens": 10}),
			consumer.RootsList("roots"))
		if err != nil {
			return nil, err
		}
		_ = c.Log(ctx, "warning", map[string]any{"answers": len(answers)})
		return consumer.TextResult(string(answers[0]) + " " + string(answers[1])), nil
	})
	h := consumertest.New(t, mux, nil)
	run, err := h.Start(t.Context(), "ask", struct{}{},
		consumertest.Answer("draft", map[string]any{"role": "assistant"}),
		consumertest.Answer("roots", map[string]any{"roots": []any{}}))
	if err != nil {
		t.Fatal(err)
	}
	out, err := run.Wait(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if got, want := out.Text(), `{"role":"assistant"} {"roots":[]}`; got != want {
		t.Fatalf("result %q, want %q", got, want)
	}
	reqs := run.Requests()
	if len(reqs) != 2 || reqs[0].Method != "sampling/createMessage" || reqs[1].Method != "roots/list" {
		t.Fatalf("requests %+v, want a sampling and a roots request", reqs)
	}
	logs := run.Logs()
	if len(logs) != 2 || logs[0].Level != "info" || string(logs[0].Data) != `"asking"` || logs[1].Level != "warning" || logs[1].Logger != "ask" {
		t.Fatalf("logs %+v", logs)
	}
}

// A call that waits past the tool's ParkAfter parks (its run ends); the
// answer resumes it, and the handler runs again from the top and gets the
// stored answer.
func TestParkedCallResumes(t *testing.T) {
	t.Parallel()
	var runs atomic.Int32
	mux := consumer.NewMux()
	consumer.Handle(mux, consumer.Tool{Name: "approve", ParkAfter: 20 * time.Millisecond}, func(ctx context.Context, c *consumer.Call[struct{}]) (*consumer.Result, error) {
		runs.Add(1)
		r, err := c.Elicit(ctx, "ok", "Approve?", map[string]any{"type": "object"})
		if err != nil {
			return nil, err
		}
		return consumer.TextResult(r.Action), nil
	})
	h := consumertest.New(t, mux, nil)
	run, err := h.Start(t.Context(), "approve", struct{}{})
	if err != nil {
		t.Fatal(err)
	}
	out, err := run.Wait(t.Context())
	if err != nil || out.Status != taskstate.InputRequired {
		t.Fatalf("Wait = %+v, %v; want input_required", out, err)
	}
	// Until the run parks.
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	updates, err := h.Store().Watch(ctx, run.ID())
	if err != nil {
		t.Fatal(err)
	}
	for tk := range updates {
		if tk.Parked != nil {
			break
		}
	}
	if err := run.Answer("ok", consumer.ElicitResult{Action: "accept"}); err != nil {
		t.Fatal(err)
	}
	out, err = run.Wait(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if out.Status != taskstate.Completed || out.Text() != "accept" || runs.Load() != 2 {
		t.Fatalf("after the answer: %s %q with %d runs, want completed \"accept\" with 2 runs", out.Status, out.Text(), runs.Load())
	}
}

// A call cancelled while it waits for an answer ends cancelled, and its
// handler returns.
func TestCancelWhileAsking(t *testing.T) {
	t.Parallel()
	returned := make(chan error, 1)
	mux := consumer.NewMux()
	consumer.Handle(mux, consumer.Tool{Name: "ask", ParkAfter: -1}, func(ctx context.Context, c *consumer.Call[struct{}]) (*consumer.Result, error) {
		_, err := c.Elicit(ctx, "q", "?", map[string]any{"type": "object"})
		returned <- err
		return nil, err
	})
	h := consumertest.New(t, mux, nil)
	run, err := h.Start(t.Context(), "ask", struct{}{})
	if err != nil {
		t.Fatal(err)
	}
	if out, err := run.Wait(t.Context()); err != nil || out.Status != taskstate.InputRequired {
		t.Fatalf("Wait = %+v, %v; want input_required", out, err)
	}
	if err := run.Cancel(t.Context()); err != nil {
		t.Fatal(err)
	}
	out, err := run.Wait(t.Context())
	if err != nil || out.Status != taskstate.Cancelled {
		t.Fatalf("Wait after Cancel = %+v, %v; want cancelled", out, err)
	}
	select {
	case err := <-returned:
		if err == nil {
			t.Fatal("Elicit returned no error for a cancelled call")
		}
	default:
		t.Fatal("Wait returned before the handler did")
	}
}

// A script's answer that does not encode is refused at once.
func TestBadAnswer(t *testing.T) {
	t.Parallel()
	mux := consumer.NewMux()
	consumer.Handle(mux, consumer.Tool{Name: "x"}, func(ctx context.Context, c *consumer.Call[struct{}]) (*consumer.Result, error) {
		return consumer.TextResult(""), nil
	})
	h := consumertest.New(t, mux, nil)
	if _, err := h.Start(t.Context(), "x", struct{}{}, consumertest.Answer("k", make(chan int))); err == nil {
		t.Fatal("Start with an answer that is not JSON succeeded")
	}
	if _, err := h.Start(t.Context(), "x", json.RawMessage(`{`)); err == nil {
		t.Fatal("Start with arguments that are not JSON succeeded")
	}
}
