package producer_test

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mcpqueue/mcpqueue/broker"
	"github.com/mcpqueue/mcpqueue/broker/asynqbroker"
	"github.com/mcpqueue/mcpqueue/internal/redistest"
	"github.com/mcpqueue/mcpqueue/internal/testenv"
	"github.com/mcpqueue/mcpqueue/producer"
	"github.com/mcpqueue/mcpqueue/taskstate"
	"github.com/mcpqueue/mcpqueue/taskstate/redisstate"
)

// reapEnv is a real queue and store of one backend, a producer on them and
// a consumer to see what the reaper published.
type reapEnv struct {
	store taskstate.Store
	queue broker.Queue
	prod  *producer.Producer
	cons  broker.Consumer
}

func reapBackends(t *testing.T, run func(t *testing.T, e *reapEnv)) {
	t.Run("nats", func(t *testing.T) {
		t.Parallel()
		s := testenv.StartNATS(t).Connect(t)
		run(t, newReapEnv(t, s.Store, s.Queue))
	})
	t.Run("redis", func(t *testing.T) {
		t.Parallel()
		c := redistest.Client(t)
		name := redistest.Name(t)
		redistest.DeleteKeys(t, c, name+":")
		redistest.DeleteKeys(t, c, "asynq:{"+name+".")
		q := asynqbroker.NewQueue(c, &asynqbroker.Config{Prefix: name, PollInterval: 20 * time.Millisecond, ShutdownTimeout: 2 * time.Second})
		t.Cleanup(func() { _ = q.Close(); _ = c.SRem(context.Background(), "asynq:queues", q.QueueName("echo")).Err() })
		st := redisstate.New(c, &redisstate.Config{Prefix: name + ":"})
		t.Cleanup(func() { _ = st.Close() })
		run(t, newReapEnv(t, st, q))
	})
}

func newReapEnv(t *testing.T, st taskstate.Store, q broker.Queue) *reapEnv {
	cons, err := q.Consumer(t.Context(), broker.ConsumerOptions{Tools: []broker.ToolRoute{{Tool: "echo"}}, Lease: 5 * time.Second, Slots: 1})
	if err != nil {
		t.Fatal(err)
	}
	return &reapEnv{store: st, queue: q, cons: cons, prod: producer.New(st, producer.QueueExecutor{Queue: q}, nil)}
}

// record writes a task record straight to the store, as an api that died
// before publishing would leave it; adjust shapes it first.
func (e *reapEnv) record(t *testing.T, adjust func(*taskstate.Task)) *taskstate.Task {
	t.Helper()
	now := time.Now().UTC()
	tk := &taskstate.Task{ID: taskstate.NewID(), Tool: "echo", Era: taskstate.Era20260728, Mode: taskstate.ModeTask,
		Status: taskstate.Working, CreatedAt: now, LastUpdatedAt: now, TTLMs: 60_000}
	if adjust != nil {
		adjust(tk)
	}
	if err := e.store.Create(t.Context(), tk); err != nil {
		t.Fatal(err)
	}
	return tk
}

// delivered returns the next job a worker would get, acked.
func (e *reapEnv) delivered(t *testing.T) *broker.Job {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	d, err := e.cons.Next(ctx)
	if err != nil {
		t.Fatalf("no job reached the queue: %v", err)
	}
	_ = d.Ack(ctx)
	return d.Job()
}

func (e *reapEnv) reap(t *testing.T, cfg *producer.ReaperConfig) producer.ReapStats {
	t.Helper()
	st, err := e.prod.ReapOnce(t.Context(), cfg)
	if err != nil {
		t.Fatalf("ReapOnce: %v", err)
	}
	return st
}

// The api died between the record and the publish: once PublishGrace has
// passed, the reaper finds the queue holds no job and republishes it, once.
func TestReapRepublishesLostJob(t *testing.T) {
	t.Parallel()
	reapBackends(t, func(t *testing.T, e *reapEnv) {
		lost := e.record(t, nil)
		grace := &producer.ReaperConfig{PublishGrace: time.Nanosecond}
		if st := e.reap(t, grace); st.Requeued != 1 || st.Active != 1 {
			t.Fatalf("first pass %+v, want 1 active, 1 requeued", st)
		}
		job := e.delivered(t)
		if job.TaskID != lost.ID || job.DedupeKey() != lost.ID+"/r1" {
			t.Fatalf("republished job %s (key %s), want %s under %s/r1", job.TaskID, job.DedupeKey(), lost.ID, lost.ID)
		}
		if got := get(t, e.store, lost.ID); got.Requeues != 1 || got.Status != taskstate.Working {
			t.Fatalf("record after requeue: %s requeues=%d", got.Status, got.Requeues)
		}
	})
}

