// Package brokertest is the contract suite every broker.Queue and broker.Bus
// implementation passes, so JetStream and Asynq behave the same by
// construction. An implementation's test calls RunQueue, declaring its
// optional abilities in a Features value, and RunBus, with constructors
// that return a fresh, isolated queue or bus (its own stream, subjects,
// queue name or key prefix) for each subtest; subtests run in parallel.
package brokertest

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/mcpqueue/mcpqueue/broker"
)

// QueueOptions tunes the queue suite to an implementation's timing. A nil
// *QueueOptions is valid.
type QueueOptions struct {
	// Lease is the ConsumerOptions.Lease the lease, extension and
	// termination tests use. Default 1s.
	Lease time.Duration
	// Quiet is how long the suite waits before concluding that nothing more
	// will be delivered. Default Lease + 500ms, so a job that should not
	// come back has had a lease to do so.
	Quiet time.Duration
	// Wait bounds waits for a delivery that should come. Default 10s.
	Wait time.Duration
}

func (o *QueueOptions) withDefaults() QueueOptions {
	var out QueueOptions
	if o != nil {
		out = *o
	}
	out.Lease = cmp.Or(max(out.Lease, 0), time.Second)
	out.Quiet = cmp.Or(max(out.Quiet, 0), out.Lease+500*time.Millisecond)
	out.Wait = cmp.Or(max(out.Wait, 0), 10*time.Second)
	return out
}

// longLease is the lease for tests in which only an explicit Retry may
// bring a job back: longer than any wait in the suite.
const longLease = time.Minute

// RunQueue runs the queue contract suite as parallel subtests of t.
// newQueue returns an empty queue that no other subtest sees; f declares
// the queue's optional abilities (each declared one is tested, each left
// out must be absent); opts tunes the timing (nil: defaults).
func RunQueue(t *testing.T, f Features, newQueue func(t *testing.T) broker.Queue, opts *QueueOptions) {
	o := opts.withDefaults()
	s := &queueSuite{opts: o, features: f}
	tests := []queueTest{
		{"RoundTrip", s.roundTrip},
		{"EnqueueInvalid", s.enqueueInvalid},
		{"Dedupe", s.dedupe},
		{"RetryNow", s.retryNow},
		{"RetryDelay", s.retryDelay},
		{"Term", s.term},
		{"LeaseExpiry", s.leaseExpiry},
		{"Extend", s.extend},
		{"MaxDeliveries", s.maxDeliveries},
		{"NextContext", s.nextContext},
		{"CancelledNextLosesNothing", s.cancelledNextLosesNothing},
		{"ConcurrentConsumers", s.concurrentConsumers},
		{"Features", s.declaredFeatures},
		{"Routing", s.routing},
		{"ToolLeases", s.toolLeases},
		{"ToolConcurrency", s.toolConcurrency},
		{"ConsumerOptionsInvalid", s.consumerOptionsInvalid},
		{"DeferUnbounded", s.deferUnbounded},
	}
	if f.Holder {
		tests = append(tests, queueTest{"Holder", s.holder})
	}
	if f.Depth {
		tests = append(tests, queueTest{"Depth", s.depth})
	}
	if f.Withdraw {
		tests = append(tests, queueTest{"Withdraw", s.withdraw})
	}
	if f.Schedule {
		tests = append(tests, queueTest{"Schedule", s.schedule})
	}
	runSubtests(t, tests, "newQueue", newQueue, 4*o.Wait+4*o.Quiet, func(ctx context.Context, q broker.Queue) *queueEnv {
		return &queueEnv{ctx: ctx, q: q}
	})
}

type queueTest = subtest[*queueEnv]

// subtest is one test of a suite, run on env, the fresh implementation under
// test and the subtest's context.
type subtest[E any] struct {
	name string
	fn   func(*testing.T, E)
}

// runSubtests runs each of tests as a parallel subtest of t, on an
// implementation newImpl returns for it (what names newImpl in a failure) and
// a context bounded by timeout.
func runSubtests[I, E any](t *testing.T, tests []subtest[E], what string, newImpl func(*testing.T) I, timeout time.Duration, env func(context.Context, I) E) {
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			impl := newImpl(t)
			if any(impl) == nil {
				t.Fatalf("%s returned nil", what)
			}
			ctx, cancel := context.WithTimeout(t.Context(), timeout)
			defer cancel()
			tc.fn(t, env(ctx, impl))
		})
	}
}

