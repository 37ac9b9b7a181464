package asynqbroker_test

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"

	"github.com/mcpqueue/mcpqueue/broker"
	"github.com/mcpqueue/mcpqueue/broker/asynqbroker"
	"github.com/mcpqueue/mcpqueue/broker/brokertest"
	"github.com/mcpqueue/mcpqueue/internal/redistest"
	"github.com/mcpqueue/mcpqueue/internal/testenv"
)

// pollInterval keeps the suite quick: jobs and due retries are picked up
// within about this long.
const pollInterval = 100 * time.Millisecond

// newQueue returns a queue of its own name whose consumers stop, and whose
// keys are removed, when the test ends.
func newQueue(t *testing.T, c redis.UniversalClient, cfg *asynqbroker.Config) (*asynqbroker.Queue, string) {
	t.Helper()
	name := redistest.Name(t)
	var conf asynqbroker.Config
	if cfg != nil {
		conf = *cfg
	}
	conf.Prefix = name
	if conf.PollInterval == 0 {
		conf.PollInterval = pollInterval
	}
	if conf.ShutdownTimeout == 0 {
		conf.ShutdownTimeout = 2 * time.Second
	}
	q := asynqbroker.NewQueue(c, &conf)
	// Cleanups run last-in first-out: stop the consumers, then delete.
	redistest.DeleteKeys(t, c, "asynq:{"+name+".")
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		queues, _ := c.SMembers(ctx, "asynq:queues").Result()
		for _, q := range queues {
			if strings.HasPrefix(q, name+".") {
				_ = c.SRem(ctx, "asynq:queues", q).Err()
			}
		}
	})
	t.Cleanup(func() { _ = q.Close() })
	return q, name
}

func TestQueueContract(t *testing.T) {
	t.Parallel()
	c := redistest.Client(t)
	// A crashed worker's job comes back only through Asynq's recoverer,
	// a minute or so later, not after the route's lease (doc.go, "Leases
	// and crash recovery"): no broker.Redeliverer.
	features := brokertest.Features{Holder: true, Depth: true, Defer: true, Schedule: true}
	brokertest.RunQueue(t, features, func(t *testing.T) broker.Queue {
		q, _ := newQueue(t, c, nil)
		return q
	}, nil)
}

// The same suite with a pool for every route: every consumer of the suite
// (of the default pool) takes jobs from the one queue, and moves those of
// the routes it does not serve, or has no room for, to their own queues.
func TestQueueContractPools(t *testing.T) {
	t.Parallel()
	c := redistest.Client(t)
	features := brokertest.Features{Holder: true, Depth: true, Defer: true, Schedule: true}
	brokertest.RunQueue(t, features, func(t *testing.T) broker.Queue {
		q, _ := newQueue(t, c, &asynqbroker.Config{Pools: onePool(broker.DefaultPool)})
		return q
	}, nil)
}

func newBus(t *testing.T, c redis.UniversalClient, prefix string) *asynqbroker.Bus {
	b := asynqbroker.NewBus(c, &asynqbroker.Config{BusPrefix: prefix})
	t.Cleanup(func() { _ = b.Close() })
	return b
}

func TestBusContract(t *testing.T) {
	t.Parallel()
	pc, sc := redistest.Client(t), redistest.Client(t)
	brokertest.RunBus(t, func(t *testing.T) broker.Bus {
		prefix := redistest.Name(t)
		return brokertest.SplitBus{Pub: newBus(t, pc, prefix), Sub: newBus(t, sc, prefix)}
	})
}

// The same suite over a single client: what an all-in-one process does.
func TestBusContractOneClient(t *testing.T) {
	t.Parallel()
	c := redistest.Client(t)
	brokertest.RunBus(t, func(t *testing.T) broker.Bus {
		return newBus(t, c, redistest.Name(t))
	})
}

// Topics become channel names and the wildcard a glob pattern: a topic that
// is not one plain name is refused (task ids: brokertest.RunBus).
func TestBusRefusesUnsafeTopics(t *testing.T) {
	t.Parallel()
	bus := newBus(t, redistest.Client(t), redistest.Name(t))
	ctx := t.Context()
	for _, topic := range []broker.Topic{"", "can*", "a:b"} {
		if err := bus.Publish(ctx, topic, "ABCDEFGHIJKLMNOP", nil); err == nil {
			t.Errorf("Publish on topic %q succeeded", topic)
		}
	}
}