// A job that is waiting in the queue (a backlog) is not published again,
// however long it waits.
func TestReapLeavesWaitingJob(t *testing.T) {
	t.Parallel()
	reapBackends(t, func(t *testing.T, e *reapEnv) {
		tk, err := e.prod.Create(t.Context(), &producer.Request{Tool: "echo", Era: taskstate.Era20260728})
		if err != nil {
			t.Fatal(err)
		}
		if st := e.reap(t, &producer.ReaperConfig{PublishGrace: time.Nanosecond}); st.Requeued != 0 {
			t.Fatalf("pass %+v requeued a job the queue holds", st)
		}
		if got := get(t, e.store, tk.ID); got.Requeues != 0 || got.Revision != tk.Revision {
			t.Fatalf("record touched: requeues=%d rev %d→%d", got.Requeues, tk.Revision, got.Revision)
		}
	})
}

// A worker's lapsed lease: the job is requeued under a new key and the
// lease cleared; on the last attempt the task is failed, saying why. Live
// leases and terminal tasks are left alone, and two reapers racing act once.
func TestReapLapsedLeases(t *testing.T) {
	t.Parallel()
	reapBackends(t, func(t *testing.T, e *reapEnv) {
		past := time.Now().Add(-time.Minute).UTC()
		lapsed := func(attempt int) func(*taskstate.Task) {
			return func(tk *taskstate.Task) {
				tk.Attempt = attempt
				tk.Lease = &taskstate.Lease{Worker: "w-gone", Expires: past}
			}
		}
		requeue := e.record(t, lapsed(1))
		exhausted := e.record(t, lapsed(3))
		live := e.record(t, func(tk *taskstate.Task) {
			tk.Attempt = 1
			tk.Lease = &taskstate.Lease{Worker: "w-alive", Expires: time.Now().Add(time.Hour).UTC()}
		})
		var mu sync.Mutex
		expired := map[string]int{}
		cfg := &producer.ReaperConfig{MaxAttempts: 3, LeaseExpired: func(tool string) {
			mu.Lock()
			expired[tool]++
			mu.Unlock()
		}}

		// Two replicas' reapers at once.
		var wg sync.WaitGroup
		stats := make([]producer.ReapStats, 2)
		for i := range stats {
			wg.Go(func() { stats[i] = e.reap(t, cfg) })
		}
		wg.Wait()
		if req, fail := stats[0].Requeued+stats[1].Requeued, stats[0].Failed+stats[1].Failed; req != 1 || fail != 1 {
			t.Fatalf("two reapers: %+v %+v; want one requeue and one failure in all", stats[0], stats[1])
		}
		if expired["echo"] != 2 {
			t.Fatalf("LeaseExpired hook called %v, want echo twice", expired)
		}

		job := e.delivered(t)
		if job.TaskID != requeue.ID || job.DedupeKey() != requeue.ID+"/r1" {
			t.Fatalf("requeued job %s (key %s), want %s/r1", job.TaskID, job.DedupeKey(), requeue.ID)
		}
		if got := get(t, e.store, requeue.ID); got.Lease != nil || got.Requeues != 1 || got.Attempt != 1 || got.Status != taskstate.Working {
			t.Fatalf("requeued record: %s lease=%v requeues=%d attempt=%d", got.Status, got.Lease, got.Requeues, got.Attempt)
		}
		got := get(t, e.store, exhausted.ID)
		if got.Status != taskstate.Failed || !strings.Contains(got.StatusMessage, "gave up after 3 attempts: worker w-gone stopped renewing its lease") {
			t.Fatalf("exhausted record: %s %q", got.Status, got.StatusMessage)
		}
		if got := get(t, e.store, live.ID); got.Revision != live.Revision {
			t.Fatalf("a live lease was touched: revision %d → %d", live.Revision, got.Revision)
		}
		// Nothing more to do: the requeued job waits in the queue.
		if st := e.reap(t, cfg); st.Requeued+st.Failed != 0 {
			t.Fatalf("second pass acted again: %+v", st)
		}
	})
}

