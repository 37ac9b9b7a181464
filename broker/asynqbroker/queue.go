package asynqbroker

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"
	"github.com/rs/zerolog"

	"github.com/mcpqueue/mcpqueue/broker"
)

// Config names the queues and tunes the bridge. A nil Config is valid; zero
// fields take the documented defaults.
type Config struct {
	// Prefix is what every queue and channel name derives from (see
	// QueueName). Default "mcpq".
	Prefix string
	// Pools tells Enqueue (and Holds) which pool serves a route: its jobs
	// go to that pool's queue (PoolQueueName), the one every consumer of
	// the pool takes jobs from. A route it names no pool for ("", an
	// error, or a nil Pools) has its jobs put on the route's own queue
	// (QueueName), which every consumer of the route also looks at, less
	// often. backend wires the catalog here (taskstate.ToolInfo.Pool).
	Pools Pools
	// Priorities weigh the routes' own queues against each other (tool →
	// Asynq priority, at least 1): a consumer serving several tools takes
	// from a queue of priority 6 six times as often as from one of
	// priority 1 while both have jobs. Tools not listed have priority 1.
	// A pool's queue is one list in arrival order: it has no priorities.
	Priorities map[string]int
	// Concurrency is how many jobs one Consumer takes from Asynq at once
	// (the Asynq server's concurrency) when ConsumerOptions.Slots is 0.
	// It should equal the number of slots that call Next: more lets a
	// consumer hold jobs no slot is free to run, fewer leaves slots idle.
	// Default 4.
	Concurrency int
	// PollInterval is how often an idle consumer looks for new jobs, and
	// how often due retries move back to the queue (Asynq's
	// TaskCheckInterval and DelayedTaskCheckInterval). Default 100ms: each
	// idle consumer then asks Redis for work about ten times a second.
	PollInterval time.Duration
	// BusyPollInterval is how often a busy consumer looks for new jobs:
	// one that handed a job out within BusyFor. Asynq's processor sleeps
	// PollInterval/2 + rand[0, PollInterval) whenever it finds the queues
	// empty, and a queue under steady load runs dry for a moment every
	// time the consumer catches up, so without a shorter interval while
	// busy each job would wait most of a PollInterval (see "Busy and idle"
	// in the package documentation). Default 2ms; a value not below
	// PollInterval turns busy polling off. While busy and dry, a consumer
	// asks Redis up to 1/BusyPollInterval times a second (500 at 2ms).
	BusyPollInterval time.Duration
	// BusyFor is how long a consumer stays busy after handing out its last
	// job. Default 1s.
	BusyFor time.Duration
	// Dedupe is how long a finished job keeps its id, refusing re-enqueues
	// of it (Asynq Retention). Default 10m, like natsbroker.
	Dedupe time.Duration
	// Timeout caps one delivery, extended or not (Asynq Timeout): past it
	// Asynq cancels and retries the job. Default 24h.
	Timeout time.Duration
	// MaxDeliveries is the ceiling Enqueue stores on each job (Asynq
	// MaxRetry = MaxDeliveries-1); consumers apply their own
	// ConsumerOptions.MaxDeliveries below it. Default 100.
	MaxDeliveries int
	// ShutdownTimeout is how long a stopping consumer waits for deliveries
	// a worker holds before returning them to the queue. Keep it above the
	// worker's shutdown grace. Default 30s.
	ShutdownTimeout time.Duration
	// BusPrefix starts the bus's channel names; leave it empty to derive
	// it from Prefix (<prefix>:bus).
	BusPrefix string
	// Logger receives Asynq's log lines. The zero Logger discards them.
	Logger zerolog.Logger
}

// QueueName is the route's own Asynq queue: <prefix>.tool.<tool> ("" prefix
// is "mcpq"). It holds the jobs of a route no pool is known for yet (queued
// before any worker served it), and those a consumer was handed but does
// not serve or has no room for (see "Pools" in the package documentation).
func QueueName(prefix, tool string) string {
	return cmp.Or(prefix, "mcpq") + ".tool." + tool
}

// PoolQueueName is the Asynq queue of a pool's jobs: <prefix>.pool.<pool>
// ("" prefix is "mcpq", "" pool broker.DefaultPool). Its pending jobs are
// the Redis list asynq:{<queue>}:pending, which an autoscaler of the pool
// reads.
func PoolQueueName(prefix, pool string) string {
	return cmp.Or(prefix, "mcpq") + ".pool." + cmp.Or(pool, broker.DefaultPool)
}

// Pools finds the pool that serves a route (Config.Pools).
type Pools interface {
	// Pool is the pool whose workers serve route, "" if none is known.
	Pool(ctx context.Context, route string) (string, error)
}

// PoolFunc adapts a function to Pools.
type PoolFunc func(ctx context.Context, route string) (string, error)

// Pool calls f.
func (f PoolFunc) Pool(ctx context.Context, route string) (string, error) { return f(ctx, route) }

func (c *Config) withDefaults() Config {
	var out Config
	if c != nil {
		out = *c
	}
	out.Prefix = cmp.Or(out.Prefix, "mcpq")
	out.Concurrency = cmp.Or(max(out.Concurrency, 0), 4)
	out.PollInterval = cmp.Or(max(out.PollInterval, 0), 100*time.Millisecond)
	out.BusyPollInterval = cmp.Or(max(out.BusyPollInterval, 0), 2*time.Millisecond)
	out.BusyFor = cmp.Or(max(out.BusyFor, 0), time.Second)
	out.Dedupe = cmp.Or(max(out.Dedupe, 0), 10*time.Minute)
	out.Timeout = cmp.Or(max(out.Timeout, 0), 24*time.Hour)
	out.MaxDeliveries = cmp.Or(max(out.MaxDeliveries, 0), 100)
	out.ShutdownTimeout = cmp.Or(max(out.ShutdownTimeout, 0), 30*time.Second)
	out.BusPrefix = cmp.Or(out.BusPrefix, out.Prefix+":bus")
	return out
}

