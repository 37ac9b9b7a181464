package consumer_test

import (
	"context"
	"encoding/json"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mcpqueue/mcpqueue/consumer"
	"github.com/mcpqueue/mcpqueue/taskstate"
)

// countingStore counts the record reads of the worker using it.
type countingStore struct {
	taskstate.Store
	gets atomic.Int32
}

func (s *countingStore) Get(ctx context.Context, id string) (*taskstate.Task, error) {
	s.gets.Add(1)
	return s.Store.Get(ctx, id)
}

// A first delivery starts from the record its job carries: the worker
// takes, runs and finishes the task without reading the record.
func TestFirstDeliveryReadsNoRecord(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	mux := consumer.NewMux()
	consumer.Handle(mux, consumer.Tool{Name: "quick"}, func(ctx context.Context, c *consumer.Call[none]) (*consumer.Result, error) {
		return consumer.TextResult("done"), nil
	})
	st := &countingStore{Store: e.store}
	ctx, cancel := context.WithCancel(context.Background())
	w := consumer.New(e.queue, st, e.store, e.bus, &consumer.Config{})
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx, mux) }()
	t.Cleanup(func() { cancel(); <-done })

	for range 3 {
		if tk := e.waitFor(t, e.create(t, "quick", none{}), terminal); tk.Status != taskstate.Completed || tk.Attempt != 1 {
			t.Fatalf("task: %s, attempt %d", tk.Status, tk.Attempt)
		}
	}
	if n := st.gets.Load(); n != 0 {
		t.Fatalf("the worker read the record %d times for 3 first deliveries, want 0", n)
	}
}

// The record a job carries may be stale by the time a worker takes it: the
// take's compare-and-set fails, the worker reads the record, and a change
// made meanwhile — a cancel, or anything else — is what it works from.
func TestStaleJobRecordIsReRead(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	mux := consumer.NewMux()
	var ran atomic.Int32
	consumer.Handle(mux, consumer.Tool{Name: "quick"}, func(ctx context.Context, c *consumer.Call[none]) (*consumer.Result, error) {
		ran.Add(1)
		return consumer.TextResult("done"), nil
	})
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

	e.run(t, mux, nil)
	tk := e.waitFor(t, changed, terminal)
	if tk.Status != taskstate.Completed || string(tk.Meta["note"]) != `"written after the job"` {
		t.Fatalf("task changed after its job was published: %s, meta %s — the worker wrote over the change", tk.Status, tk.Meta)
	}
	eventually(t, "both jobs settled", func() bool { return e.jobs(t) == 0 })
	if got, _ := e.store.Get(ctx, cancelled); got.Status != taskstate.Cancelled || ran.Load() != 1 {
		t.Fatalf("cancelled before pickup: %s, handler ran %d times in all (want once, for the other task)", got.Status, ran.Load())
	}
}