type queueSuite struct {
	opts     QueueOptions
	features Features
}

type queueEnv struct {
	ctx context.Context
	q   broker.Queue
	n   int
}

// job returns a job with a fresh task id.
func (e *queueEnv) job() *broker.Job {
	e.n++
	return &broker.Job{
		TaskID:    taskID(),
		Tool:      "echo",
		Arguments: json.RawMessage(`{"n":` + fmt.Sprint(e.n) + `}`),
	}
}

func (e *queueEnv) enqueue(t *testing.T, j *broker.Job) {
	t.Helper()
	if err := e.q.Enqueue(e.ctx, j); err != nil {
		t.Fatalf("Enqueue(%s): %v", j.TaskID, err)
	}
}

// suiteTools are the tools of the suite's jobs; a consumer whose options
// name no tools serves these.
var suiteTools = []string{"echo", "t", "other_tool", "files.read_v2", "files.read", "a-b_c", "render.report.v2"}

func routes(tools ...string) []broker.ToolRoute {
	out := make([]broker.ToolRoute, len(tools))
	for i, tool := range tools {
		out[i] = broker.ToolRoute{Tool: tool}
	}
	return out
}

func (e *queueEnv) consumer(t *testing.T, opts broker.ConsumerOptions) broker.Consumer {
	t.Helper()
	if opts.Tools == nil {
		opts.Tools = routes(suiteTools...)
	}
	c, err := e.q.Consumer(e.ctx, opts)
	if err != nil {
		t.Fatalf("Consumer(%+v): %v", opts, err)
	}
	return c
}

// next returns the next delivery, failing if none comes within wait.
func (e *queueEnv) next(t *testing.T, c broker.Consumer, wait time.Duration) broker.Delivery {
	t.Helper()
	ctx, cancel := context.WithTimeout(e.ctx, wait)
	defer cancel()
	d, err := c.Next(ctx)
	if err != nil {
		t.Fatalf("Next: no delivery within %s: %v", wait, err)
	}
	if d == nil || d.Job() == nil {
		t.Fatal("Next returned a nil delivery or job without an error")
	}
	return d
}

// quiet fails if c delivers anything within wait.
func (e *queueEnv) quiet(t *testing.T, c broker.Consumer, wait time.Duration, why string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(e.ctx, wait)
	defer cancel()
	d, err := c.Next(ctx)
	if err == nil {
		t.Fatalf("%s: got a delivery of %s (attempt %d) within %s, want none", why, d.Job().TaskID, d.Delivered(), wait)
	}
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("%s: Next = %v, want context.DeadlineExceeded", why, err)
	}
}

func ack(t *testing.T, ctx context.Context, d broker.Delivery) {
	t.Helper()
	if err := d.Ack(ctx); err != nil {
		t.Fatalf("Ack(%s): %v", d.Job().TaskID, err)
	}
}

func sameJob(t *testing.T, what string, got, want *broker.Job) {
	t.Helper()
	g, _ := json.Marshal(got)
	w, _ := json.Marshal(want)
	if string(g) != string(w) {
		t.Fatalf("%s: job differs\n got %s\nwant %s", what, g, w)
	}
}

// handOut enqueues a fresh job and hands it out to a new consumer with
// lease: the job, the consumer and its delivery.
func (s *queueSuite) handOut(t *testing.T, e *queueEnv, lease time.Duration) (*broker.Job, broker.Consumer, broker.Delivery) {
	t.Helper()
	j := e.job()
	e.enqueue(t, j)
	c := e.consumer(t, broker.ConsumerOptions{Lease: lease})
	return j, c, e.next(t, c, s.opts.Wait)
}

// deliverOnce enqueues j, fails unless c is handed it next and acks it.
func (s *queueSuite) deliverOnce(t *testing.T, e *queueEnv, c broker.Consumer, j *broker.Job, what string) {
	t.Helper()
	e.enqueue(t, j)
	d := e.next(t, c, s.opts.Wait)
	sameJob(t, what, d.Job(), j)
	ack(t, e.ctx, d)
}

