package asynqbroker_test

import (
	"context"
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
		Pools:            onePool(broker.DefaultPool),
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

// A consumer of many tools pays for a job one dequeue on Redis, on its
// pool's queue, not one per tool: Asynq's processor runs its dequeue script
// on every queue in turn until one has a job, and the sieve answers for the
// tools' own queues, empty here, from a look at their lengths it takes at
// most once per half PollInterval.
func TestSieveSavesRoundTrips(t *testing.T) {
	t.Parallel()
	q, _ := newQueue(t, redistest.Client(t), &asynqbroker.Config{BusyPollInterval: 2 * time.Millisecond, Pools: onePool("p")})
	ctx := t.Context()
	const nTools, n = 40, 10
	var names []string
	for i := range nTools {
		names = append(names, fmt.Sprintf("t%02d", i))
	}
	start := time.Now()
	cons, err := q.Consumer(ctx, broker.ConsumerOptions{Tools: tools(names...), Lease: time.Minute, Slots: 2, Pool: "p"})
	if err != nil {
		t.Fatal(err)
	}
	for i := range n {
		enqueueTake(t, q, cons, &broker.Job{TaskID: fmt.Sprintf("SIEVE%021d", i), Tool: names[(i*7)%nTools]})
	}
	st := asynqbroker.Sieve(cons)
	took := time.Since(start)
	// Every dequeue that found a job ran on the pool's queue; the own
	// queues were never asked (their lists stayed empty), and looked at at
	// most once per half poll. Without the sieve every poll costs nTools
	// dequeues.
	maxLooks := int64(took/(pollInterval/2)) + 2
	if st.Pool < n || st.Sieved != 0 || st.Looks > maxLooks || st.Answered < nTools {
		t.Fatalf("%d jobs of a consumer of %d tools in %s: %+v; want ≥ %d dequeues on the pool's queue, none on the own queues, ≤ %d looks, the own queues answered by the sieve at least at one empty poll (%d)",
			n, nTools, took, st, n, maxLooks, nTools)
	}
}

// onePool names pool as every route's.
func onePool(pool string) asynqbroker.Pools {
	return asynqbroker.PoolFunc(func(context.Context, string) (string, error) { return pool, nil })
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