// A parked task (waiting for its client with no run) is never republished,
// however long it waits, until its input deadline; then it fails saying it
// timed out waiting for input. A parked task whose answers come is the
// api's to resume, not the reaper's.
func TestReapParked(t *testing.T) {
	t.Parallel()
	reapBackends(t, func(t *testing.T, e *reapEnv) {
		old := time.Now().Add(-time.Hour).UTC()
		waiting := e.record(t, func(tk *taskstate.Task) {
			tk.Status, tk.Attempt, tk.Parks = taskstate.InputRequired, 1, 1
			tk.InputRequests = map[string]json.RawMessage{"confirm-1": json.RawMessage(`{"method":"elicitation/create","params":{}}`)}
			tk.Parked = &taskstate.Parked{Since: old, Until: time.Now().Add(time.Hour).UTC()}
			tk.LastUpdatedAt = old
		})
		overdue := e.record(t, func(tk *taskstate.Task) {
			tk.Status, tk.Attempt, tk.Parks = taskstate.InputRequired, 1, 1
			tk.InputRequests = map[string]json.RawMessage{"confirm-1": json.RawMessage(`{"method":"elicitation/create","params":{}}`)}
			tk.Parked = &taskstate.Parked{Since: old, Until: old.Add(30 * time.Minute)}
			tk.LastUpdatedAt = old
		})
		st := e.reap(t, &producer.ReaperConfig{PublishGrace: time.Nanosecond})
		if st.Requeued != 0 || st.Failed != 1 {
			t.Fatalf("pass %+v, want nothing requeued and the overdue task failed", st)
		}
		if got := get(t, e.store, waiting.ID); got.Revision != waiting.Revision {
			t.Fatalf("a parked task within its deadline was touched: %+v", got)
		}
		got := get(t, e.store, overdue.ID)
		if got.Status != taskstate.Failed || got.Parked != nil || len(got.InputRequests) != 0 ||
			!strings.Contains(got.StatusMessage, "timed out waiting for client input") || !strings.Contains(got.StatusMessage, "--input-timeout") {
			t.Fatalf("overdue parked task: %s %q", got.Status, got.StatusMessage)
		}
	})
}

// scanCounter counts the passes a reaper runs on its store.
type scanCounter struct {
	taskstate.Store
	n atomic.Int64
}

func (s *scanCounter) Scan(ctx context.Context, active bool, fn func(*taskstate.Task) bool) error {
	s.n.Add(1)
	return s.Store.Scan(ctx, active, fn)
}

func (s *scanCounter) Lease(ctx context.Context, name, holder string, ttl time.Duration) (bool, error) {
	return s.Store.(taskstate.Leaser).Lease(ctx, name, holder, ttl)
}

// Two api replicas' reapers on one store: one runs passes, the other none,
// until the first stops; then the other takes over.
func TestReapOneReplicaAtATime(t *testing.T) {
	reapBackends(t, func(t *testing.T, e *reapEnv) {
		var wg sync.WaitGroup
		defer wg.Wait()
		type replica struct {
			passes *scanCounter
			stop   context.CancelFunc
		}
		var rs []replica
		for _, holder := range []string{"api-a", "api-b"} {
			ctx, stop := context.WithCancel(t.Context())
			defer stop()
			counter := &scanCounter{Store: e.store}
			p := producer.New(counter, producer.QueueExecutor{Queue: e.queue}, nil)
			wg.Go(func() { p.Reap(ctx, &producer.ReaperConfig{Interval: 100 * time.Millisecond, Holder: holder}) })
			rs = append(rs, replica{counter, stop})
		}
		waitFor(t, "five passes", func() bool { return rs[0].passes.n.Load()+rs[1].passes.n.Load() >= 5 })
		na, nb := rs[0].passes.n.Load(), rs[1].passes.n.Load()
		if na > 0 && nb > 0 {
			t.Fatalf("both reapers ran passes (%d and %d): the lease let two hold it", na, nb)
		}
		holder, other := rs[0], rs[1]
		if nb > 0 {
			holder, other = rs[1], rs[0]
		}
		holder.stop()
		waitFor(t, "the other reaper taking over", func() bool { return other.passes.n.Load() > 0 })
	})
}

// waitFor polls cond every 20ms for up to 10s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s did not happen within 10s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
