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
	// Priorities weigh tools' queues against each other (tool → Asynq
	// priority, at least 1): a consumer serving several tools takes from
	// a queue of priority 6 six times as often as from one of priority 1
	// while both have jobs. Tools not listed have priority 1.
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

// QueueName is the Asynq queue of a tool's jobs: <prefix>.tool.<tool>
// ("" prefix is "mcpq"). Its pending jobs are the Redis list
// asynq:{<queue>}:pending, which an autoscaler of the tool's pool reads.
func QueueName(prefix, tool string) string {
	if prefix == "" {
		prefix = "mcpq"
	}
	return prefix + ".tool." + tool
}

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

// QueueName is the Asynq queue of tool's jobs.
func (q *Queue) QueueName(tool string) string { return QueueName(q.cfg.Prefix, tool) }

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

// Enqueue adds the job to its tool's queue, or does nothing if a job with
// its dedupe key is there.
func (q *Queue) Enqueue(ctx context.Context, job *broker.Job) error {
	b, err := broker.EncodeJob(job)
	if err != nil {
		return fmt.Errorf("asynqbroker: %w", err)
	}
	_, err = q.client.EnqueueContext(ctx, asynq.NewTask(job.Route(), b),
		asynq.TaskID(job.DedupeKey()),
		asynq.Queue(q.QueueName(job.Route())),
		asynq.MaxRetry(q.cfg.MaxDeliveries-1),
		asynq.Retention(q.cfg.Dedupe),
		asynq.Timeout(q.cfg.Timeout),
	)
	if errors.Is(err, asynq.ErrTaskIDConflict) {
		return nil // already enqueued (or running, or recently done)
	}
	if err != nil {
		return fmt.Errorf("asynqbroker: enqueue %s: %w", job.TaskID, err)
	}
	return nil
}

// Holds implements broker.Holder with the inspector: a job is held while
// Asynq has it pending, scheduled, retrying or active; completed (kept for
// the dedupe window) and archived jobs are not.
func (q *Queue) Holds(ctx context.Context, tool, _, dedupe string) (bool, error) {
	info, err := q.inspector.GetTaskInfo(q.QueueName(tool), dedupe)
	if errors.Is(err, asynq.ErrTaskNotFound) || errors.Is(err, asynq.ErrQueueNotFound) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("asynqbroker: holds %s: %w", dedupe, err)
	}
	switch info.State {
	case asynq.TaskStateCompleted, asynq.TaskStateArchived:
		return false, nil
	}
	return true, nil
}
