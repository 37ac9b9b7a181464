package brokertest

import (
	"testing"

	"github.com/mcpqueue/mcpqueue/broker"
)

// withdraw (Features.Withdraw): Withdraw takes back a task's job, waiting
// or handed out and not settled, so no consumer gets it (again); another
// task's job of the same tool is untouched, and withdrawing a task with no
// job is no error.
func (s *queueSuite) withdraw(t *testing.T, e *queueEnv) {
	w := e.q.(broker.Withdrawer)
	handed, gone, kept := e.job(), e.job(), e.job()
	e.enqueue(t, handed)
	c := e.consumer(t, broker.ConsumerOptions{Lease: s.opts.Lease})
	sameJob(t, "the only job", e.next(t, c, s.opts.Wait).Job(), handed) // not settled
	e.enqueue(t, gone)
	e.enqueue(t, kept)
	for _, j := range []*broker.Job{handed, gone} {
		if err := w.Withdraw(e.ctx, j.Tool, j.TaskID); err != nil {
			t.Fatalf("Withdraw(%s): %v", j.TaskID, err)
		}
	}
	if err := w.Withdraw(e.ctx, "echo", taskID()); err != nil {
		t.Fatalf("Withdraw of a task without a job: %v", err)
	}
	if h, ok := e.q.(broker.Holder); ok {
		for _, j := range []*broker.Job{handed, gone} {
			if held, err := h.Holds(e.ctx, j.Tool, j.TaskID, j.DedupeKey()); err != nil || held {
				t.Fatalf("Holds(%s) after Withdraw = %v, %v", j.TaskID, held, err)
			}
		}
	}
	d := e.next(t, c, s.opts.Wait)
	sameJob(t, "the job left after the withdrawals", d.Job(), kept)
	ack(t, e.ctx, d)
	e.quiet(t, c, s.opts.Quiet, "after the withdrawals (the handed-out job's lease lapsing)")
}