// priority is the Asynq priority of tool's queue.
func (c *Config) priority(tool string) int {
	if p := c.Priorities[tool]; p > 0 {
		return p
	}
	return 1
}

// Queue is the Asynq implementation of broker.Queue.
type Queue struct {
	rdb       redis.UniversalClient
	client    *asynq.Client
	inspector *asynq.Inspector
	cfg       Config

	mu        sync.Mutex
	closed    bool
	consumers map[*consumer]struct{}
}

var (
	_ broker.Queue  = (*Queue)(nil)
	_ broker.Holder = (*Queue)(nil)
)

// NewQueue returns a queue on rdb. It does not talk to Redis until used; the
// caller keeps ownership of rdb (Close does not close it).
func NewQueue(rdb redis.UniversalClient, cfg *Config) *Queue {
	return &Queue{
		rdb:       rdb,
		client:    asynq.NewClientFromRedisClient(rdb),
		inspector: asynq.NewInspectorFromRedisClient(rdb),
		cfg:       cfg.withDefaults(),
		consumers: map[*consumer]struct{}{},
	}
}

// QueueName is the route's own queue (QueueName).
func (q *Queue) QueueName(tool string) string { return QueueName(q.cfg.Prefix, tool) }

// PoolQueueName is the pool's queue (PoolQueueName).
func (q *Queue) PoolQueueName(pool string) string { return PoolQueueName(q.cfg.Prefix, pool) }

// queueOf is the queue a job of route goes to: its pool's when Config.Pools
// names one, else the route's own. A pool that is no plain name (SafeName)
// is not trusted with a queue name.
func (q *Queue) queueOf(ctx context.Context, route string) string {
	if q.cfg.Pools != nil {
		if pool, err := q.cfg.Pools.Pool(ctx, route); err == nil && broker.SafeName(pool) {
			return q.PoolQueueName(pool)
		}
	}
	return q.QueueName(route)
}

// Close stops every consumer of q, as if their ctx had ended, and returns
// once they have shut down.
func (q *Queue) Close() error {
	q.mu.Lock()
	q.closed = true
	cs := make([]*consumer, 0, len(q.consumers))
	for c := range q.consumers {
		cs = append(cs, c)
	}
	q.mu.Unlock()
	for _, c := range cs {
		c.stop()
	}
	return nil
}

// Enqueue adds the job to the queue of the pool that serves its route (or
// to the route's own queue), or does nothing if a job with its dedupe key
// is there.
func (q *Queue) Enqueue(ctx context.Context, job *broker.Job) error {
	b, err := broker.EncodeJob(job)
	if err != nil {
		return fmt.Errorf("asynqbroker: %w", err)
	}
	var at []asynq.Option
	if job.NotBefore.After(time.Now()) {
		at = append(at, asynq.ProcessAt(wholeSecondAfter(job.NotBefore))) // Asynq's scheduled set: schedule.go
	}
	if err := q.put(ctx, q.queueOf(ctx, job.Route()), job.Route(), job.DedupeKey(), b, at...); err != nil {
		return fmt.Errorf("asynqbroker: enqueue %s: %w", job.TaskID, err)
	}
	return nil
}

// put enqueues the job payload of route under id on queue: nil also when
// the queue holds the id already (pending, running, retrying, or done within
// the dedupe window).
func (q *Queue) put(ctx context.Context, queue, route, id string, payload []byte, extra ...asynq.Option) error {
	opts := append([]asynq.Option{
		asynq.TaskID(id),
		asynq.Queue(queue),
		asynq.MaxRetry(q.cfg.MaxDeliveries - 1),
		asynq.Retention(q.cfg.Dedupe),
		asynq.Timeout(q.cfg.Timeout),
	}, extra...)
	_, err := q.client.EnqueueContext(ctx, asynq.NewTask(route, payload), opts...)
	if errors.Is(err, asynq.ErrTaskIDConflict) {
		return nil // already enqueued (or running, or recently done)
	}
	return err
}

// routeQueues are the queues a job of route may wait in: its own, and the
// queue of the pool that serves it now.
func (q *Queue) routeQueues(ctx context.Context, route string) []string {
	queues := []string{q.QueueName(route)}
	if pq := q.queueOf(ctx, route); pq != queues[0] {
		queues = append(queues, pq)
	}
	return queues
}

// Holds implements broker.Holder with the inspector: a job is held while
// Asynq has it pending, scheduled, retrying or active, in the route's own
// queue or in the queue of the pool that serves the route now; completed
// (kept for the dedupe window, or moved on to another queue) and archived
// jobs are not. A job left in the queue of a pool that no longer serves the
// route is not held either, so the reaper republishes it where it runs.
func (q *Queue) Holds(ctx context.Context, route, _, dedupe string) (bool, error) {
	for _, queue := range q.routeQueues(ctx, route) {
		info, err := q.inspector.GetTaskInfo(queue, dedupe)
		if errors.Is(err, asynq.ErrTaskNotFound) || errors.Is(err, asynq.ErrQueueNotFound) {
			continue
		}
		if err != nil {
			return false, fmt.Errorf("asynqbroker: holds %s: %w", dedupe, err)
		}
		if info.State != asynq.TaskStateCompleted && info.State != asynq.TaskStateArchived {
			return true, nil
		}
	}
	return false, nil
}
