package consumer_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mcpqueue/mcpqueue/broker"
	"github.com/mcpqueue/mcpqueue/consumer"
	"github.com/mcpqueue/mcpqueue/producer"
	"github.com/mcpqueue/mcpqueue/taskstate"
)

// died leaves task id as a worker that took it and died mid-run leaves it:
// its job delivered and never settled (the broker hands it out again after
// lease), its attempt on the record under the dead worker's lease.
func (e *env) died(t *testing.T, id, tool string, lease time.Duration, change func(*taskstate.Task)) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cons, err := e.queue.Consumer(ctx, broker.ConsumerOptions{Tools: []broker.ToolRoute{{Tool: tool}}, Lease: lease, MaxDeliveries: 10})
	if err != nil {
		t.Fatal(err)
	}
	d, err := cons.Next(ctx)
	if err != nil {
		t.Fatalf("the dead worker's delivery: %v", err)
	}
	if d.Job().TaskID != id {
		t.Fatalf("the dead worker got task %s, want %s", d.Job().TaskID, id)
	}
	if _, err := taskstate.Mutate(ctx, e.store, id, time.Now, func(t *taskstate.Task) error {
		t.Attempt++
		t.Lease = &taskstate.Lease{Worker: "dead", Expires: time.Now().Add(lease).UTC()}
		if change != nil {
			change(t)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
}

// runCounter counts the runs of each tool's handler.
type runCounter struct {
	mu   sync.Mutex
	runs map[string]int
}

func (r *runCounter) add(tool string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.runs == nil {
		r.runs = map[string]int{}
	}
	r.runs[tool]++
}

func (r *runCounter) of(tool string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.runs[tool]
}

// A worker dies mid-run; the job comes back. A tool whose annotations say
// it is not safe to repeat (or Redeliver says so) is not run again: the
// task fails saying why. Every other tool runs again and completes.
func TestNoRepeatAfterWorkerDied(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	const lease = time.Second
	cases := []struct {
		tool  consumer.Tool
		again bool   // the handler runs again
		why   string // else: the reason in the statusMessage
	}{
		{consumer.Tool{Name: "unsafe", Annotations: map[string]any{"idempotentHint": false}}, false, "(idempotentHint: false)"},
		{consumer.Tool{Name: "destructive", Annotations: map[string]any{"destructiveHint": true}}, false, "(destructiveHint: true)"},
		{consumer.Tool{Name: "never", Redeliver: consumer.RedeliverNever}, false, "(Redeliver: RedeliverNever)"},
		{consumer.Tool{Name: "idempotent", Annotations: map[string]any{"idempotentHint": true}}, true, ""},
		{consumer.Tool{Name: "destructive_idempotent", Annotations: map[string]any{"destructiveHint": true, "idempotentHint": true}}, true, ""},
		{consumer.Tool{Name: "read_only", Annotations: map[string]any{"readOnlyHint": true, "idempotentHint": false}}, true, ""},
		{consumer.Tool{Name: "always", Annotations: map[string]any{"idempotentHint": false}, Redeliver: consumer.RedeliverAlways}, true, ""},
		{consumer.Tool{Name: "unannotated"}, true, ""},
		{consumer.Tool{Name: "null_hint", Annotations: map[string]any{"idempotentHint": nil, "title": "x"}}, true, ""},
	}
	var runs runCounter
	mux := consumer.NewMux()
	ids := map[string]string{}
	for _, c := range cases {
		name := c.tool.Name
		consumer.Handle(mux, c.tool, func(ctx context.Context, call *consumer.Call[none]) (*consumer.Result, error) {
			runs.add(name)
			return consumer.TextResult("ran"), nil
		})
		ids[name] = e.create(t, name, none{})
		e.died(t, ids[name], name, lease, nil)
	}
	e.run(t, mux, &consumer.Config{Lease: lease})

	for _, c := range cases {
		name := c.tool.Name
		tk := e.waitFor(t, ids[name], terminal)
		switch {
		case c.again && (tk.Status != taskstate.Completed || tk.Attempt != 2 || runs.of(name) != 1):
			t.Errorf("%s: %s %q, attempt %d, handler ran %d times; want completed by a second attempt", name, tk.Status, tk.StatusMessage, tk.Attempt, runs.of(name))
		case c.again:
		case tk.Status != taskstate.Failed || runs.of(name) != 0 || tk.Error == nil || tk.Error.Message != tk.StatusMessage:
			t.Errorf("%s: %s %q (error %+v), handler ran %d times; want failed without running the handler", name, tk.Status, tk.StatusMessage, tk.Error, runs.of(name))
		default:
			want := `the worker running tool "` + name + `" died (attempt 1); ` + name + " is not safe to repeat " + c.why + ", so it was not run again"
			if tk.StatusMessage != want {
				t.Errorf("%s: statusMessage %q, want %q", name, tk.StatusMessage, want)
			}
			if tk.Lease != nil || tk.Attempt != 1 {
				t.Errorf("%s: failed with lease %+v, attempt %d; want no lease, attempt 1", name, tk.Lease, tk.Attempt)
			}
		}
	}
}

// The api's reaper finds the dead worker's lapsed lease before any worker
// does: it clears the lease and publishes the job again. The record still
// says that a run did not finish, so the tool is not run again.
func TestNoRepeatAfterReaperRequeue(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	const lease = time.Second
	var runs runCounter
	tool := consumer.Tool{Name: "charge", Annotations: map[string]any{"idempotentHint": false}}
	id := e.create(t, tool.Name, none{})
	e.died(t, id, tool.Name, lease, nil)
	deadline := time.Now().Add(10 * time.Second)
	for {
		st, err := e.prod.ReapOnce(context.Background(), &producer.ReaperConfig{LeaseSlack: time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		if st.Requeued == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the reaper never requeued the lapsed task")
		}
		time.Sleep(50 * time.Millisecond) // polling the reaper: the lease lapses in a second
	}
	if tk, _ := e.store.Get(context.Background(), id); tk.Lease != nil || tk.Requeues != 1 {
		t.Fatalf("after the reaper: lease %+v, requeues %d; want no lease, one requeue", tk.Lease, tk.Requeues)
	}
	e.serve(t, tool, &consumer.Config{Lease: lease}, func(ctx context.Context, c *consumer.Call[none]) (*consumer.Result, error) {
		runs.add(tool.Name)
		return consumer.TextResult("charged again"), nil
	})
	tk := e.waitFor(t, id, terminal)
	if tk.Status != taskstate.Failed || runs.of(tool.Name) != 0 || !strings.Contains(tk.StatusMessage, `"charge" died (attempt 1)`) {
		t.Fatalf("%s %q, handler ran %d times; want failed without running it", tk.Status, tk.StatusMessage, runs.of(tool.Name))
	}
}

// A handler of a tool not safe to repeat that kept a checkpoint runs again
// after its worker died, and finds the checkpoint.
func TestNoRepeatUnlessCheckpointed(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	const lease = time.Second
	type step struct{ Done int }
	restored := make(chan step, 2)
	tool := consumer.Tool{Name: "migrate", Annotations: map[string]any{"idempotentHint": false}}
	id := e.create(t, tool.Name, none{})
	e.died(t, id, tool.Name, lease, func(tk *taskstate.Task) { tk.Checkpoint = []byte(`{"Done":3}`) })
	e.serve(t, tool, &consumer.Config{Lease: lease}, func(ctx context.Context, c *consumer.Call[none]) (*consumer.Result, error) {
		var s step
		if _, err := c.Restore(&s); err != nil {
			return nil, err
		}
		restored <- s
		return consumer.TextResult("carried on"), nil
	})
	tk := e.waitFor(t, id, terminal)
	if tk.Status != taskstate.Completed || tk.Attempt != 2 {
		t.Fatalf("%s %q attempt %d; want completed by the second attempt", tk.Status, tk.StatusMessage, tk.Attempt)
	}
	if s := <-restored; s.Done != 3 {
		t.Fatalf("the second run restored %+v, want the checkpoint {Done:3}", s)
	}
}

// A handler of a tool not safe to repeat that returns a Retryable error
// chose to run again: it does, and completes.
func TestNoRepeatRetryableRunsAgain(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	var runs runCounter
	tool := consumer.Tool{Name: "send", Annotations: map[string]any{"destructiveHint": true}}
	e.serve(t, tool, nil, func(ctx context.Context, c *consumer.Call[none]) (*consumer.Result, error) {
		runs.add(tool.Name)
		if c.Attempt() == 1 {
			return nil, consumer.Retryable(errors.New("the mail server hung up before accepting"))
		}
		return consumer.TextResult("sent"), nil
	})
	tk := e.waitFor(t, e.create(t, tool.Name, none{}), terminal)
	if tk.Status != taskstate.Completed || tk.Attempt != 2 || tk.Retries != 1 || runs.of(tool.Name) != 2 {
		t.Fatalf("%s %q attempt %d retries %d, ran %d times; want completed by a second run after one retry", tk.Status, tk.StatusMessage, tk.Attempt, tk.Retries, runs.of(tool.Name))
	}
}

// A tool not safe to repeat has its take on the record before its handler
// runs (no lazy take): a crash at any point of the handler shows.
func TestNoRepeatTakesBeforeTheHandler(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	seen := make(chan *taskstate.Task, 1)
	tool := consumer.Tool{Name: "transfer", Annotations: map[string]any{"idempotentHint": false}}
	e.serve(t, tool, nil, func(ctx context.Context, c *consumer.Call[none]) (*consumer.Result, error) {
		tk, err := e.store.Get(ctx, c.TaskID())
		if err != nil {
			return nil, err
		}
		seen <- tk
		return consumer.TextResult("moved"), nil
	})
	if tk := e.waitFor(t, e.create(t, tool.Name, none{}), terminal); tk.Status != taskstate.Completed {
		t.Fatalf("%s %q", tk.Status, tk.StatusMessage)
	}
	if tk := <-seen; tk.Attempt != 1 || tk.Lease == nil {
		t.Fatalf("when the handler started the record had attempt %d, lease %+v; want attempt 1 under a lease", tk.Attempt, tk.Lease)
	}
}

// A worker's shutdown grace runs out while a tool not safe to repeat runs:
// the task fails saying so, instead of going back to the queue.
func TestNoRepeatAfterShutdown(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	started := make(chan struct{})
	tool := consumer.Tool{Name: "deploy", Annotations: map[string]any{"idempotentHint": false}}
	stop := e.serve(t, tool, &consumer.Config{ShutdownGrace: 50 * time.Millisecond}, func(ctx context.Context, c *consumer.Call[none]) (*consumer.Result, error) {
		close(started)
		<-ctx.Done()
		return nil, context.Cause(ctx)
	})
	id := e.create(t, tool.Name, none{})
	<-started
	stop()
	tk, err := e.store.Get(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	want := `the worker running tool "deploy" shut down before it finished (attempt 1); deploy is not safe to repeat (idempotentHint: false), so it was not run again`
	if tk.Status != taskstate.Failed || tk.StatusMessage != want {
		t.Fatalf("%s %q; want failed: %q", tk.Status, tk.StatusMessage, want)
	}
}

// An unknown Redeliver, or a hint Redeliver reads that is not a boolean,
// panics at registration, naming it.
func TestRedeliverMistakesPanic(t *testing.T) {
	h := func(ctx context.Context, c *consumer.Call[none]) (*consumer.Result, error) { return nil, nil }
	for want, tool := range map[string]consumer.Tool{
		"unknown Redeliver 7":                             {Name: "a", Redeliver: consumer.Redeliver(7)},
		"annotation idempotentHint is string false":       {Name: "b", Annotations: map[string]any{"idempotentHint": "false"}},
		"annotation destructiveHint is float64 1, want a": {Name: "c", Annotations: map[string]any{"destructiveHint": 1.0}},
	} {
		func() {
			defer func() {
				if p := recover(); p == nil || !strings.Contains(p.(string), want) || !strings.Contains(p.(string), `tool "`+tool.Name+`"`) {
					t.Errorf("registering %+v: panic %v, want one saying %q", tool, p, want)
				}
			}()
			consumer.Handle(consumer.NewMux(), tool, h)
		}()
	}
}
