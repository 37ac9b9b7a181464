package asynqbroker_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/mcpqueue/mcpqueue/broker"
	"github.com/mcpqueue/mcpqueue/broker/asynqbroker"
	"github.com/mcpqueue/mcpqueue/internal/redistest"
	"github.com/mcpqueue/mcpqueue/internal/testenv"
)

// A consumer that has just handed a job out takes the next one without
// waiting out Asynq's idle poll, and goes back to the idle poll, with one
// server, once BusyFor passes without a job.
//
// Without pacing every job of the loop below waits at least PollInterval/2
// (Asynq's processor sleeps PollInterval/2 + rand[0, PollInterval) each time
// it finds the queue empty, which it does right after taking the previous
// job): 10 jobs take ≥ 5s. The bound is half that.
func TestBusyConsumerTakesJobsAtOnce(t *testing.T) {
	t.Parallel()
	const poll = time.Second
	q, _ := newQueue(t, redistest.Client(t), &asynqbroker.Config{
		PollInterval:     poll,
		BusyPollInterval: 2 * time.Millisecond,
		BusyFor:          300 * time.Millisecond,
	})
	ctx := t.Context()
	cons, err := q.Consumer(ctx, broker.ConsumerOptions{Tools: tools("t"), Lease: time.Minute, Slots: 2})
	if err != nil {
		t.Fatal(err)
	}
	if busy, _ := asynqbroker.Pace(cons); busy {
		t.Fatal("a new consumer starts busy")
	}
	run := func(i int) {
		t.Helper()
		enqueueTake(t, q, cons, &broker.Job{TaskID: fmt.Sprintf("PACE%022d", i), Tool: "t"})
	}
	run(0) // picked up at the idle poll
	const n = 10
	start := time.Now()
	for i := 1; i <= n; i++ {
		run(i)
	}
	if took, limit := time.Since(start), n*poll/4; took > limit {
		t.Fatalf("%d jobs, each enqueued after the previous was acked, took %s (> %s): the consumer waited out the idle poll", n, took, limit)
	}
	testenv.Eventually(t, 10*time.Second, "the consumer to go back to idle with one server", func() bool {
		busy, servers := asynqbroker.Pace(cons)
		return !busy && servers == 1
	})
	run(n + 1) // and still takes jobs
}

// A consumer of many tools pays for a job about one dequeue on Redis, not
// one per tool: Asynq's processor runs its dequeue script on every queue in
// turn until one has a job, and the sieve answers for the empty ones.
func TestSieveSavesRoundTrips(t *testing.T) {
	t.Parallel()
	q, _ := newQueue(t, redistest.Client(t), &asynqbroker.Config{BusyPollInterval: 2 * time.Millisecond})
	ctx := t.Context()
	const nTools, n = 40, 10
	var names []string
	for i := range nTools {
		names = append(names, fmt.Sprintf("t%02d", i))
	}
	cons, err := q.Consumer(ctx, broker.ConsumerOptions{Tools: tools(names...), Lease: time.Minute, Slots: 2})
	if err != nil {
		t.Fatal(err)
	}
	for i := range n {
		enqueueTake(t, q, cons, &broker.Job{TaskID: fmt.Sprintf("SIEVE%021d", i), Tool: names[(i*7)%nTools]})
	}
	run, answered := asynqbroker.Dequeues(cons)
	// Each job is one dequeue that finds it; a look at the lists may
	// precede by a moment a job still being enqueued, or a paced server's
	// last dequeue, so allow a few more. Without the sieve a job costs
	// about nTools/2 dequeues, and every empty poll nTools.
	if run < n || run > 3*n || answered < n*nTools/4 {
		t.Fatalf("%d jobs of a consumer of %d tools: %d dequeue scripts run on Redis, %d answered by the sieve; want %d to %d run, at least %d answered",
			n, nTools, run, answered, n, 3*n, n*nTools/4)
	}
}

// enqueueTake enqueues job, takes it from cons and acks it.
func enqueueTake(t *testing.T, q *asynqbroker.Queue, cons broker.Consumer, job *broker.Job) {
	t.Helper()
	if err := q.Enqueue(t.Context(), job); err != nil {
		t.Fatal(err)
	}
	d := next(t, cons)
	if d.Job().TaskID != job.TaskID {
		t.Fatalf("got job %s, want %s", d.Job().TaskID, job.TaskID)
	}
	if err := d.Ack(t.Context()); err != nil {
		t.Fatal(err)
	}
}
