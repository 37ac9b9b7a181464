package brokertest

import (
	"testing"
	"time"

	"github.com/mcpqueue/mcpqueue/broker"
)

func (e *queueEnv) holds(t *testing.T, j *broker.Job) bool {
	t.Helper()
	held, err := e.q.(broker.Holder).Holds(e.ctx, j.Tool, j.TaskID, j.DedupeKey())
	if err != nil {
		t.Fatalf("Holds(%s): %v", j.DedupeKey(), err)
	}
	return held
}

// released waits until the queue no longer holds j: an acked job may be
// let go a moment after Ack returns (Asynq marks it done after its handler
// returns), so this polls, failing after wait.
func (e *queueEnv) released(t *testing.T, j *broker.Job, wait time.Duration) {
	t.Helper()
	deadline := time.Now().Add(wait)
	for e.holds(t, j) {
		if time.Now().After(deadline) {
			t.Fatalf("Holds(%s) still true %s after Ack", j.DedupeKey(), wait)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// holder (Features.Holder): a job is held from Enqueue until it is acked — while it waits,
// while a worker has it, after a retry — and a requeue under another dedupe
// key is held in its own right.
func (s *queueSuite) holder(t *testing.T, e *queueEnv) {
	j := e.job()
	if e.holds(t, j) {
		t.Fatal("Holds = true before Enqueue")
	}
	e.enqueue(t, j)
	if !e.holds(t, j) {
		t.Fatal("Holds = false for a waiting job")
	}
	c := e.consumer(t, broker.ConsumerOptions{Lease: s.opts.Lease})
	d := e.next(t, c, s.opts.Wait)
	if !e.holds(t, j) {
		t.Fatal("Holds = false for a job handed out and not settled")
	}
	if err := d.Retry(e.ctx, 0); err != nil {
		t.Fatalf("Retry: %v", err)
	}
	if !e.holds(t, j) {
		t.Fatal("Holds = false after Retry")
	}
	ack(t, e.ctx, e.next(t, c, s.opts.Wait))
	e.released(t, j, s.opts.Wait)

	again := *j
	again.Dedupe = j.TaskID + "/r1"
	e.enqueue(t, &again)
	if !e.holds(t, &again) {
		t.Fatal("Holds = false for a requeued job (own dedupe key)")
	}
	d = e.next(t, c, s.opts.Wait)
	sameJob(t, "requeued job", d.Job(), &again)
	ack(t, e.ctx, d)
	e.released(t, &again, s.opts.Wait)
}
