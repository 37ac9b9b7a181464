package consumer_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/mcpqueue/mcpqueue/broker"
	"github.com/mcpqueue/mcpqueue/broker/natsbroker"
	"github.com/mcpqueue/mcpqueue/consumer"
	"github.com/mcpqueue/mcpqueue/internal/testenv"
	"github.com/mcpqueue/mcpqueue/producer"
	"github.com/mcpqueue/mcpqueue/taskstate"
	"github.com/mcpqueue/mcpqueue/taskstate/natskv"
	"github.com/mcpqueue/mcpqueue/vocab"
)

type env struct {
	queue broker.Queue
	bus   broker.Bus
	store *natskv.Store
	prod  *producer.Producer

	js      jetstream.JetStream
	stream  string     // the job stream
	deafBus broker.Bus // a bus producer broadcasts do not reach
}

func newEnv(t *testing.T) *env {
	t.Helper()
	n := testenv.StartNATS(t)
	s := n.Connect(t)
	return &env{
		queue: s.Queue, bus: s.Bus, store: s.Store, prod: producer.New(s.Store, producer.QueueExecutor{Queue: s.Queue, Bus: s.Bus}, nil),
		js: s.JS, stream: n.Broker.Stream, deafBus: natsbroker.NewBus(s.Conn, &natsbroker.Config{BusPrefix: n.Name + ".deaf"}),
	}
}

// run starts a worker for mux on the producer's bus (see worker).
func (e *env) run(t *testing.T, mux *consumer.Mux, cfg *consumer.Config) (stop func()) {
	t.Helper()
	var c consumer.Config
	if cfg != nil {
		c = *cfg
	}
	return e.worker(t, mux, e.bus, c)
}

// serve runs a worker (cfg as for run) for a Mux of the one tool tool,
// which takes no arguments and is handled by h.
func (e *env) serve(t *testing.T, tool consumer.Tool, cfg *consumer.Config, h func(context.Context, *consumer.Call[none]) (*consumer.Result, error)) (stop func()) {
	t.Helper()
	mux := consumer.NewMux()
	consumer.Handle(mux, tool, h)
	return e.run(t, mux, cfg)
}

func (e *env) create(t *testing.T, tool string, args any) string {
	t.Helper()
	b, _ := json.Marshal(args)
	tk, err := e.prod.Create(context.Background(), &producer.Request{Tool: tool, Arguments: b, Era: taskstate.Era20260728})
	if err != nil {
		t.Fatal(err)
	}
	return tk.ID
}

