package consumer_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/mcpqueue/mcpqueue/backend"
	"github.com/mcpqueue/mcpqueue/broker"
	"github.com/mcpqueue/mcpqueue/consumer"
	"github.com/mcpqueue/mcpqueue/internal/testenv"
	"github.com/mcpqueue/mcpqueue/producer"
	"github.com/mcpqueue/mcpqueue/taskstate"
)

// jobs is how many jobs the stream holds (acked jobs leave it).
func (e *env) jobs(t *testing.T) uint64 {
	t.Helper()
	_, info := testenv.Stream(t, e.js, e.stream)
	return info.State.Msgs
}

// worker runs a worker with id on bus until the returned stop is called;
// stop returns once every delivery it took has been processed.
func (e *env) worker(t *testing.T, mux *consumer.Mux, bus broker.Bus, cfg consumer.Config) (stop func()) {
	t.Helper()
	return testenv.RunWorker(t, consumer.New(backend.Backend{Queue: e.queue, Store: e.store, Catalog: e.store, Bus: bus}, &cfg), mux)
}

// takeOver does to the record what another worker's take does: the next
// attempt, under that worker's lease.
func (e *env) takeOver(t *testing.T, id, worker string, lease time.Duration) *taskstate.Task {
	t.Helper()
	tk, err := taskstate.Mutate(context.Background(), e.store, id, time.Now, func(t *taskstate.Task) error {
		t.Attempt++
		t.Lease = &taskstate.Lease{Worker: worker, Expires: time.Now().Add(lease).UTC()}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return tk
}

func (e *env) complete(t *testing.T, id, text string) *taskstate.Task {
	t.Helper()
	res, _ := json.Marshal(&consumer.Result{Content: []consumer.Content{consumer.Text(text)}})
	tk, err := taskstate.Mutate(context.Background(), e.store, id, time.Now, func(t *taskstate.Task) error {
		t.Status, t.Result, t.Lease = taskstate.Completed, res, nil
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return tk
}

func sameRevision(t *testing.T, e *env, id string, want *taskstate.Task) {
	t.Helper()
	got, err := e.store.Get(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	if got.Revision != want.Revision || got.Status != want.Status || string(got.Result) != string(want.Result) {
		t.Fatalf("record changed after the takeover: %s rev %d %s, want %s rev %d %s",
			got.Status, got.Revision, got.Result, want.Status, want.Revision, want.Result)
	}
}

// untilStopped serves a tool "long" whose handler reports its start, runs
// until its context ends, reports why, and then returns a result anyway.
func untilStopped() (mux *consumer.Mux, started chan struct{}, cause chan error) {
	started, cause = make(chan struct{}), make(chan error, 1)
	mux = consumer.NewMux()
	consumer.Handle(mux, consumer.Tool{Name: "long"}, func(ctx context.Context, c *consumer.Call[none]) (*consumer.Result, error) {
		close(started)
		<-ctx.Done()
		cause <- context.Cause(ctx)
		return consumer.TextResult("late outcome"), nil
	})
	return mux, started, cause
}

func wantCause(t *testing.T, cause <-chan error, want error) {
	t.Helper()
	select {
	case err := <-cause:
		if !errors.Is(err, want) {
			t.Fatalf("handler ended with %v, want %v", err, want)
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("handler never ended (want %v)", want)
	}
}

// A worker paused past its lease wakes up with its handler still running:
// its next renewal finds another run's attempt on the record, ends the
// handler with ErrFenced, and writes nothing.
func TestZombieRenewalIsFenced(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	mux, started, cause := untilStopped()
	stop := e.worker(t, mux, e.bus, consumer.Config{ID: "zombie", Lease: 600 * time.Millisecond})
	id := e.create(t, "long", none{})
	<-started
	e.takeOver(t, id, "successor", time.Minute)
	final := e.complete(t, id, "successor's outcome")

	wantCause(t, cause, consumer.ErrFenced)
	stop() // waits until the zombie's delivery is processed
	sameRevision(t, e, id, final)
}

// The takeover lands between two renewals: the zombie's handler returns,
// and its outcome write is refused on the attempt number.
func TestZombieOutcomeIsFenced(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	started, release := make(chan struct{}), make(chan struct{})
	returned := make(chan struct{})
	mux := consumer.NewMux()
	consumer.Handle(mux, consumer.Tool{Name: "step"}, func(ctx context.Context, c *consumer.Call[none]) (*consumer.Result, error) {
		close(started)
		<-release
		defer close(returned)
		return consumer.TextResult("zombie's outcome"), nil
	})
	// A lease long enough that no renewal falls inside the test.
	stop := e.worker(t, mux, e.bus, consumer.Config{ID: "zombie", Lease: time.Minute})
	id := e.create(t, "step", none{})
	<-started
	took := e.takeOver(t, id, "successor", time.Minute)
	close(release)
	<-returned
	stop()
	sameRevision(t, e, id, took) // still the successor's run: working, its lease, attempt 2
	if n := e.jobs(t); n != 1 {
		t.Fatalf("stream holds %d jobs, want 1: the zombie must not settle a job it no longer owns", n)
	}
}

// A job whose record carries another worker's live lease (a requeued or
// duplicate job) does not run until that lease has lapsed.
func TestLiveLeaseHoldsOffDuplicate(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	type run struct {
		at      time.Time
		attempt int
	}
	runs := make(chan run, 4)
	mux := consumer.NewMux()
	consumer.Handle(mux, consumer.Tool{Name: "once"}, func(ctx context.Context, c *consumer.Call[none]) (*consumer.Result, error) {
		runs <- run{time.Now(), c.Attempt()}
		return consumer.TextResult("ok"), nil
	})
	id := e.create(t, "once", none{})
	held := e.takeOver(t, id, "holder", 1500*time.Millisecond) // holder then dies without renewing
	// The holder took the task with its first job; what reaches the other
	// worker is a requeue of it (the first job's first delivery is one no
	// other run can hold: its worker starts from the record it carries).
	if err := e.queue.(broker.Withdrawer).Withdraw(t.Context(), "once", id); err != nil {
		t.Fatal(err)
	}
	requeued := held.Clone()
	requeued.Requeues++
	if err := e.queue.Enqueue(t.Context(), producer.JobFor(requeued)); err != nil {
		t.Fatal(err)
	}
	e.worker(t, mux, e.bus, consumer.Config{ID: "other", Lease: 2 * time.Second})
	final := e.waitFor(t, id, terminal)
	r := <-runs
	if r.at.Before(held.Lease.Expires) {
		t.Fatalf("handler ran at %s, before the holder's lease lapsed at %s", r.at.Format(time.RFC3339Nano), held.Lease.Expires.Format(time.RFC3339Nano))
	}
	if r.attempt != 2 || final.Status != taskstate.Completed {
		t.Fatalf("run attempt %d, final %s; want attempt 2, completed", r.attempt, final.Status)
	}
	select {
	case extra := <-runs:
		t.Fatalf("handler ran a second time (attempt %d)", extra.attempt)
	default:
	}
}

// A worker that misses the cancel broadcast still stops the handler: its
// next lease renewal reads the cancelled record.
func TestCancelSeenOnRenewalWithoutBroadcast(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	mux, started, cause := untilStopped()
	stop := e.worker(t, mux, e.deafBus, consumer.Config{Lease: 600 * time.Millisecond})
	id := e.create(t, "long", none{})
	<-started
	cancelled, err := e.prod.Cancel(context.Background(), id, "stop")
	if err != nil {
		t.Fatal(err)
	}
	wantCause(t, cause, consumer.ErrTaskCancelled)
	stop()
	sameRevision(t, e, id, cancelled)
	if n := e.jobs(t); n != 0 {
		t.Fatalf("stream holds %d jobs after the cancelled run, want 0", n)
	}
}

// A cancel written after the job reached the worker, and before the run
// registered for the broadcast (here: missed, on a deaf bus), is not on
// the record the run started from (its job's): the run's first write, the
// lazy take, finds the task cancelled and ends the handler, long before
// the first lease renewal.
func TestCancelAfterPickupSeenAtTheTake(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	mux, started, cause := untilStopped()
	mux.Use(func(next consumer.Handler) consumer.Handler {
		return func(ctx context.Context, req *consumer.Request) (json.RawMessage, error) {
			if _, err := e.prod.Cancel(context.Background(), req.TaskID(), "stop"); err != nil {
				t.Error(err)
			}
			return next(ctx, req)
		}
	})
	stop := e.worker(t, mux, e.deafBus, consumer.Config{Lease: time.Minute}) // first renewal after 20 s
	id := e.create(t, "long", none{})
	<-started
	wantCause(t, cause, consumer.ErrTaskCancelled)
	stop()
	if tk, err := e.store.Get(context.Background(), id); err != nil || tk.Status != taskstate.Cancelled {
		t.Fatalf("after the run: %v, %v; want cancelled", tk, err)
	}
}