// A job the consumer took from Asynq but no Next has claimed goes back at
// once when the consumer stops; a job a worker holds goes back after
// ShutdownTimeout. Neither counts as a delivery.
func TestShutdownReturnsJobs(t *testing.T) {
	t.Parallel()
	c := redistest.Client(t)
	q, _ := newQueue(t, c, &asynqbroker.Config{Concurrency: 2, ShutdownTimeout: time.Second})
	ctx := t.Context()
	held, waiting := &broker.Job{TaskID: "HELD0123456789ABCDEFGHIJKL", Tool: "t"}, &broker.Job{TaskID: "WAIT0123456789ABCDEFGHIJKL", Tool: "t"}
	if err := q.Enqueue(ctx, held); err != nil {
		t.Fatal(err)
	}
	cctx, stop := context.WithCancel(ctx)
	cons, err := q.Consumer(cctx, broker.ConsumerOptions{Tools: tools("t"), Lease: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	d := next(t, cons)
	if d.Job().TaskID != held.TaskID {
		t.Fatalf("got %s", d.Job().TaskID)
	}
	if err := q.Enqueue(ctx, waiting); err != nil {
		t.Fatal(err)
	}
	// Let the consumer's second handler take the waiting job from Asynq.
	testenv.Eventually(t, 10*time.Second, "the second job to become active", func() bool {
		info, err := asynq.NewInspectorFromRedisClient(c).GetTaskInfo(q.QueueName("t"), waiting.TaskID)
		return err == nil && info.State == asynq.TaskStateActive
	})
	stop()

	other, err := q.Consumer(ctx, broker.ConsumerOptions{Tools: tools("t"), Lease: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]int{}
	for range 2 {
		d := next(t, other)
		got[d.Job().TaskID] = d.Delivered()
		if err := d.Ack(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if got[held.TaskID] != 1 || got[waiting.TaskID] != 1 {
		t.Fatalf("redelivered after shutdown with attempts %v, want both at 1", got)
	}
	// The first consumer's delivery was taken back.
	if err := d.Ack(ctx); err == nil {
		t.Fatal("Ack of a delivery returned to the queue at shutdown succeeded")
	}
}

// Retry(d) never comes back before d, although Asynq schedules in seconds.
func TestRetryDelayNeverEarly(t *testing.T) {
	t.Parallel()
	q, _ := newQueue(t, redistest.Client(t), nil)
	ctx := t.Context()
	cons, err := q.Consumer(ctx, broker.ConsumerOptions{Tools: tools("t"), Lease: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	for i, delay := range []time.Duration{100 * time.Millisecond, 1100 * time.Millisecond} {
		j := &broker.Job{TaskID: redistest.Name(t), Tool: "t"}
		if err := q.Enqueue(ctx, j); err != nil {
			t.Fatal(err)
		}
		d := next(t, cons)
		at := time.Now()
		if err := d.Retry(ctx, delay); err != nil {
			t.Fatal(err)
		}
		d = next(t, cons)
		if waited := time.Since(at); waited < delay {
			t.Fatalf("round %d: Retry(%s) came back after %s", i, delay, waited)
		}
		if err := d.Ack(ctx); err != nil {
			t.Fatal(err)
		}
	}
}

func TestDeliverySettlesOnce(t *testing.T) {
	t.Parallel()
	q, _ := newQueue(t, redistest.Client(t), nil)
	ctx := t.Context()
	if err := q.Enqueue(ctx, &broker.Job{TaskID: "ONCE0123456789ABCDEFGHIJKL", Tool: "t"}); err != nil {
		t.Fatal(err)
	}
	cons, err := q.Consumer(ctx, broker.ConsumerOptions{Tools: tools("t"), Lease: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	d := next(t, cons)
	if err := d.Ack(ctx); err != nil {
		t.Fatal(err)
	}
	for name, f := range map[string]func() error{
		"Ack":    func() error { return d.Ack(ctx) },
		"Retry":  func() error { return d.Retry(ctx, 0) },
		"Term":   func() error { return d.Term(ctx, "x") },
		"Extend": func() error { return d.Extend(ctx) },
	} {
		if err := f(); err == nil {
			t.Errorf("%s after Ack succeeded", name)
		}
	}
}

func TestNextAfterClose(t *testing.T) {
	t.Parallel()
	q, _ := newQueue(t, redistest.Client(t), nil)
	cons, err := q.Consumer(t.Context(), broker.ConsumerOptions{Tools: tools("t")})
	if err != nil {
		t.Fatal(err)
	}
	_ = q.Close()
	if d, err := cons.Next(t.Context()); !errors.Is(err, broker.ErrClosed) {
		t.Fatalf("Next after Close = %v, %v; want broker.ErrClosed", d, err)
	}
	if _, err := q.Consumer(t.Context(), broker.ConsumerOptions{Tools: tools("t")}); err == nil {
		t.Fatal("Consumer after Close succeeded")
	}
}

func next(t *testing.T, c broker.Consumer) broker.Delivery {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 15*time.Second)
	defer cancel()
	d, err := c.Next(ctx)
	if err != nil {
		t.Fatalf("Next: %v", err)
	}
	return d
}

// A worker process that dies holding a job: nothing renews Asynq's lease, and
// the recoverer of a live consumer hands the job out again 60-120s later (see
// the package doc). Slow, so it runs only with MCPQ_SLOW_TESTS=1.
func TestCrashRecovery(t *testing.T) {
	if q := os.Getenv("ASYNQBROKER_CRASH_QUEUE"); q != "" {
		// The child: take the job and die without shutting down.
		c := redis.NewClient(&redis.Options{Addr: redistest.Addr(t)})
		qu := asynqbroker.NewQueue(c, &asynqbroker.Config{Prefix: q, PollInterval: pollInterval})
		cons, err := qu.Consumer(context.Background(), broker.ConsumerOptions{Tools: tools("t"), Lease: time.Second})
		if err != nil {
			os.Exit(2)
		}
		d := next(t, cons)
		fmt.Println("took", d.Job().TaskID)
		os.Exit(3)
	}
	if os.Getenv("MCPQ_SLOW_TESTS") != "1" {
		t.Skip("set MCPQ_SLOW_TESTS=1 to run (takes up to two minutes)")
	}
	t.Parallel()
	c := redistest.Client(t)
	q, name := newQueue(t, c, nil)
	job := &broker.Job{TaskID: "CRASH0123456789ABCDEFGHIJK", Tool: "t"}
	if err := q.Enqueue(t.Context(), job); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestCrashRecovery$")
	cmd.Env = append(os.Environ(), "ASYNQBROKER_CRASH_QUEUE="+name, "MCPQ_TEST_REDIS="+c.Options().Addr) // the same server
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 3 || !strings.Contains(string(out), "took "+job.TaskID) {
		t.Fatalf("child: %v\n%s", err, out)
	}
	crashed := time.Now()

	cons, err := q.Consumer(t.Context(), broker.ConsumerOptions{Tools: tools("t"), Lease: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 150*time.Second)
	defer cancel()
	d, err := cons.Next(ctx)
	if err != nil {
		t.Fatalf("no redelivery within 150s of the crash: %v", err)
	}
	took := time.Since(crashed)
	t.Logf("redelivered %s after %s, attempt %d", d.Job().TaskID, took.Round(100*time.Millisecond), d.Delivered())
	if d.Job().TaskID != job.TaskID || d.Delivered() != 2 {
		t.Fatalf("got %s attempt %d, want %s attempt 2", d.Job().TaskID, d.Delivered(), job.TaskID)
	}
	if took < 50*time.Second {
		t.Fatalf("redelivered after only %s: Asynq's lease cannot have expired", took)
	}
	_ = d.Ack(t.Context())
}

func tools(names ...string) []broker.ToolRoute {
	out := make([]broker.ToolRoute, len(names))
	for i, n := range names {
		out[i] = broker.ToolRoute{Tool: n}
	}
	return out
}

// The jobs of the tools of a pool land in the pool's one queue, and a
// consumer of the pool serving both tools gets jobs of each.
func TestPoolQueue(t *testing.T) {
	t.Parallel()
	c := redistest.Client(t)
	q, _ := newQueue(t, c, &asynqbroker.Config{Pools: onePool("p")})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for _, j := range []*broker.Job{{TaskID: rand.Text(), Tool: "render"}, {TaskID: rand.Text(), Tool: "greet"}} {
		if err := q.Enqueue(ctx, j); err != nil {
			t.Fatal(err)
		}
	}
	insp := asynq.NewInspectorFromRedisClient(c)
	if info, err := insp.GetQueueInfo(q.PoolQueueName("p")); err != nil || info.Pending != 2 {
		t.Fatalf("queue %s: %+v %v, want 2 pending", q.PoolQueueName("p"), info, err)
	}
	for _, tool := range []string{"render", "greet"} {
		if info, err := insp.GetQueueInfo(q.QueueName(tool)); err == nil {
			t.Fatalf("tool %s has a queue of its own: %+v", tool, info)
		}
	}
	cons, err := q.Consumer(ctx, broker.ConsumerOptions{Tools: tools("render", "greet"), Slots: 2, Pool: "p"})
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for range 2 {
		d, err := cons.Next(ctx)
		if err != nil {
			t.Fatal(err)
		}
		seen[d.Job().Tool] = true
		if err := d.Ack(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if !seen["render"] || !seen["greet"] {
		t.Fatalf("consumer got %v, want jobs of both tools", seen)
	}
}

// A job of a route no pool is known for waits in the route's own queue, and
// a consumer of any pool that serves the route takes it from there.
func TestOwnQueueUntilAPoolIsKnown(t *testing.T) {
	t.Parallel()
	c := redistest.Client(t)
	q, _ := newQueue(t, c, &asynqbroker.Config{Pools: asynqbroker.PoolFunc(func(_ context.Context, route string) (string, error) {
		if route == "unknown" {
			return "", nil
		}
		return "", errors.New("catalog unreachable")
	})})
	ctx := t.Context()
	for _, tool := range []string{"unknown", "unreachable"} {
		j := &broker.Job{TaskID: rand.Text(), Tool: tool}
		if err := q.Enqueue(ctx, j); err != nil {
			t.Fatal(err)
		}
		info, err := asynq.NewInspectorFromRedisClient(c).GetTaskInfo(q.QueueName(tool), j.TaskID)
		if err != nil || info.State != asynq.TaskStatePending {
			t.Fatalf("job of %s: %+v, %v; want it pending in %s", tool, info, err, q.QueueName(tool))
		}
		cons, err := q.Consumer(ctx, broker.ConsumerOptions{Tools: tools(tool), Pool: "gpu"})
		if err != nil {
			t.Fatal(err)
		}
		d := next(t, cons)
		if d.Job().TaskID != j.TaskID || d.Delivered() != 1 {
			t.Fatalf("got %s delivery %d, want %s delivery 1", d.Job().TaskID, d.Delivered(), j.TaskID)
		}
		if err := d.Ack(ctx); err != nil {
			t.Fatal(err)
		}
	}
}

// A consumer handed a job of a route it does not serve (the pool was
// redefined; the catalog named another pool a moment ago) moves it to the
// route's own queue, where a consumer of the route takes it as its first
// delivery: nothing is lost, no delivery is used, and the queue holds the
// job all along.
func TestMisroutedJobMoves(t *testing.T) {
	t.Parallel()
	c := redistest.Client(t)
	q, _ := newQueue(t, c, &asynqbroker.Config{Pools: onePool("p")})
	ctx := t.Context()
	a, err := q.Consumer(ctx, broker.ConsumerOptions{Tools: tools("a"), Pool: "p", Lease: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	j := &broker.Job{TaskID: rand.Text(), Tool: "b"}
	if err := q.Enqueue(ctx, j); err != nil {
		t.Fatal(err)
	}
	insp := asynq.NewInspectorFromRedisClient(c)
	testenv.Eventually(t, 10*time.Second, "the job to move to b's own queue", func() bool {
		info, err := insp.GetTaskInfo(q.QueueName("b"), j.TaskID)
		return err == nil && info.State == asynq.TaskStatePending
	})
	if held, err := q.Holds(ctx, "b", j.TaskID, j.TaskID); err != nil || !held {
		t.Fatalf("Holds of the moved job = %v, %v; want true", held, err)
	}
	testenv.Eventually(t, 10*time.Second, "the pool's copy to say where it went", func() bool {
		info, err := insp.GetTaskInfo(q.PoolQueueName("p"), j.TaskID)
		return err == nil && info.State == asynq.TaskStateCompleted && strings.HasPrefix(string(info.Result), "moved to "+q.QueueName("b"))
	})
	short, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
	defer cancel()
	if d, err := a.Next(short); err == nil {
		t.Fatalf("a's consumer was handed %s of %s", d.Job().TaskID, d.Job().Tool)
	}
	b, err := q.Consumer(ctx, broker.ConsumerOptions{Tools: tools("b"), Pool: "q", Lease: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	d := next(t, b)
	if d.Job().TaskID != j.TaskID || d.Delivered() != 1 {
		t.Fatalf("b's consumer got %s delivery %d, want %s delivery 1", d.Job().TaskID, d.Delivered(), j.TaskID)
	}
	if err := d.Ack(ctx); err != nil {
		t.Fatal(err)
	}
}