// waitFor watches the record until cond holds (or 15s pass).
func (e *env) waitFor(t *testing.T, id string, cond func(*taskstate.Task) bool) *taskstate.Task {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	ch, err := e.store.Watch(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	var last *taskstate.Task
	for tk := range ch {
		last = tk
		if cond(tk) {
			return tk
		}
	}
	t.Fatalf("task %s never reached the expected state; last: %+v", id, last)
	return nil
}

func terminal(tk *taskstate.Task) bool { return tk.Status.Terminal() }

type none struct{}

func TestTimeoutFailsTask(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.serve(t, consumer.Tool{Name: "slow", Timeout: 100 * time.Millisecond}, nil,
		func(ctx context.Context, c *consumer.Call[none]) (*consumer.Result, error) {
			<-ctx.Done()
			return nil, ctx.Err()
		})
	tk := e.waitFor(t, e.create(t, "slow", none{}), terminal)
	if tk.Status != taskstate.Failed || tk.Error == nil || !strings.Contains(tk.Error.Message, "timed out after 100ms") {
		t.Fatalf("want failed with a timeout message, got %s %+v", tk.Status, tk.Error)
	}
}

func TestToolErrorPanicAndProtocolError(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	mux := consumer.NewMux()
	consumer.Handle(mux, consumer.Tool{Name: "tool_error"}, func(ctx context.Context, c *consumer.Call[none]) (*consumer.Result, error) {
		return nil, consumer.ToolError(errors.New("bad input, try again"))
	})
	consumer.Handle(mux, consumer.Tool{Name: "panics"}, func(ctx context.Context, c *consumer.Call[none]) (*consumer.Result, error) {
		panic("boom")
	})
	consumer.Handle(mux, consumer.Tool{Name: "protocol"}, func(ctx context.Context, c *consumer.Call[none]) (*consumer.Result, error) {
		return nil, &consumer.ProtocolError{Code: -32042, Message: "custom"}
	})
	e.run(t, mux, nil)

	tk := e.waitFor(t, e.create(t, "tool_error", none{}), terminal)
	var res consumer.Result
	_ = json.Unmarshal(tk.Result, &res)
	if tk.Status != taskstate.Completed || !res.IsError || *res.Content[0].Text != "bad input, try again" {
		t.Fatalf("tool error: want completed+isError, got %s %s", tk.Status, tk.Result)
	}
	tk = e.waitFor(t, e.create(t, "panics", none{}), terminal)
	if tk.Status != taskstate.Failed || !strings.Contains(tk.Error.Message, "panicked: boom") {
		t.Fatalf("panic: want failed, got %s %+v", tk.Status, tk.Error)
	}
	tk = e.waitFor(t, e.create(t, "protocol", none{}), terminal)
	if tk.Status != taskstate.Failed || tk.Error.Code != -32042 || tk.Result != nil {
		t.Fatalf("protocol error: got %s %+v %s", tk.Status, tk.Error, tk.Result)
	}
}

func TestLeaseExtendedForLongHandler(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	var runs atomic.Int32
	e.serve(t, consumer.Tool{Name: "long"}, &consumer.Config{Lease: time.Second, Concurrency: 2}, func(ctx context.Context, c *consumer.Call[none]) (*consumer.Result, error) {
		runs.Add(1)
		select { // three times the lease: only renewals keep the job here
		case <-time.After(3 * time.Second):
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		return consumer.TextResult("done"), nil
	})
	tk := e.waitFor(t, e.create(t, "long", none{}), terminal)
	if tk.Status != taskstate.Completed || tk.Attempt != 1 || runs.Load() != 1 {
		t.Fatalf("want one run completing on attempt 1, got %s attempt=%d runs=%d", tk.Status, tk.Attempt, runs.Load())
	}
}

func TestExhaustedAttemptsFailTask(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	id := e.create(t, "crashy", none{})
	// A worker takes the job, starts it and dies without a word: the
	// delivery is never acked, so the lease lapses and the job comes back.
	cons, err := e.queue.Consumer(context.Background(), broker.ConsumerOptions{Tools: []broker.ToolRoute{{Tool: "crashy"}}, Lease: time.Second, MaxDeliveries: 10})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := cons.Next(ctx); err != nil {
		t.Fatalf("first delivery: %v", err)
	}
	if _, err := taskstate.Mutate(ctx, e.store, id, time.Now, func(t *taskstate.Task) error { t.Attempt = 1; return nil }); err != nil {
		t.Fatal(err)
	}

	var ran atomic.Bool
	e.serve(t, consumer.Tool{Name: "crashy"}, &consumer.Config{Lease: time.Second, MaxAttempts: 1}, func(ctx context.Context, c *consumer.Call[none]) (*consumer.Result, error) {
		ran.Store(true)
		return consumer.TextResult("should not run"), nil
	})
	tk := e.waitFor(t, id, terminal)
	if tk.Status != taskstate.Failed || !strings.Contains(tk.StatusMessage, "gave up after 1 attempts") || ran.Load() {
		t.Fatalf("want failed after exhausting attempts without running, got %s %q ran=%v", tk.Status, tk.StatusMessage, ran.Load())
	}
}

func TestCancelReachesRunningHandler(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	started := make(chan struct{})
	cause := make(chan error, 1)
	e.serve(t, consumer.Tool{Name: "block"}, nil, func(ctx context.Context, c *consumer.Call[none]) (*consumer.Result, error) {
		close(started)
		<-ctx.Done()
		cause <- context.Cause(ctx)
		return consumer.TextResult("a late result that must not win"), nil
	})
	id := e.create(t, "block", none{})
	<-started
	begin := time.Now()
	if _, err := e.prod.Cancel(context.Background(), id, "test"); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-cause:
		if !errors.Is(err, consumer.ErrTaskCancelled) {
			t.Fatalf("handler ctx ended with %v, want ErrTaskCancelled", err)
		}
		t.Logf("cancel reached the handler in %s", time.Since(begin))
	case <-time.After(5 * time.Second):
		t.Fatal("the handler never saw the cancellation")
	}
	tk := e.waitFor(t, id, terminal)
	if tk.Status != taskstate.Cancelled {
		t.Fatalf("status %s, want cancelled (sticky)", tk.Status)
	}
	if _, err := e.prod.Cancel(context.Background(), id, "again"); !errors.Is(err, producer.ErrTerminal) {
		t.Fatalf("second cancel: %v, want ErrTerminal", err)
	}
}

func TestDrainFinishesRunningHandlers(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	started := make(chan struct{})
	release := make(chan struct{})
	stop := e.serve(t, consumer.Tool{Name: "job"}, &consumer.Config{ShutdownGrace: time.Minute}, func(ctx context.Context, c *consumer.Call[none]) (*consumer.Result, error) {
		close(started)
		<-release
		return consumer.TextResult("finished during drain"), nil
	})
	id := e.create(t, "job", none{})
	<-started
	stopped := make(chan struct{})
	go func() { stop(); close(stopped) }()
	select {
	case <-stopped:
		t.Fatal("Run returned while a handler was still running")
	case <-time.After(100 * time.Millisecond): // the drain is in progress
	}
	close(release)
	<-stopped
	tk, err := e.store.Get(context.Background(), id)
	if err != nil || tk.Status != taskstate.Completed {
		t.Fatalf("after drain: %v %+v", err, tk)
	}
}

func TestGraceOverReturnsJob(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	started := make(chan struct{}, 2)
	var runs atomic.Int32
	mux := consumer.NewMux()
	consumer.Handle(mux, consumer.Tool{Name: "stubborn"}, func(ctx context.Context, c *consumer.Call[none]) (*consumer.Result, error) {
		started <- struct{}{}
		if runs.Add(1) == 1 {
			<-ctx.Done() // the first run finishes only when forced
			return nil, ctx.Err()
		}
		return consumer.TextResult("second worker finished it"), nil
	})
	stop := e.run(t, mux, &consumer.Config{ShutdownGrace: 50 * time.Millisecond})
	id := e.create(t, "stubborn", none{})
	<-started
	stop() // grace runs out; the job goes back to the queue
	if tk, _ := e.store.Get(context.Background(), id); tk.Status.Terminal() {
		t.Fatalf("shutdown must not end the task, got %s", tk.Status)
	}
	e.run(t, mux, nil)
	tk := e.waitFor(t, id, terminal)
	if tk.Status != taskstate.Completed || tk.Attempt != 1 {
		t.Fatalf("want completed, the interrupted run not counted as an attempt; got %s attempt %d", tk.Status, tk.Attempt)
	}
}

func TestAskInTaskWaitsAndResumesWithoutAskingTwice(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	var asked atomic.Int32
	stop := e.serve(t, consumer.Tool{Name: "ask"}, nil, func(ctx context.Context, c *consumer.Call[none]) (*consumer.Result, error) {
		asked.Add(1)
		r, err := c.Elicit(ctx, "name", "Who?", map[string]any{"type": "object"})
		if err != nil {
			return nil, err
		}
		return consumer.TextResult("hi " + r.Content["name"].(string)), nil
	})
	tk := e.waitFor(t, e.createAsking(t, "ask", ""), func(tk *taskstate.Task) bool { return tk.Status == taskstate.InputRequired })
	if len(tk.InputRequests) != 1 {
		t.Fatalf("want one request, got %v", tk.InputRequests)
	}
	e.answer(t, tk.ID, `{"action":"accept","content":{"name":"Ada"}}`)
	done := e.waitFor(t, tk.ID, terminal)
	if got := string(done.Result); !strings.Contains(got, "hi Ada") {
		t.Fatalf("result %s", got)
	}
	stop()

	// A redelivered run of the same task finds the stored answer: it does not ask again.
	_, err := taskstate.Mutate(context.Background(), e.store, tk.ID, time.Now, func(t *taskstate.Task) error { return nil })
	if !errors.Is(err, taskstate.ErrInvalidChange) {
		t.Fatalf("terminal record accepted a write: %v", err)
	}
	if n := asked.Load(); n != 1 {
		t.Fatalf("handler ran %d times", n)
	}
}

func TestRegistrationMistakesPanic(t *testing.T) {
	mux := consumer.NewMux()
	h := func(ctx context.Context, c *consumer.Call[none]) (*consumer.Result, error) { return nil, nil }
	consumer.Handle(mux, consumer.Tool{Name: "x"}, h)
	for name, f := range map[string]func(){
		"duplicate": func() { consumer.Handle(mux, consumer.Tool{Name: "x"}, h) },
		"empty":     func() { consumer.Handle(mux, consumer.Tool{Name: ""}, h) },
		"bad chars": func() { consumer.Handle(mux, consumer.Tool{Name: "a b"}, h) },
		"non-object input": func() {
			consumer.Handle(mux, consumer.Tool{Name: "y"}, func(ctx context.Context, c *consumer.Call[string]) (*consumer.Result, error) { return nil, nil })
		},
	} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("%s: registration did not panic", name)
				}
			}()
			f()
		}()
	}
}