// redelivered fails unless d is j's second delivery, and acks it.
func redelivered(t *testing.T, e *queueEnv, what string, d broker.Delivery, j *broker.Job) {
	t.Helper()
	sameJob(t, what, d.Job(), j)
	if d.Delivered() != 2 {
		t.Fatalf("%s: Delivered() = %d, want 2", what, d.Delivered())
	}
	ack(t, e.ctx, d)
}

func (s *queueSuite) roundTrip(t *testing.T, e *queueEnv) {
	want := &broker.Job{
		TaskID:    "ROUNDTRIP0123456789ABCDEFG",
		Tool:      "files.read_v2", // a dot: not a subject separator
		Arguments: json.RawMessage(`{"path":"/tmp/x y","opts":{"n":[1,2,3]},"u":"é✓"}`),
		Owner:     "alice@example.com",
		Meta: map[string]json.RawMessage{
			"traceparent":   json.RawMessage(`"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"`),
			"progressToken": json.RawMessage(`42`),
		},
	}
	e.enqueue(t, want)
	c := e.consumer(t, broker.ConsumerOptions{Lease: s.opts.Lease})
	d := e.next(t, c, s.opts.Wait)
	sameJob(t, "delivered job", d.Job(), want)
	if d.Delivered() != 1 {
		t.Fatalf("first delivery Delivered() = %d, want 1", d.Delivered())
	}
	ack(t, e.ctx, d)
	e.quiet(t, c, s.opts.Quiet, "after Ack")

	// A job without optional fields comes out without them.
	s.deliverOnce(t, e, c, &broker.Job{TaskID: "BARE0123456789ABCDEFGHIJKL", Tool: "t"}, "bare job")
}

func (s *queueSuite) enqueueInvalid(t *testing.T, e *queueEnv) {
	for _, j := range []*broker.Job{{Tool: "echo"}, {TaskID: "NOTOOL0123456789ABCDEFGHIJ"},
		{TaskID: "BADARGS0123456789ABCDEFGHI", Tool: "echo", Arguments: json.RawMessage("{")}} {
		if err := e.q.Enqueue(e.ctx, j); err == nil {
			t.Errorf("Enqueue(%+v) succeeded; a job needs a task id, a tool and arguments that are JSON", j)
		}
	}
	c := e.consumer(t, broker.ConsumerOptions{Lease: s.opts.Lease})
	e.quiet(t, c, s.opts.Quiet/2, "after refused enqueues")
}

func (s *queueSuite) dedupe(t *testing.T, e *queueEnv) {
	first := e.job()
	e.enqueue(t, first)
	// A task's jobs are all of its tool; the copy differs in its
	// arguments only, so the delivery shows which one was stored.
	dup := e.job()
	dup.TaskID = first.TaskID
	e.enqueue(t, dup) // accepted, and stored once

	c := e.consumer(t, broker.ConsumerOptions{Lease: longLease})
	d := e.next(t, c, s.opts.Wait)
	sameJob(t, "deduplicated job", d.Job(), first)

	// Re-publishing while the job runs (the sweeper's case) and after it is
	// done enqueues nothing either.
	e.enqueue(t, dup)
	ack(t, e.ctx, d)
	e.enqueue(t, dup)
	e.quiet(t, c, s.opts.Quiet, "after a deduplicated job was acked")

	// Dedupe is by task id only: a different id is a different job.
	s.deliverOnce(t, e, c, e.job(), "job with another id")
}

func (s *queueSuite) retryNow(t *testing.T, e *queueEnv) {
	// A long lease: only Retry can bring the job back within the wait.
	j, c, d := s.handOut(t, e, longLease)
	if err := d.Retry(e.ctx, 0); err != nil {
		t.Fatalf("Retry(0): %v", err)
	}
	redelivered(t, e, "redelivery after Retry", e.next(t, c, s.opts.Wait), j)
	e.quiet(t, c, s.opts.Quiet, "after acking the retried job")
}

func (s *queueSuite) retryDelay(t *testing.T, e *queueEnv) {
	const delay = 800 * time.Millisecond
	j, c, d := s.handOut(t, e, longLease)
	retried := time.Now()
	if err := d.Retry(e.ctx, delay); err != nil {
		t.Fatalf("Retry(%s): %v", delay, err)
	}
	d2 := e.next(t, c, delay+s.opts.Wait)
	if waited := time.Since(retried); waited < delay/2 {
		t.Fatalf("Retry(%s) redelivered after only %s", delay, waited)
	}
	redelivered(t, e, "redelivery after Retry", d2, j)
}

