package consumer_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mcpqueue/mcpqueue/consumer"
	"github.com/mcpqueue/mcpqueue/internal/testenv"
	"github.com/mcpqueue/mcpqueue/producer"
	"github.com/mcpqueue/mcpqueue/taskstate"
	"github.com/mcpqueue/mcpqueue/vocab"
)

// createAsking creates a task whose client declared elicitation, owned by owner.
func (e *env) createAsking(t *testing.T, tool, owner string) string {
	t.Helper()
	tk, err := e.prod.Create(context.Background(), &producer.Request{
		Tool: tool, Owner: owner, Era: taskstate.Era20260728, Arguments: json.RawMessage(`{}`),
		Meta: map[string]json.RawMessage{vocab.MetaClientCaps: json.RawMessage(`{"elicitation":{}}`)},
	})
	if err != nil {
		t.Fatal(err)
	}
	return tk.ID
}

// answer does what the api's tasks/update does with the last answers to a
// task: stores answer for every open request, turns the task working, and,
// when it is parked, publishes its job again.
func (e *env) answer(t *testing.T, id, answer string) {
	t.Helper()
	resume := false
	tk, err := taskstate.Mutate(context.Background(), e.store, id, time.Now, func(t *taskstate.Task) error {
		for k := range t.InputRequests {
			if t.InputResponses == nil {
				t.InputResponses = map[string]json.RawMessage{}
			}
			t.InputResponses[k] = json.RawMessage(answer)
			delete(t.InputRequests, k)
		}
		t.Status = taskstate.Working
		if resume = t.Parked != nil; resume {
			t.Parked = nil
			t.Requeues++
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if resume {
		if err := e.prod.Resume(context.Background(), tk); err != nil {
			t.Fatal(err)
		}
	}
}

func parked(tk *taskstate.Task) bool { return tk.Parked != nil }

// A run that gets no answer within ParkAfter parks: the task waits
// input_required with no lease and no job, the slot runs other work, and the
// last answer runs the handler again, which gets the stored answer without
// asking again and finds its checkpoint. The park is not an attempt.
func TestParkAndResume(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	var runs, asks, restored atomic.Int32
	mux := consumer.NewMux()
	consumer.Handle(mux, consumer.Tool{Name: "ask", ParkAfter: 300 * time.Millisecond, MaxAttempts: 1},
		func(ctx context.Context, c *consumer.Call[none]) (*consumer.Result, error) {
			runs.Add(1)
			var step int
			if ok, err := c.Restore(&step); err != nil {
				return nil, err
			} else if ok && step == 1 {
				restored.Add(1)
			}
			if err := c.Checkpoint(ctx, 1); err != nil {
				return nil, err
			}
			r, err := c.Elicit(ctx, "confirm", "Sure?", map[string]any{"type": "object"})
			if err != nil {
				if errors.Is(err, consumer.ErrParked) {
					asks.Add(1)
				}
				return nil, err
			}
			return consumer.TextResult(r.Action), nil
		})
	consumer.Handle(mux, consumer.Tool{Name: "quick"}, func(ctx context.Context, c *consumer.Call[none]) (*consumer.Result, error) {
		return consumer.TextResult("quick"), nil
	})
	e.run(t, mux, &consumer.Config{Concurrency: 1})

	id := e.createAsking(t, "ask", "")
	tk := e.waitFor(t, id, parked)
	if tk.Status != taskstate.InputRequired || tk.Lease != nil || tk.Parks != 1 || len(tk.InputRequests) != 1 || !tk.Parked.Until.After(tk.Parked.Since) {
		t.Fatalf("parked record: %+v", tk)
	}
	// The one slot is free: another task runs while this one waits.
	if q := e.waitFor(t, e.create(t, "quick", none{}), terminal); q.Status != taskstate.Completed {
		t.Fatalf("a task behind the parked one: %s", q.Status)
	}
	e.answer(t, id, `{"action":"accept","content":{"ok":true}}`)
	tk = e.waitFor(t, id, terminal)
	if tk.Status != taskstate.Completed || resultTextOf(tk) != "accept" {
		t.Fatalf("after the answer: %s %s", tk.Status, tk.Result)
	}
	if runs.Load() != 2 || asks.Load() != 1 || restored.Load() != 1 || len(tk.InputResponses) != 1 {
		t.Fatalf("runs %d, parks seen %d, checkpoints restored %d, answers %d; want 2, 1, 1, 1", runs.Load(), asks.Load(), restored.Load(), len(tk.InputResponses))
	}
	if tk.Attempt != 2 || tk.Parks != 1 || tk.Runs() != 1 || tk.Parked != nil {
		t.Fatalf("attempt %d parks %d: the park must not count as an attempt (MaxAttempts 1)", tk.Attempt, tk.Parks)
	}
}

// A job that arrives for a parked task (a stale copy) is dropped, not run.
func TestParkedTaskIgnoresStaleJob(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	var runs atomic.Int32
	e.serve(t, consumer.Tool{Name: "ask", ParkAfter: 200 * time.Millisecond}, nil,
		func(ctx context.Context, c *consumer.Call[none]) (*consumer.Result, error) {
			runs.Add(1)
			_, err := c.Elicit(ctx, "confirm", "Sure?", map[string]any{"type": "object"})
			return nil, err
		})
	id := e.createAsking(t, "ask", "")
	tk := e.waitFor(t, id, parked)
	tk.Requeues++ // a copy under a new dedupe key, as a confused reaper would send
	if err := e.prod.Resume(context.Background(), tk); err != nil {
		t.Fatal(err)
	}
	e.waitFor(t, e.create(t, "ask", none{}), func(tk *taskstate.Task) bool { return tk.Status.Terminal() || tk.Attempt > 0 })
	if got, _ := e.store.Get(context.Background(), id); got.Attempt != 1 || runs.Load() > 2 {
		t.Fatalf("the stale job ran the parked task: attempt %d, runs %d", got.Attempt, runs.Load())
	}
}

// An owner with MaxWaitingInput tasks waiting cannot park another: that
// task fails saying why; another owner's task parks.
func TestWaitingInputCap(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.serve(t, consumer.Tool{Name: "ask", ParkAfter: 200 * time.Millisecond}, &consumer.Config{MaxWaitingInput: 2, Concurrency: 4},
		func(ctx context.Context, c *consumer.Call[none]) (*consumer.Result, error) {
			_, err := c.Elicit(ctx, "confirm", "Sure?", map[string]any{"type": "object"})
			return nil, err
		})
	for range 2 {
		e.waitFor(t, e.createAsking(t, "ask", "alice"), parked)
	}
	tk := e.waitFor(t, e.createAsking(t, "ask", "alice"), terminal)
	if tk.Status != taskstate.Failed || tk.Error == nil || !strings.Contains(tk.Error.Message, "already has 2 tasks waiting for input") {
		t.Fatalf("alice's third waiting task: %s %+v", tk.Status, tk.Error)
	}
	e.waitFor(t, e.createAsking(t, "ask", "bob"), parked)
}

func resultTextOf(tk *taskstate.Task) string {
	var r consumer.Result
	if json.Unmarshal(tk.Result, &r) != nil || len(r.Content) == 0 || r.Content[0].Text == nil {
		return ""
	}
	return *r.Content[0].Text
}

// One principal with many long tasks holds at most its share (half of 4
// slots); another principal's task behind them in the queue runs at once.
func TestPrincipalShare(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	var running, most atomic.Int32
	e.serve(t, consumer.Tool{Name: "long"}, &consumer.Config{Concurrency: 4}, func(ctx context.Context, c *consumer.Call[none]) (*consumer.Result, error) {
		if c.Owner() == "alice" {
			n := running.Add(1)
			for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
			}
			defer running.Add(-1)
			<-ctx.Done()
			return nil, ctx.Err()
		}
		return consumer.TextResult("short"), nil
	})
	var alice []string
	for range 12 {
		tk, err := e.prod.Create(context.Background(), &producer.Request{Tool: "long", Owner: "alice", Era: taskstate.Era20260728})
		if err != nil {
			t.Fatal(err)
		}
		alice = append(alice, tk.ID)
	}
	// Which two of her twelve win the share depends on which the worker's
	// goroutines reach first, so wait for the count, not for particular ones.
	testenv.Eventually(t, 15*time.Second, "alice running her share", func() bool { return running.Load() == 2 })
	created := time.Now()
	tk, err := e.prod.Create(context.Background(), &producer.Request{Tool: "long", Owner: "carol", Era: taskstate.Era20260728})
	if err != nil {
		t.Fatal(err)
	}
	if got := e.waitFor(t, tk.ID, terminal); got.Status != taskstate.Completed || time.Since(created) > 2*time.Second {
		t.Fatalf("carol's task behind alice's twelve: %s after %s", got.Status, time.Since(created))
	}
	if most.Load() != 2 {
		t.Fatalf("alice ran %d tasks at once on 4 slots, want her share, 2", most.Load())
	}
	for _, id := range alice {
		if _, err := e.prod.Cancel(context.Background(), id, "test over"); err != nil {
			t.Fatal(err)
		}
	}
}