func TestSchemaInferredFromTypes(t *testing.T) {
	type Args struct {
		Title string `json:"title" jsonschema:"the title"`
		Pages int    `json:"pages,omitempty"`
	}
	type Out struct {
		OK bool `json:"ok"`
	}
	mux := consumer.NewMux()
	consumer.Handle(mux, consumer.Tool{Name: "typed"}, func(ctx context.Context, c *consumer.Call[Args]) (Out, error) { return Out{}, nil })
	tools := mux.Tools()
	var in struct {
		Type       string                     `json:"type"`
		Properties map[string]json.RawMessage `json:"properties"`
		Required   []string                   `json:"required"`
	}
	if err := json.Unmarshal(tools[0].InputSchema, &in); err != nil {
		t.Fatal(err)
	}
	if in.Type != "object" || len(in.Properties) != 2 || len(in.Required) != 1 || in.Required[0] != "title" {
		t.Fatalf("input schema %s", tools[0].InputSchema)
	}
	if !strings.Contains(string(tools[0].InputSchema), "the title") || tools[0].OutputSchema == nil {
		t.Fatalf("description or output schema missing: %s / %s", tools[0].InputSchema, tools[0].OutputSchema)
	}
	if tools[0].TaskSupport != taskstate.TaskOptional {
		t.Fatalf("default task support %q", tools[0].TaskSupport)
	}
}

