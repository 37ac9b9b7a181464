package producer_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/mcpqueue/mcpqueue/broker"
	"github.com/mcpqueue/mcpqueue/broker/membroker"
	"github.com/mcpqueue/mcpqueue/producer"
	"github.com/mcpqueue/mcpqueue/taskstate"
)

// poll tries the consumer for one job for up to wait, acking what it gets:
// nil when none came.
func (e *reapEnv) poll(t *testing.T, wait time.Duration) *broker.Job {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), wait)
	defer cancel()
	d, err := e.cons.Next(ctx)
	if errors.Is(err, context.DeadlineExceeded) {
		return nil
	}
	if err != nil {
		t.Fatalf("Next: %v", err)
	}
	_ = d.Ack(t.Context())
	return d.Job()
}

// untilDue runs reaper passes and polls the queue until a job comes or
// deadline passes: the job, or nil.
func (e *reapEnv) untilDue(t *testing.T, deadline time.Time) *broker.Job {
	t.Helper()
	for time.Now().Before(deadline) {
		e.reap(t, nil)
		if j := e.poll(t, 100*time.Millisecond); j != nil {
			return j
		}
	}
	return nil
}

// A scheduled call: the record is created at once (working, "scheduled
// for …", the time in its meta); no job reaches a worker before the time;
// once due the job comes once (on NATS the reaper publishes it, on Asynq
// the scheduled set lets it go), carrying its not-before.
func TestScheduledCallRunsWhenDue(t *testing.T) {
	t.Parallel()
	reapBackends(t, func(t *testing.T, e *reapEnv) {
		at := time.Now().Add(1500 * time.Millisecond).Truncate(time.Millisecond)
		tk, err := e.prod.Create(t.Context(), &producer.Request{Tool: "echo", Era: taskstate.Era20260728, NotBefore: at})
		if err != nil {
			t.Fatal(err)
		}
		got := get(t, e.store, tk.ID)
		if got.Status != taskstate.Working || got.StatusMessage != taskstate.ScheduledFor(at) || !taskstate.NotBefore(got.Meta).Equal(at) {
			t.Fatalf("record %s %q not-before %v; want working, %q, %v", got.Status, got.StatusMessage, taskstate.NotBefore(got.Meta), taskstate.ScheduledFor(at), at)
		}
		if st := e.reap(t, &producer.ReaperConfig{PublishGrace: time.Nanosecond}); st.Released+st.Requeued != 0 || !st.NextDue.Equal(at) {
			t.Fatalf("pass before the time: %+v; want nothing published, NextDue %v", st, at)
		}
		if j := e.poll(t, 500*time.Millisecond); j != nil {
			t.Fatalf("job %s delivered %s before its time", j.TaskID, time.Until(at))
		}
		j := e.untilDue(t, at.Add(5*time.Second))
		switch {
		case j == nil:
			t.Fatal("no job by 5 s after the task's time")
		case time.Now().Before(at):
			t.Fatalf("job delivered %s before its time", time.Until(at))
		case j.TaskID != tk.ID || !j.NotBefore.Equal(at):
			t.Fatalf("job %s not-before %v; want %s, %v", j.TaskID, j.NotBefore, tk.ID, at)
		}
		e.reap(t, nil)
		if j := e.poll(t, 300*time.Millisecond); j != nil {
			t.Fatalf("a second job of %s after its release", j.TaskID)
		}
	})
}

// A scheduled call cancelled before its time never reaches a worker: on
// Asynq its job is taken out of the scheduled set, on NATS none is ever
// published.
func TestScheduledCallCancelledNeverRuns(t *testing.T) {
	t.Parallel()
	reapBackends(t, func(t *testing.T, e *reapEnv) {
		at := time.Now().Add(time.Second)
		tk, err := e.prod.Create(t.Context(), &producer.Request{Tool: "echo", Era: taskstate.Era20260728, NotBefore: at})
		if err != nil {
			t.Fatal(err)
		}
		withBus := producer.New(e.store, producer.QueueExecutor{Queue: e.queue, Bus: membroker.NewBus()}, nil)
		if _, err := withBus.Cancel(t.Context(), tk.ID, "not wanted"); err != nil {
			t.Fatal(err)
		}
		if h, ok := e.queue.(broker.Holder); ok {
			if held, err := h.Holds(t.Context(), "echo", tk.ID, tk.ID); err != nil || held {
				t.Fatalf("Holds after the cancel = %v, %v; want the job gone", held, err)
			}
		}
		if j := e.untilDue(t, at.Add(1500*time.Millisecond)); j != nil {
			t.Fatalf("job of cancelled task %s delivered", j.TaskID)
		}
	})
}

// A time that has passed is an ordinary call: its job is published at
// once and the record says nothing of a schedule.
func TestScheduledCallInThePastRunsAtOnce(t *testing.T) {
	t.Parallel()
	reapBackends(t, func(t *testing.T, e *reapEnv) {
		tk, err := e.prod.Create(t.Context(), &producer.Request{Tool: "echo", Era: taskstate.Era20260728, NotBefore: time.Now().Add(-time.Hour)})
		if err != nil {
			t.Fatal(err)
		}
		if tk.StatusMessage != "" || !taskstate.NotBefore(tk.Meta).IsZero() {
			t.Fatalf("record %q meta %v; want no schedule", tk.StatusMessage, tk.Meta)
		}
		if j := e.delivered(t); j.TaskID != tk.ID {
			t.Fatalf("job %s, want %s", j.TaskID, tk.ID)
		}
	})
}
