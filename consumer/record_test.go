package consumer_test

import (
	"context"
	"encoding/json"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mcpqueue/mcpqueue/backend"
	"github.com/mcpqueue/mcpqueue/consumer"
	"github.com/mcpqueue/mcpqueue/internal/testenv"
	"github.com/mcpqueue/mcpqueue/taskstate"
)

// countingStore counts the record reads and writes of the worker using it.
type countingStore struct {
	taskstate.Store
	updates, gets atomic.Int32
}

func (s *countingStore) Get(ctx context.Context, id string) (*taskstate.Task, error) {
	s.gets.Add(1)
	return s.Store.Get(ctx, id)
}

func (s *countingStore) Update(ctx context.Context, t *taskstate.Task) error {
	s.updates.Add(1)
	return s.Store.Update(ctx, t)
}

// Lazy take: a task that ends at once costs the worker one record write,
// its outcome carrying the take (attempt 1, the lease), and no read (it
// starts from the record its job carries); one that runs on has its take
// written while it runs.
func TestLazyTake(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	mux := consumer.NewMux()
	running := make(chan string, 1)
	release := make(chan struct{})
	consumer.Handle(mux, consumer.Tool{Name: "quick"}, func(ctx context.Context, c *consumer.Call[none]) (*consumer.Result, error) {
		return consumer.TextResult("done"), nil
	})
	consumer.Handle(mux, consumer.Tool{Name: "long"}, func(ctx context.Context, c *consumer.Call[none]) (*consumer.Result, error) {
		running <- c.TaskID()
		<-release
		return consumer.TextResult("done"), nil
	})
	st := &countingStore{Store: e.store}
	ctx, cancel := context.WithCancel(context.Background())
	w := consumer.New(backend.Backend{Queue: e.queue, Store: st, Catalog: e.store, Bus: e.bus}, &consumer.Config{})
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx, mux) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})

	for range 3 {
		if tk := e.waitFor(t, e.create(t, "quick", none{}), terminal); tk.Status != taskstate.Completed || tk.Attempt != 1 || tk.MaxAttempts == 0 {
			t.Fatalf("quick task: %s, attempt %d of %d", tk.Status, tk.Attempt, tk.MaxAttempts)
		}
	}
	if n := st.updates.Load(); n != 3 {
		t.Fatalf("the worker wrote the record %d times for 3 quick tasks, want 3 (the take rides on the outcome)", n)
	}
	if n := st.gets.Load(); n != 0 {
		t.Fatalf("the worker read the record %d times for 3 quick tasks, want none (their jobs carry it)", n)
	}

	id := e.create(t, "long", none{})
	<-running
	taken := e.waitFor(t, id, func(tk *taskstate.Task) bool { return tk.Attempt == 1 })
	if taken.Status != taskstate.Working || taken.Lease == nil {
		t.Fatalf("a running task's take: %s, lease %v", taken.Status, taken.Lease)
	}
	close(release)
	if tk := e.waitFor(t, id, terminal); tk.Status != taskstate.Completed || tk.Attempt != 1 {
		t.Fatalf("long task: %s, attempt %d", tk.Status, tk.Attempt)
	}
}

// A task changed between its job's publishing and its pickup: a cancelled
// one never runs, and a change made meanwhile is kept by the run's writes.
func TestChangedBeforePickup(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	cancelled := e.create(t, "quick", none{})
	if _, err := e.prod.Cancel(ctx, cancelled, "changed my mind"); err != nil {
		t.Fatal(err)
	}
	changed := e.create(t, "quick", none{})
	if _, err := taskstate.Mutate(ctx, e.store, changed, time.Now, func(tk *taskstate.Task) error {
		tk.Meta = map[string]json.RawMessage{"note": json.RawMessage(`"written after the job"`)}
		return nil
	}); err != nil {
		t.Fatal(err)
	}

	var ran atomic.Int32
	e.serve(t, consumer.Tool{Name: "quick"}, nil, func(ctx context.Context, c *consumer.Call[none]) (*consumer.Result, error) {
		ran.Add(1)
		return consumer.TextResult("done"), nil
	})
	tk := e.waitFor(t, changed, terminal)
	if tk.Status != taskstate.Completed || string(tk.Meta["note"]) != `"written after the job"` {
		t.Fatalf("task changed after its job was published: %s, meta %s — the worker wrote over the change", tk.Status, tk.Meta)
	}
	testenv.Eventually(t, 15*time.Second, "both jobs settled", func() bool { return e.jobs(t) == 0 })
	if got, _ := e.store.Get(ctx, cancelled); got.Status != taskstate.Cancelled || ran.Load() != 1 {
		t.Fatalf("cancelled before pickup: %s, handler ran %d times in all (want once, for the other task)", got.Status, ran.Load())
	}
}