func TestInputWaitDeadlineFailsTask(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.serve(t, consumer.Tool{Name: "ask"}, &consumer.Config{InputTimeout: 200 * time.Millisecond}, func(ctx context.Context, c *consumer.Call[none]) (*consumer.Result, error) {
		_, err := c.Elicit(ctx, "q", "Anyone there?", map[string]any{"type": "object"})
		return nil, err
	})
	done := e.waitFor(t, e.createAsking(t, "ask", ""), terminal)
	if done.Status != taskstate.Failed || !strings.Contains(done.Error.Message, "timed out waiting for client input") || len(done.InputRequests) != 0 {
		t.Fatalf("want failed with the input deadline and no open requests, got %s %+v %v", done.Status, done.Error, done.InputRequests)
	}
}

func TestAskWithoutClientCapabilityFails(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.serve(t, consumer.Tool{Name: "ask"}, nil, func(ctx context.Context, c *consumer.Call[none]) (*consumer.Result, error) {
		_, err := c.Ask(ctx, consumer.Sampling("s", map[string]any{"messages": []any{}, "maxTokens": 5}))
		return nil, err
	})
	done := e.waitFor(t, e.create(t, "ask", none{}), terminal) // no client capabilities declared
	if done.Status != taskstate.Failed || done.Error.Code != -32021 || !strings.Contains(string(done.Error.Data), `"sampling"`) {
		t.Fatalf("want -32021 naming sampling, got %s %+v", done.Status, done.Error)
	}
}

