package brokertest

import (
	"testing"
	"time"

	"github.com/mcpqueue/mcpqueue/broker"
)

// schedule (Features.Schedule): a job whose NotBefore is ahead reaches no
// consumer before then and reaches one after; Unschedule takes back a job
// not yet due (no consumer ever gets it, the queue no longer holds it),
// and Unschedule of a task with no scheduled job is no error.
func (s *queueSuite) schedule(t *testing.T, e *queueEnv) {
	sc := e.q.(broker.Scheduler)
	at := time.Now().Add(1500 * time.Millisecond)
	later, dropped := e.job(), e.job()
	later.NotBefore, dropped.NotBefore = at, at
	e.enqueue(t, later)
	e.enqueue(t, dropped)
	if err := sc.Unschedule(e.ctx, dropped.Tool, dropped.TaskID); err != nil {
		t.Fatalf("Unschedule(%s): %v", dropped.TaskID, err)
	}
	if err := sc.Unschedule(e.ctx, "echo", taskID()); err != nil {
		t.Fatalf("Unschedule of a task without a job: %v", err)
	}
	if h, ok := e.q.(broker.Holder); ok {
		if held, err := h.Holds(e.ctx, later.Tool, later.TaskID, later.DedupeKey()); err != nil || !held {
			t.Fatalf("Holds(scheduled job) = %v, %v; want held", held, err)
		}
		if held, err := h.Holds(e.ctx, dropped.Tool, dropped.TaskID, dropped.DedupeKey()); err != nil || held {
			t.Fatalf("Holds(unscheduled job) = %v, %v; want gone", held, err)
		}
	}
	c := e.consumer(t, broker.ConsumerOptions{Lease: s.opts.Lease})
	e.quiet(t, c, time.Until(at)-100*time.Millisecond, "before the job's NotBefore")
	d := e.next(t, c, s.opts.Wait)
	if time.Now().Before(at) {
		t.Fatalf("scheduled job delivered %s early", time.Until(at))
	}
	sameJob(t, "the scheduled job", d.Job(), later)
	ack(t, e.ctx, d)
	e.quiet(t, c, s.opts.Quiet, "after the scheduled job (the unscheduled one)")
}