func (s *queueSuite) term(t *testing.T, e *queueEnv) {
	_, c, d := s.handOut(t, e, s.opts.Lease)
	if err := d.Term(e.ctx, "task already cancelled"); err != nil {
		t.Fatalf("Term: %v", err)
	}
	e.quiet(t, c, s.opts.Quiet, "after Term")

	// The queue still works for other jobs.
	s.deliverOnce(t, e, c, e.job(), "job after a terminated one")
}

func (s *queueSuite) leaseExpiry(t *testing.T, e *queueEnv) {
	lease := s.opts.Lease
	j, c, d := s.handOut(t, e, lease)
	taken := time.Now()
	_ = d // a crashed worker: never acked

	d2 := e.next(t, c, lease+s.opts.Wait)
	if held := time.Since(taken); held < lease/2 {
		t.Fatalf("job redelivered after %s, before its %s lease ran out", held, lease)
	}
	redelivered(t, e, "redelivery after lease expiry", d2, j)
	e.quiet(t, c, s.opts.Quiet, "after acking the redelivered job")
}

func (s *queueSuite) extend(t *testing.T, e *queueEnv) {
	lease := s.opts.Lease
	j, c, d := s.handOut(t, e, lease)

	// Keep extending well within the lease while another worker asks for
	// work for several leases.
	stop := make(chan struct{})
	extendErr := make(chan error, 1)
	go func() {
		tick := time.NewTicker(lease / 5)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				extendErr <- nil
				return
			case <-tick.C:
				if err := d.Extend(e.ctx); err != nil {
					extendErr <- err
					return
				}
			}
		}
	}()
	e.quiet(t, c, 3*lease, "while the lease is being extended")
	close(stop)
	if err := <-extendErr; err != nil {
		t.Fatalf("Extend: %v", err)
	}

	// Without extension the lease runs out and the job comes back, so it
	// was Extend that held it.
	redelivered(t, e, "redelivery after extension stopped", e.next(t, c, lease+s.opts.Wait), j)
}

func (s *queueSuite) maxDeliveries(t *testing.T, e *queueEnv) {
	const max = 3
	j := e.job()
	e.enqueue(t, j)
	c := e.consumer(t, broker.ConsumerOptions{Lease: s.opts.Lease, MaxDeliveries: max})
	for attempt := 1; attempt <= max; attempt++ {
		d := e.next(t, c, s.opts.Lease+s.opts.Wait)
		sameJob(t, fmt.Sprintf("delivery %d", attempt), d.Job(), j)
		if d.Delivered() != attempt {
			t.Fatalf("delivery %d: Delivered() = %d", attempt, d.Delivered())
		}
		if attempt < max {
			if err := d.Retry(e.ctx, 0); err != nil {
				t.Fatalf("Retry: %v", err)
			}
		}
		// The last one is left to its lease, as a crashed worker would.
	}
	e.quiet(t, c, s.opts.Quiet, fmt.Sprintf("after %d deliveries with MaxDeliveries %d", max, max))

	// Other jobs are not held up by the exhausted one.
	s.deliverOnce(t, e, c, e.job(), "job after an exhausted one")
}

func (s *queueSuite) nextContext(t *testing.T, e *queueEnv) {
	c := e.consumer(t, broker.ConsumerOptions{Lease: s.opts.Lease})
	bound := s.opts.Wait

	// Already cancelled.
	ctx, cancel := context.WithCancel(e.ctx)
	cancel()
	if d, err := c.Next(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("Next(cancelled ctx) = %v, %v; want context.Canceled", d, err)
	}

	// Cancelled while waiting.
	ctx, cancel = context.WithCancel(e.ctx)
	done := make(chan error, 1)
	go func() {
		d, err := c.Next(ctx)
		if d != nil {
			err = fmt.Errorf("got delivery %s from an empty queue", d.Job().TaskID)
		}
		done <- err
	}()
	cancel()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("Next after cancel = %v; want context.Canceled", err)
		}
	case <-time.After(bound):
		t.Fatalf("Next did not return within %s of its ctx being cancelled", bound)
	}

	// Deadline.
	ctx, cancel = context.WithTimeout(e.ctx, 200*time.Millisecond)
	defer cancel()
	start := time.Now()
	if d, err := c.Next(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Next past its deadline = %v, %v; want context.DeadlineExceeded", d, err)
	}
	if took := time.Since(start); took > bound {
		t.Fatalf("Next with a 200ms deadline took %s", took)
	}
}