func TestTaskAsksFanOutThenSecondRound(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.serve(t, consumer.Tool{Name: "rounds"}, nil, func(ctx context.Context, c *consumer.Call[none]) (*consumer.Result, error) {
		schema := map[string]any{"type": "object"}
		if _, err := c.Ask(ctx, consumer.Elicitation("a", "A?", schema), consumer.Elicitation("b", "B?", schema)); err != nil {
			return nil, err
		}
		if _, err := c.Elicit(ctx, "c", "C?", schema); err != nil {
			return nil, err
		}
		return consumer.TextResult("three answers"), nil
	})
	id := e.createAsking(t, "rounds", "")
	seen := map[string]bool{}
	answer := func(want int) {
		t.Helper()
		cur := e.waitFor(t, id, func(x *taskstate.Task) bool {
			return x.Status == taskstate.InputRequired && len(x.InputRequests) == want
		})
		for k := range cur.InputRequests {
			if seen[k] {
				t.Errorf("key %q reused", k)
			}
			seen[k] = true
		}
		e.answer(t, id, `{"action":"accept","content":{}}`)
	}
	answer(2) // both fan-out requests are outstanding at once
	answer(1) // then the second round
	if done := e.waitFor(t, id, terminal); done.Status != taskstate.Completed || len(seen) != 3 {
		t.Fatalf("got %s with keys %v", done.Status, seen)
	}
}

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
// task (taskstate.Task.FileResponses): stores answer for every open request,
// turns the task working, and, when it is parked, publishes its job again.
func (e *env) answer(t *testing.T, id, answer string) {
	t.Helper()
	resume := false
	tk, err := taskstate.Mutate(context.Background(), e.store, id, time.Now, func(t *taskstate.Task) error {
		_, resume = t.FileResponses(func(string) (json.RawMessage, bool) { return json.RawMessage(answer), true })
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

// shareRun counts, per owner, the long tasks running now and the most that
// ever ran at once, for a handler that blocks the tasks of the long owners
// until cancelled and completes the others at once.
type shareRun struct {
	mu      sync.Mutex
	long    map[string]bool
	running map[string]int
	most    map[string]int
}

func newShareRun(long ...string) *shareRun {
	r := &shareRun{long: map[string]bool{}, running: map[string]int{}, most: map[string]int{}}
	for _, o := range long {
		r.long[o] = true
	}
	return r
}

func (r *shareRun) handle(ctx context.Context, c *consumer.Call[none]) (*consumer.Result, error) {
	owner := c.Owner()
	if !r.long[owner] {
		return consumer.TextResult("short"), nil
	}
	r.mu.Lock()
	r.running[owner]++
	r.most[owner] = max(r.most[owner], r.running[owner])
	r.mu.Unlock()
	defer func() { r.mu.Lock(); r.running[owner]--; r.mu.Unlock() }()
	<-ctx.Done()
	return nil, ctx.Err()
}

// total is how many long tasks run now.
func (r *shareRun) total() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, v := range r.running {
		n += v
	}
	return n
}

func (r *shareRun) mostOf(owner string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.most[owner]
}

// createOwned creates n tasks of tool owned by owner.
func (e *env) createOwned(t *testing.T, tool, owner string, n int) []string {
	t.Helper()
	var ids []string
	for range n {
		tk, err := e.prod.Create(context.Background(), &producer.Request{Tool: tool, Owner: owner, Era: taskstate.Era20260728})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, tk.ID)
	}
	return ids
}

// startsSoon creates a task of owner and fails the test unless it completes
// within 2 s.
func (e *env) startsSoon(t *testing.T, tool, owner, behind string) {
	t.Helper()
	created := time.Now()
	id := e.createOwned(t, tool, owner, 1)[0]
	if got := e.waitFor(t, id, terminal); got.Status != taskstate.Completed || time.Since(created) > 2*time.Second {
		t.Fatalf("%s's task behind %s: %s after %s", owner, behind, got.Status, time.Since(created))
	}
}

func (e *env) cancelAll(t *testing.T, ids []string) {
	t.Helper()
	for _, id := range ids {
		if _, err := e.prod.Cancel(context.Background(), id, "test over"); err != nil {
			t.Fatal(err)
		}
	}
}

// One principal with many long tasks holds at most its share (half of 4
// slots, with no tenant share); another principal's task behind them in
// the queue runs at once.
func TestPrincipalShare(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	r := newShareRun("alice")
	e.serve(t, consumer.Tool{Name: "long"}, &consumer.Config{Concurrency: 4, TenantShare: 1, PrincipalShare: 0.5}, r.handle)
	alice := e.createOwned(t, "long", "alice", 12)
	// Which two of her twelve win the share depends on which the worker's
	// goroutines reach first, so wait for the count, not for particular ones.
	testenv.Eventually(t, 15*time.Second, "alice running her share", func() bool { return r.total() == 2 })
	e.startsSoon(t, "long", "carol", "alice's twelve")
	if m := r.mostOf("alice"); m != 2 {
		t.Fatalf("alice ran %d tasks at once on 4 slots, want her share, 2", m)
	}
	e.cancelAll(t, alice)
}

// With the default shares on 4 slots (a tenant 3, a principal 1), two
// principals of tenant t1 with many long tasks each hold one slot; a third
// principal of t1 and one of t2, behind them in the queue, run at once.
func TestTenantShare(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	const alice, bob, carol, dan = "iss|alice|t1", "iss|bob|t1", "iss|carol|t1", "iss|dan|t2"
	r := newShareRun(alice, bob)
	e.serve(t, consumer.Tool{Name: "long"}, &consumer.Config{Concurrency: 4}, r.handle)
	// alice's first: alone in the queue she still gets only her share.
	long := e.createOwned(t, "long", alice, 12)
	testenv.Eventually(t, 15*time.Second, "alice running her share", func() bool { return r.total() == 1 })
	long = append(long, e.createOwned(t, "long", bob, 12)...)
	testenv.Eventually(t, 15*time.Second, "bob running his share", func() bool { return r.total() == 2 })
	e.startsSoon(t, "long", carol, "alice's and bob's 24")
	e.startsSoon(t, "long", dan, "alice's and bob's 24")
	for _, o := range []string{alice, bob} {
		if m := r.mostOf(o); m != 1 {
			t.Errorf("%s ran %d tasks at once on 4 slots, want the share of a principal, 1", o, m)
		}
	}
	e.cancelAll(t, long)
}

// Four principals of tenant t1 with long tasks hold the tenant's share of 4
// slots, 3, one each; the fourth waits, and a principal of t2 behind them
// all runs at once in the slot the tenant leaves.
func TestTenantShareLeavesASlot(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	t1 := []string{"iss|alice|t1", "iss|bob|t1", "iss|carol|t1", "iss|erin|t1"}
	r := newShareRun(t1...)
	e.serve(t, consumer.Tool{Name: "long"}, &consumer.Config{Concurrency: 4}, r.handle)
	var long []string
	for _, o := range t1 {
		long = append(long, e.createOwned(t, "long", o, 3)...)
	}
	testenv.Eventually(t, 15*time.Second, "t1 running its share", func() bool { return r.total() == 3 })
	e.startsSoon(t, "long", "iss|dan|t2", "t1's twelve")
	if n := r.total(); n != 3 {
		t.Errorf("t1 runs %d tasks on 4 slots, want its share, 3", n)
	}
	for _, o := range t1 {
		if m := r.mostOf(o); m > 1 {
			t.Errorf("%s ran %d tasks at once, want at most 1", o, m)
		}
	}
	e.cancelAll(t, long)
}
