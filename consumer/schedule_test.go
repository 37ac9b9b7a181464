package consumer_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mcpqueue/mcpqueue/consumer"
	"github.com/mcpqueue/mcpqueue/producer"
	"github.com/mcpqueue/mcpqueue/taskstate"
)

// A scheduled call's job delivered before its time (here published by
// hand at once) is deferred, not run: the handler starts at its time, and
// the deferral is no attempt; the take clears "scheduled for".
func TestEarlyScheduledJobIsDeferred(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	var started atomic.Int64 // unix nanos of the first start
	var runs atomic.Int32
	stop := e.serve(t, consumer.Tool{Name: "later"}, nil, func(context.Context, *consumer.Call[none]) (*consumer.Result, error) {
		started.CompareAndSwap(0, time.Now().UnixNano())
		runs.Add(1)
		return consumer.TextResult("ran"), nil
	})
	defer stop()
	at := time.Now().Add(1500 * time.Millisecond)
	tk, err := e.prod.Create(t.Context(), &producer.Request{Tool: "later", Era: taskstate.Era20260728, NotBefore: at})
	if err != nil {
		t.Fatal(err)
	}
	if err := e.queue.Enqueue(t.Context(), producer.JobFor(tk)); err != nil { // early: the reaper would wait
		t.Fatal(err)
	}
	done := e.waitFor(t, tk.ID, terminal)
	if done.Status != taskstate.Completed || runs.Load() != 1 || done.Attempt != 1 {
		t.Fatalf("task %s after %d runs, attempt %d; want completed by one run, attempt 1", done.Status, runs.Load(), done.Attempt)
	}
	if s := time.Unix(0, started.Load()); s.Before(at.Add(-50 * time.Millisecond)) {
		t.Fatalf("handler started %s before the task's time", at.Sub(s))
	}
	if taskstate.IsScheduledFor(done.StatusMessage) {
		t.Fatalf("statusMessage %q left after the run", done.StatusMessage)
	}
}