// cancelledNextLosesNothing races a job's arrival against the cancellation
// of the Next waiting for it: the job must either come out of that Next or
// be handed to the following one at once, not sit out a lease.
func (s *queueSuite) cancelledNextLosesNothing(t *testing.T, e *queueEnv) {
	c := e.consumer(t, broker.ConsumerOptions{Lease: longLease})
	for i := range 8 {
		j := e.job()
		ctx, cancel := context.WithCancel(e.ctx)
		type result struct {
			d   broker.Delivery
			err error
		}
		res := make(chan result, 1)
		go func() {
			d, err := c.Next(ctx)
			res <- result{d, err}
		}()
		if i%2 == 0 {
			cancel()
			e.enqueue(t, j)
		} else {
			e.enqueue(t, j)
			cancel()
		}
		r := <-res
		d := r.d
		if r.err != nil {
			if !errors.Is(r.err, context.Canceled) {
				t.Fatalf("round %d: cancelled Next = %v, want context.Canceled", i, r.err)
			}
			d = e.next(t, c, s.opts.Wait)
		}
		sameJob(t, fmt.Sprintf("round %d", i), d.Job(), j)
		ack(t, e.ctx, d)
	}
}

func (s *queueSuite) concurrentConsumers(t *testing.T, e *queueEnv) {
	const (
		jobs    = 50
		workers = 4
	)
	tools := []string{"echo", "files.read", "a-b_c", "render.report.v2"}
	// A long lease: any second delivery here would be a double hand-out,
	// not a legitimate redelivery.
	opts := broker.ConsumerOptions{Lease: longLease}

	ctx, cancel := context.WithCancel(e.ctx)
	defer cancel()
	var (
		mu   sync.Mutex
		seen = map[string]int{}
		errs []error
		wg   sync.WaitGroup
	)
	all := make(chan struct{})
	for w := range workers {
		c := e.consumer(t, opts)
		wg.Go(func() {
			for {
				d, err := c.Next(ctx)
				if err != nil {
					if ctx.Err() == nil {
						mu.Lock()
						errs = append(errs, fmt.Errorf("worker %d: Next: %w", w, err))
						mu.Unlock()
					}
					return
				}
				if err := d.Ack(e.ctx); err != nil {
					mu.Lock()
					errs = append(errs, fmt.Errorf("worker %d: Ack: %w", w, err))
					mu.Unlock()
				}
				mu.Lock()
				seen[d.Job().TaskID]++
				if len(seen) == jobs {
					select {
					case <-all:
					default:
						close(all)
					}
				}
				mu.Unlock()
			}
		})
	}

	want := make([]*broker.Job, jobs)
	for i := range want {
		want[i] = e.job()
		want[i].Tool = tools[i%len(tools)]
	}
	var pub sync.WaitGroup
	for half := range 2 {
		pub.Go(func() {
			for i := half; i < jobs; i += 2 {
				if err := e.q.Enqueue(e.ctx, want[i]); err != nil {
					mu.Lock()
					errs = append(errs, fmt.Errorf("enqueue: %w", err))
					mu.Unlock()
				}
			}
		})
	}
	pub.Wait()

	select {
	case <-all:
	case <-time.After(s.opts.Wait):
	}
	cancel()
	wg.Wait()

	for _, err := range errs {
		t.Error(err)
	}
	for _, j := range want {
		switch n := seen[j.TaskID]; n {
		case 1:
		case 0:
			t.Errorf("job %s (%s) never delivered", j.TaskID, j.Tool)
		default:
			t.Errorf("job %s delivered %d times", j.TaskID, n)
		}
	}
	if len(seen) != jobs {
		t.Errorf("delivered %d distinct jobs, want %d", len(seen), jobs)
	}
	e.quiet(t, e.consumer(t, opts), s.opts.Quiet, "after all jobs were acked")
}
