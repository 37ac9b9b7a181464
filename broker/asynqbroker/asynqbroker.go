// Package asynqbroker implements broker.Queue on an Asynq queue and
// broker.Bus on Redis pub/sub, so a Redis-only deployment needs no NATS.
//
// # Jobs
//
// A job is an Asynq task whose type is the tool name, whose payload is the
// JSON job and whose Asynq task id is the job's TaskID. Enqueuing an id that
// Asynq still holds (pending, running, waiting to retry, archived, or
// finished within Config.Dedupe) fails with asynq.ErrTaskIDConflict, which
// Enqueue reports as success: the job is already there.
//
// # The pull bridge
//
// Asynq pushes: its Server dequeues a task and calls a handler. Our Consumer
// is pulled: Next hands out one job per free worker slot. Each Consumer runs
// an asynq.Server (one at a time taking jobs; see Busy and idle) with
// Concurrency = its slots (ConsumerOptions.Slots, else Config.Concurrency)
// whose handler passes
// the delivery to a Next caller over an unbuffered channel — so a job either
// comes out of a Next or stays with the handler for the following one, even
// when that Next's ctx ends at the same moment. The server dequeues whenever
// it has a free handler, so with fewer slots calling Next than Concurrency a
// job can wait in a handler; if no Next takes it within the lease it is handed
// back to the queue (not counted as a delivery) for another consumer. Once a
// Next has it, the handler blocks until the worker settles it:
//
//	Ack          handler returns nil: the task completes and is kept for
//	             Config.Dedupe (Asynq Retention) so its id stays taken.
//	Retry(d)     handler returns an error; the RetryDelayFunc reads d from
//	             it. Asynq schedules retries in whole seconds, so a delay
//	             d > 0 is rounded up: redelivery comes after d and before
//	             d + 1s + PollInterval. The delivery count goes up by one.
//	Term(reason) handler returns reason wrapping asynq.SkipRetry: the task
//	             is archived with reason as its last error.
//	Extend       renews the delivery's lease (below).
//
// Attempt is Asynq's retry count + 1.
//
// # Busy and idle
//
// Asynq does not block on Redis for work: when its processor finds every
// queue empty it sleeps PollInterval/2 + rand[0, PollInterval) before it looks
// again. A consumer that keeps up with its load finds the queue empty every
// time it catches up, so under load each job would wait most of a
// PollInterval too — a closed loop of quick jobs then runs at about
// slots ÷ PollInterval, whatever the CPUs allow. So a consumer paces itself:
// once it has handed a job out it is busy, and a server polling every
// BusyPollInterval takes jobs until BusyFor passes without a hand-out; then
// a server polling every PollInterval takes over again. Idle consumers cost
// Redis what PollInterval says; a busy one whose queue is dry asks up to
// 1/BusyPollInterval times a second. Changing pace starts a new asynq.Server
// and retires the old one (it takes no more jobs and shuts down once the jobs
// it holds are settled); see consumer.pace for why it waits until the
// consumer holds no job.
//
// # Leases and crash recovery
//
// ConsumerOptions.Lease is enforced by the bridge: a delivery that is neither
// settled nor extended within Lease is taken back from the worker and retried
// at once (archived if it was the last allowed delivery), like an expired
// JetStream AckWait; Extend restarts that timer. Asynq's own lease is a
// separate, process-level one: while the handler blocks, the asynq.Server
// renews it every 5s, whatever the worker does.
//
// If the whole worker process dies, nothing renews Asynq's lease. Asynq v0.26
// hard-codes that lease at 30s (rdb.LeaseDuration), and its recoverer, which
// runs in every live asynq.Server once a minute, retries only tasks whose
// lease expired more than 30s ago. A crashed worker's job therefore comes back
// 60 to 120 seconds after the last renewal (plus PollInterval), provided some
// consumer of the queue is running. None of these three numbers is
// configurable in v0.26. (TestCrashRecovery, run with MCPQ_SLOW_TESTS=1,
// kills a worker process holding a job and measures this.)
//
// ConsumerOptions.MaxDeliveries is enforced by the bridge too: a delivery
// past it is archived instead of handed out, and a Retry or lease expiry of
// the last allowed delivery archives the job. Asynq's own per-task MaxRetry is
// fixed at enqueue, before any consumer exists, so Enqueue sets it from
// Config.MaxDeliveries as a ceiling; the effective bound is the smaller one.
//
// # Shutdown
//
// When a Consumer's ctx ends (or the Queue is closed), jobs still waiting in
// a handler for a Next are given back at once (as a retry due now that does
// not count as a delivery), its servers stop dequeuing, and deliveries the
// worker still holds get Config.ShutdownTimeout to be settled; whatever is
// left is then taken back from the worker and given back the same way.
package asynqbroker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"
	"github.com/rs/zerolog"

	"github.com/mcpqueue/mcpqueue/broker"
)

// Config names the queue and tunes the bridge. A nil Config is valid; zero
// fields take the documented defaults.
type Config struct {
	// Queue is the Asynq queue jobs are enqueued to. Default "mcpqueue".
	Queue string
	// ToolQueues sends a tool's jobs to a queue of its own (tool → queue);
	// tools not listed go to Queue. Give slow or bulky tools their own
	// queue so they cannot starve the rest.
	ToolQueues map[string]string
	// Queues are the queues consumers take jobs from, with Asynq
	// priorities (a queue of priority 6 is served six times as often as
	// one of priority 1). Default: Queue and every ToolQueues queue, 1 each.
	Queues map[string]int
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
	// above). Default 2ms; a value not below PollInterval turns busy
	// polling off. While busy and dry, a consumer asks Redis up to
	// 1/BusyPollInterval times a second (500 at 2ms).
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
	// BusPrefix starts the bus's channel names. Default "mcpq:bus".
	BusPrefix string
	// Logger receives Asynq's log lines. The zero Logger discards them.
	Logger zerolog.Logger
}

func (c *Config) withDefaults() Config {
	var out Config
	if c != nil {
		out = *c
	}
	if out.Queue == "" {
		out.Queue = "mcpqueue"
	}
	if len(out.Queues) == 0 {
		out.Queues = map[string]int{out.Queue: 1}
		for _, q := range out.ToolQueues {
			out.Queues[q] = 1
		}
	}
	if out.Concurrency <= 0 {
		out.Concurrency = 4
	}
	if out.PollInterval <= 0 {
		out.PollInterval = 100 * time.Millisecond
	}
	if out.BusyPollInterval <= 0 {
		out.BusyPollInterval = 2 * time.Millisecond
	}
	if out.BusyFor <= 0 {
		out.BusyFor = time.Second
	}
	if out.Dedupe <= 0 {
		out.Dedupe = 10 * time.Minute
	}
	if out.Timeout <= 0 {
		out.Timeout = 24 * time.Hour
	}
	if out.MaxDeliveries <= 0 {
		out.MaxDeliveries = 100
	}
	if out.ShutdownTimeout <= 0 {
		out.ShutdownTimeout = 30 * time.Second
	}
	if out.BusPrefix == "" {
		out.BusPrefix = "mcpq:bus"
	}
	return out
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

// Enqueue adds the job, or does nothing if a job with its TaskID is there.
func (q *Queue) Enqueue(ctx context.Context, job *broker.Job) error {
	if job.TaskID == "" || job.Tool == "" {
		return fmt.Errorf("asynqbroker: enqueue: job needs a task id and a tool")
	}
	b, err := json.Marshal(job)
	if err != nil {
		return fmt.Errorf("asynqbroker: enqueue: %w", err)
	}
	_, err = q.client.EnqueueContext(ctx, asynq.NewTask(job.Tool, b),
		asynq.TaskID(job.DedupeKey()),
		asynq.Queue(q.queueFor(job.Tool)),
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
	info, err := q.inspector.GetTaskInfo(q.queueFor(tool), dedupe)
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

// queueFor is the queue a tool's jobs go to.
func (q *Queue) queueFor(tool string) string {
	if name, ok := q.cfg.ToolQueues[tool]; ok {
		return name
	}
	return q.cfg.Queue
}

// Consumer starts an asynq.Server that feeds Next. It runs until ctx ends or
// the Queue is closed.
func (q *Queue) Consumer(ctx context.Context, opts broker.ConsumerOptions) (broker.Consumer, error) {
	c := &consumer{
		cfg:      q.cfg,
		rdb:      q.rdb,
		lease:    opts.Lease,
		max:      opts.MaxDeliveries,
		slots:    opts.Slots,
		handoff:  make(chan *delivery),
		wake:     make(chan struct{}, 1),
		stopping: make(chan struct{}),
		abort:    make(chan struct{}),
		done:     make(chan struct{}),
		retired:  map[*server]struct{}{},
	}
	if c.lease <= 0 {
		c.lease = 30 * time.Second
	}
	if c.max <= 0 {
		c.max = 5
	}
	if c.slots <= 0 {
		c.slots = q.cfg.Concurrency
	}
	first := c.newServer(false)
	if err := first.srv.Ping(); err != nil {
		return nil, fmt.Errorf("asynqbroker: consumer: %w", err)
	}
	q.mu.Lock()
	if q.closed {
		q.mu.Unlock()
		return nil, fmt.Errorf("asynqbroker: consumer: %w", broker.ErrClosed)
	}
	if err := c.start(first); err != nil {
		q.mu.Unlock()
		return nil, fmt.Errorf("asynqbroker: consumer: %w", err)
	}
	q.consumers[c] = struct{}{}
	q.mu.Unlock()

	if c.cfg.BusyPollInterval < c.cfg.PollInterval {
		go c.pace()
	}
	go func() {
		select {
		case <-ctx.Done():
			c.stop()
		case <-c.done:
		}
		q.mu.Lock()
		delete(q.consumers, c)
		q.mu.Unlock()
	}()
	return c, nil
}

var (
	// errGiveBack and errNoTaker return a job that no Next took, at
	// shutdown or within a lease, or one whose worker did not settle it
	// before the consumer's ShutdownTimeout. They are not failures, so the
	// job's delivery count stays as it was.
	errGiveBack = errors.New("asynqbroker: consumer stopped before the job was handed out or settled")
	errNoTaker  = errors.New("asynqbroker: no Next took the job within its lease")
	// errLeaseExpired takes a delivery back from a worker that neither
	// settled nor extended it within its lease.
	errLeaseExpired = errors.New("asynqbroker: lease expired")
	errSettled      = errors.New("asynqbroker: delivery already settled")
	// errStopped takes a delivery back from a worker that did not settle
	// it within ShutdownTimeout of the consumer stopping.
	errStopped = errors.New("asynqbroker: consumer stopped before the delivery was settled")
)

// retryError carries the delay a worker asked Retry for.
type retryError struct{ delay time.Duration }

func (e *retryError) Error() string {
	return fmt.Sprintf("asynqbroker: retry requested (delay %s)", e.delay)
}

// retryDelay is the asynq.RetryDelayFunc: the delay Retry asked for, rounded
// up to Asynq's one-second schedule so the job never comes back early;
// anything else (lease expiry, recovery after a crash, give-back) at once.
func retryDelay(_ int, err error, _ *asynq.Task) time.Duration {
	var r *retryError
	if errors.As(err, &r) && r.delay > 0 {
		return r.delay + time.Second
	}
	return 0
}

// isFailure is the asynq IsFailure predicate: handing a job back unseen is
// not a delivery.
func isFailure(err error) bool {
	return !errors.Is(err, errGiveBack) && !errors.Is(err, errNoTaker)
}

type consumer struct {
	cfg      Config
	rdb      redis.UniversalClient
	lease    time.Duration
	max      int
	slots    int
	handoff  chan *delivery // unbuffered: a job is in exactly one place
	lastOut  atomic.Int64   // unix ns of the last hand-out
	wake     chan struct{}  // cap 1: pace has something to look at
	stopping chan struct{}  // closed when shutdown starts
	abort    chan struct{}  // closed ShutdownTimeout after stopping
	done     chan struct{}  // closed when shutdown is over
	once     sync.Once

	mu      sync.Mutex
	cur     *server              // the server taking jobs from Asynq
	retired map[*server]struct{} // stopped, shutting down once their handlers return
	retire  sync.WaitGroup       // one per retired server until it is shut down
}

// server is one asynq.Server of a consumer: an idle one polls every
// PollInterval, a busy one every BusyPollInterval.
type server struct {
	srv  *asynq.Server
	busy bool
	held atomic.Int64 // jobs inside its handlers
}

func (c *consumer) newServer(busy bool) *server {
	poll := c.cfg.PollInterval
	if busy {
		poll = c.cfg.BusyPollInterval
	}
	return &server{busy: busy, srv: asynq.NewServerFromRedisClient(c.rdb, asynq.Config{
		Concurrency:              c.slots,
		Queues:                   c.cfg.Queues,
		TaskCheckInterval:        poll,
		DelayedTaskCheckInterval: c.cfg.PollInterval,
		RetryDelayFunc:           retryDelay,
		IsFailure:                isFailure,
		// Shutdown waits for the handlers however long they take: the
		// consumer takes unsettled deliveries back itself ShutdownTimeout
		// after it stops (see stop), and a server retired by pace must
		// not cut the jobs it runs short.
		ShutdownTimeout: c.cfg.Timeout + time.Minute,
		Logger:          logger{c.cfg.Logger},
		LogLevel:        asynq.InfoLevel,
	})}
}

// start makes s the server taking jobs.
func (c *consumer) start(s *server) error {
	err := s.srv.Start(asynq.HandlerFunc(func(ctx context.Context, t *asynq.Task) error {
		s.held.Add(1)
		defer func() {
			s.held.Add(-1)
			c.poke()
		}()
		return c.process(ctx, t)
	}))
	if err == nil {
		c.cur = s
	}
	return err
}

func (c *consumer) poke() {
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

// pace keeps the consumer's server in step with its load. Busy means a job
// was handed out within BusyFor; the server taking jobs then polls every
// BusyPollInterval, else every PollInterval. Switching starts a new server
// and retires the old one: it stops taking jobs at once and shuts down when
// the jobs in its handlers are settled. Until then those jobs hold slots the
// new server does not know about, so it could take more jobs than the
// consumer has slots — jobs that would wait in a handler for a Next instead
// of going to another worker. So pace switches only while the consumer holds
// no job (the old server may still finish a dequeue it began before it was
// retired: one job, at that instant). Under a load of short jobs that comes within a job's time (the
// idle server takes what is queued, runs it, and sleeps); a consumer that
// always holds a job keeps its pace: idle, its jobs wait for the idle poll
// as before pacing; busy, its server polls every BusyPollInterval while it
// has free slots and the queues are empty (a full server does not poll).
func (c *consumer) pace() {
	timer := time.NewTimer(c.cfg.BusyFor)
	defer timer.Stop()
	for {
		select {
		case <-c.stopping:
			return
		case <-c.wake:
		case <-timer.C:
		}
		since := time.Since(time.Unix(0, c.lastOut.Load()))
		busy := since < c.cfg.BusyFor
		c.mu.Lock()
		if c.cur.busy != busy && c.heldLocked() == 0 {
			c.switchLocked(busy)
		}
		c.mu.Unlock()
		if busy {
			timer.Reset(c.cfg.BusyFor - since)
		}
	}
}

// heldLocked is how many jobs the consumer's servers hold. c.mu is held.
func (c *consumer) heldLocked() int {
	n := c.cur.held.Load()
	for s := range c.retired {
		n += s.held.Load()
	}
	return int(n)
}

// switchLocked replaces the current server with a new one. c.mu is held.
func (c *consumer) switchLocked(busy bool) {
	select {
	case <-c.stopping:
		return // stop shuts down what is there
	default:
	}
	old, s := c.cur, c.newServer(busy)
	if err := c.start(s); err != nil {
		c.cfg.Logger.Warn().Err(err).Msg("asynqbroker: starting a server to change pace")
		return
	}
	c.retired[old] = struct{}{}
	c.retire.Add(1)
	go func() {
		defer c.retire.Done()
		old.srv.Stop()
		old.srv.Shutdown()
		c.mu.Lock()
		delete(c.retired, old)
		c.mu.Unlock()
	}()
}

// stop shuts the consumer down and returns when it is done. Safe to call
// more than once and concurrently.
func (c *consumer) stop() {
	c.once.Do(func() {
		close(c.stopping)
		t := time.AfterFunc(c.cfg.ShutdownTimeout, func() { close(c.abort) })
		defer t.Stop()
		c.mu.Lock()
		cur := c.cur
		c.mu.Unlock()
		cur.srv.Shutdown()
		c.retire.Wait()
		close(c.done)
	})
	<-c.done
}

func (c *consumer) Next(ctx context.Context) (broker.Delivery, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	select {
	case d := <-c.handoff:
		return d, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-c.stopping:
		return nil, broker.ErrClosed
	}
}

// process is the asynq handler: it hands the task to a Next caller and
// returns the worker's verdict.
func (c *consumer) process(ctx context.Context, t *asynq.Task) error {
	retried, _ := asynq.GetRetryCount(ctx)
	attempt := retried + 1
	if attempt > c.max {
		// Redelivered by Asynq's recoverer after the last allowed delivery.
		return fmt.Errorf("asynqbroker: delivery %d exceeds MaxDeliveries %d: %w", attempt, c.max, asynq.SkipRetry)
	}
	d := &delivery{
		attempt: attempt,
		last:    attempt >= c.max,
		outcome: make(chan error, 1),
		extend:  make(chan struct{}, 1),
	}
	if err := json.Unmarshal(t.Payload(), &d.job); err != nil {
		return fmt.Errorf("asynqbroker: undecodable job: %v: %w", err, asynq.SkipRetry)
	}
	// Asynq dequeues whenever the server has a free handler, wanted or
	// not; a job that no Next claims within a lease goes back to the queue
	// for another consumer, as a delivery nobody settles would.
	lease := time.NewTimer(c.lease)
	defer lease.Stop()
	select {
	case c.handoff <- d:
		c.lastOut.Store(time.Now().UnixNano())
		c.poke()
	case <-lease.C:
		return errNoTaker
	case <-c.stopping:
		return errGiveBack
	case <-ctx.Done():
		return ctx.Err()
	}

	lease.Reset(c.lease)
	for {
		select {
		case err := <-d.outcome:
			return err
		case <-d.extend:
			lease.Reset(c.lease)
		case <-lease.C:
			if !d.lose(errLeaseExpired) {
				return <-d.outcome // settled just now
			}
			if d.last {
				return fmt.Errorf("%w on the last of %d deliveries: %w", errLeaseExpired, c.max, asynq.SkipRetry)
			}
			return errLeaseExpired
		case <-c.abort:
			if !d.lose(errStopped) {
				return <-d.outcome
			}
			return errGiveBack
		case <-ctx.Done():
			// Asynq ended the delivery itself (its timeout, a cancel
			// from the inspector) and already acted on it.
			if !d.lose(fmt.Errorf("asynqbroker: delivery ended by asynq: %w", ctx.Err())) {
				return <-d.outcome
			}
			return ctx.Err()
		}
	}
}

type delivery struct {
	job     broker.Job
	attempt int
	last    bool // no delivery may follow this one

	mu      sync.Mutex
	settled bool
	lost    error         // why the delivery was taken back, if it was
	outcome chan error    // the handler's return value; cap 1
	extend  chan struct{} // cap 1
}

func (d *delivery) Job() *broker.Job { return &d.job }
func (d *delivery) Attempt() int     { return d.attempt }

// settle hands the handler its return value, once.
func (d *delivery) settle(err error) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	switch {
	case d.lost != nil:
		return d.lost
	case d.settled:
		return errSettled
	}
	d.settled = true
	d.outcome <- err
	return nil
}

// lose takes the delivery back from the worker; false if it was settled.
func (d *delivery) lose(why error) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.settled {
		return false
	}
	if d.lost == nil {
		d.lost = why
	}
	return true
}

func (d *delivery) Ack(context.Context) error { return d.settle(nil) }

func (d *delivery) Retry(_ context.Context, delay time.Duration) error {
	if d.last {
		// Like JetStream past MaxDeliver: the job is not handed out again.
		return d.settle(fmt.Errorf("asynqbroker: retry of the last allowed delivery: %w", asynq.SkipRetry))
	}
	return d.settle(&retryError{delay: delay})
}

func (d *delivery) Term(_ context.Context, reason string) error {
	if reason == "" {
		reason = "terminated"
	}
	return d.settle(fmt.Errorf("asynqbroker: %s: %w", reason, asynq.SkipRetry))
}

func (d *delivery) Extend(context.Context) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	switch {
	case d.lost != nil:
		return d.lost
	case d.settled:
		return errSettled
	}
	select {
	case d.extend <- struct{}{}:
	default: // an extension is already pending
	}
	return nil
}

// logger adapts zerolog to asynq.Logger. Asynq's info lines (server start and
// stop) go out at debug level; Fatal is logged, never exits.
type logger struct{ l zerolog.Logger }

func (a logger) Debug(args ...any) { a.l.Debug().Msg(fmt.Sprint(args...)) }
func (a logger) Info(args ...any)  { a.l.Debug().Msg(fmt.Sprint(args...)) }
func (a logger) Warn(args ...any)  { a.l.Warn().Msg(fmt.Sprint(args...)) }
func (a logger) Error(args ...any) { a.l.Error().Msg(fmt.Sprint(args...)) }
func (a logger) Fatal(args ...any) { a.l.Error().Msg(fmt.Sprint(args...)) }
