package asynqbroker

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hibiken/asynq"

	"github.com/mcpqueue/mcpqueue/broker"
)

// Consumer starts the Asynq servers that feed Next from the queue of
// opts.Pool and the own queues of opts.Tools. It runs until ctx ends or the
// Queue is closed.
func (q *Queue) Consumer(ctx context.Context, opts broker.ConsumerOptions) (broker.Consumer, error) {
	if err := broker.CheckRoutes(opts); err != nil {
		return nil, fmt.Errorf("asynqbroker: %w", err)
	}
	c := newConsumer(q, opts)
	for _, l := range c.lanes {
		l.wake, l.retired = make(chan struct{}, 1), map[*server]struct{}{}
		l.cur = l.newServer(false)
	}
	if err := c.lanes[0].cur.srv.Ping(); err != nil {
		return nil, fmt.Errorf("asynqbroker: consumer: %w", err)
	}
	q.mu.Lock()
	if q.closed {
		q.mu.Unlock()
		return nil, fmt.Errorf("asynqbroker: consumer: %w", broker.ErrClosed)
	}
	for i, l := range c.lanes {
		if err := l.start(l.cur); err != nil {
			for _, started := range c.lanes[:i] {
				started.cur.srv.Shutdown()
			}
			q.mu.Unlock()
			return nil, fmt.Errorf("asynqbroker: consumer: %w", err)
		}
	}
	q.consumers[c] = struct{}{}
	q.mu.Unlock()

	if c.cfg.BusyPollInterval < c.cfg.PollInterval {
		for _, l := range c.lanes {
			go l.pace()
		}
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

// deferError carries the delay a worker asked Defer for: a retry that is
// not a failure, so Asynq does not count it.
type deferError struct{ delay time.Duration }

func (e *deferError) Error() string {
	return fmt.Sprintf("asynqbroker: deferred by the worker (delay %s)", e.delay)
}

// retryDelay is the asynq.RetryDelayFunc: the delay Retry or Defer asked
// for, rounded up to Asynq's one-second schedule so the job never comes back
// early; anything else (lease expiry, recovery after a crash, give-back) at
// once.
func retryDelay(_ int, err error, _ *asynq.Task) time.Duration {
	var r *retryError
	if errors.As(err, &r) && r.delay > 0 {
		return r.delay + time.Second
	}
	var d *deferError
	if errors.As(err, &d) && d.delay > 0 {
		return d.delay + time.Second
	}
	return 0
}

// isFailure is the asynq IsFailure predicate: handing a job back unseen, or
// a worker deferring it, is not a delivery.
func isFailure(err error) bool {
	var d *deferError
	return !errors.Is(err, errGiveBack) && !errors.Is(err, errNoTaker) && !errors.Is(err, errMoveFailed) && !errors.As(err, &d)
}

// newConsumer lays out the consumer of opts: its lanes, its sieve and its
// routes' caps. The lanes' servers are not made yet.
func newConsumer(q *Queue, opts broker.ConsumerOptions) *consumer {
	c := &consumer{
		q:        q,
		cfg:      q.cfg,
		lease:    cmp.Or(max(opts.Lease, 0), 30*time.Second),
		max:      opts.MaxDeliveries,
		routes:   map[string]broker.ToolRoute{},
		caps:     map[string]chan struct{}{},
		handoff:  make(chan *delivery),
		stopping: make(chan struct{}),
		abort:    make(chan struct{}),
		done:     make(chan struct{}),
	}
	switch {
	case c.max == 0:
		c.max = 5
	case c.max < 0:
		c.max = math.MaxInt
	}
	slots := cmp.Or(max(opts.Slots, 0), q.cfg.Concurrency)
	// The shared lane, of all the slots, takes from the pool's queue (every
	// route's jobs, the capped ones' while they have room) and from the own
	// queues of the routes without a MaxConcurrency; each capped route has
	// a lane of its bound on its own queue.
	pool := q.PoolQueueName(opts.PoolOf())
	c.lanes = []*lane{{c: c, queues: map[string]int{pool: 1}, conc: slots}}
	own := make([]string, 0, len(opts.Tools))
	for _, r := range opts.Tools {
		c.routes[r.Tool] = r
		name, prio := q.QueueName(r.Tool), q.cfg.priority(r.Tool)
		own = append(own, name)
		if r.MaxConcurrency > 0 {
			bound := min(r.MaxConcurrency, slots)
			c.caps[r.Tool] = make(chan struct{}, bound)
			c.lanes = append(c.lanes, &lane{c: c, queues: map[string]int{name: prio}, conc: bound, route: r.Tool})
			continue
		}
		c.lanes[0].queues[name] = prio
	}
	poll := c.cfg.PollInterval
	c.rdb = newSieve(q.rdb, own, []string{pool}, poll/2)
	return c
}

type consumer struct {
	q        *Queue
	cfg      Config
	rdb      *sieve        // what its Asynq servers talk to Redis through
	lease    time.Duration // for tools that set none
	max      int           // for tools that set none
	routes   map[string]broker.ToolRoute
	caps     map[string]chan struct{} // capped route → a token per delivery out
	lanes    []*lane
	handoff  chan *delivery // unbuffered: a job is in exactly one place
	stopping chan struct{}  // closed when shutdown starts
	abort    chan struct{}  // closed ShutdownTimeout after stopping
	done     chan struct{}  // closed when shutdown is over
	once     sync.Once
}

// settings are the lease and delivery bound of a tool's jobs.
// max is math.MaxInt when unbounded.
func (c *consumer) settings(tool string) (lease time.Duration, max int) {
	lease, max = c.lease, c.max
	if r, ok := c.routes[tool]; ok {
		if r.Lease > 0 {
			lease = r.Lease
		}
		switch {
		case r.MaxDeliveries > 0:
			max = r.MaxDeliveries
		case r.MaxDeliveries < 0:
			max = math.MaxInt
		}
	}
	return lease, max
}

// lane is the queues one Asynq server at a time takes jobs from, at most
// conc at once.
type lane struct {
	c       *consumer
	queues  map[string]int // queue → priority
	conc    int
	route   string        // the capped route whose own queue this is; "": the shared lane
	lastOut atomic.Int64  // unix ns of the last hand-out
	wake    chan struct{} // cap 1: pace has something to look at

	mu      sync.Mutex
	cur     *server              // the server taking jobs from Asynq
	retired map[*server]struct{} // stopped, shutting down once their handlers return
	retire  sync.WaitGroup       // one per retired server until it is shut down
}

// server is one asynq.Server of a lane: an idle one polls every
// PollInterval, a busy one every BusyPollInterval.
type server struct {
	srv  *asynq.Server
	busy bool
	held atomic.Int64 // jobs inside its handlers
}

func (l *lane) newServer(busy bool) *server {
	cfg := l.c.cfg
	poll := cfg.PollInterval
	if busy {
		poll = cfg.BusyPollInterval
	}
	return &server{busy: busy, srv: asynq.NewServerFromRedisClient(l.c.rdb, asynq.Config{
		Concurrency:              l.conc,
		Queues:                   l.queues,
		TaskCheckInterval:        poll,
		DelayedTaskCheckInterval: cfg.PollInterval,
		RetryDelayFunc:           retryDelay,
		IsFailure:                isFailure,
		// Shutdown waits for the handlers however long they take: the
		// consumer takes unsettled deliveries back itself ShutdownTimeout
		// after it stops (see stop), and a server retired by pace must
		// not cut the jobs it runs short.
		ShutdownTimeout: cfg.Timeout + time.Minute,
		Logger:          logger{cfg.Logger},
		LogLevel:        asynq.InfoLevel,
	})}
}

// start makes s the server taking jobs.
func (l *lane) start(s *server) error {
	err := s.srv.Start(asynq.HandlerFunc(func(ctx context.Context, t *asynq.Task) error {
		s.held.Add(1)
		defer func() {
			s.held.Add(-1)
			l.poke()
		}()
		return l.c.process(ctx, l, t)
	}))
	if err == nil {
		l.cur = s
	}
	return err
}

func (l *lane) poke() {
	select {
	case l.wake <- struct{}{}:
	default:
	}
}

// pace keeps the lane's server in step with its load. Busy means a job was
// handed out within BusyFor; the server taking jobs then polls every
// BusyPollInterval, else every PollInterval. Switching starts a new server
// and retires the old one: it stops taking jobs at once and shuts down when
// the jobs in its handlers are settled. Until then those jobs hold slots the
// new server does not know about, so it could take more jobs than the lane
// has slots — jobs that would wait in a handler for a Next instead of going
// to another worker. So pace switches only while the lane holds no job (the
// old server may still finish a dequeue it began before it was retired: one
// job, at that instant). Under a load of short jobs that comes within a
// job's time (the idle server takes what is queued, runs it, and sleeps); a
// lane that always holds a job keeps its pace: idle, its jobs wait for the
// idle poll as before pacing; busy, its server polls every BusyPollInterval
// while it has free slots and the queues are empty (a full server does not
// poll).
func (l *lane) pace() {
	cfg := l.c.cfg
	timer := time.NewTimer(cfg.BusyFor)
	defer timer.Stop()
	for {
		select {
		case <-l.c.stopping:
			return
		case <-l.wake:
		case <-timer.C:
		}
		since := time.Since(time.Unix(0, l.lastOut.Load()))
		busy := since < cfg.BusyFor
		l.mu.Lock()
		if l.cur.busy != busy && l.heldLocked() == 0 {
			l.switchLocked(busy)
		}
		l.mu.Unlock()
		if busy {
			timer.Reset(cfg.BusyFor - since)
		}
	}
}

// heldLocked is how many jobs the lane's servers hold. l.mu is held.
func (l *lane) heldLocked() int {
	n := l.cur.held.Load()
	for s := range l.retired {
		n += s.held.Load()
	}
	return int(n)
}

// switchLocked replaces the current server with a new one. l.mu is held.
func (l *lane) switchLocked(busy bool) {
	select {
	case <-l.c.stopping:
		return // stop shuts down what is there
	default:
	}
	old, s := l.cur, l.newServer(busy)
	if err := l.start(s); err != nil {
		l.c.cfg.Logger.Warn().Err(err).Msg("asynqbroker: starting a server to change pace")
		return
	}
	l.retired[old] = struct{}{}
	l.retire.Add(1)
	go func() {
		defer l.retire.Done()
		old.srv.Stop()
		old.srv.Shutdown()
		l.mu.Lock()
		delete(l.retired, old)
		l.mu.Unlock()
	}()
}

// stop shuts the consumer down and returns when it is done. Safe to call
// more than once and concurrently.
func (c *consumer) stop() {
	c.once.Do(func() {
		close(c.stopping)
		t := time.AfterFunc(c.cfg.ShutdownTimeout, func() { close(c.abort) })
		defer t.Stop()
		var wg sync.WaitGroup
		for _, l := range c.lanes {
			wg.Go(func() {
				l.mu.Lock()
				cur := l.cur
				l.mu.Unlock()
				cur.srv.Shutdown()
				l.retire.Wait()
			})
		}
		wg.Wait()
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

// process is the asynq handler of lane l: it hands the task to a Next
// caller and returns the worker's verdict. A job of a route the consumer
// does not serve, or of a capped route with no room left, moves to the
// route's own queue instead (see "Pools" in the package documentation).
func (c *consumer) process(ctx context.Context, l *lane, t *asynq.Task) error {
	route := t.Type()
	if _, ok := c.routes[route]; !ok {
		return c.move(ctx, t, "not served by this consumer")
	}
	if slot, capped := c.caps[route]; capped {
		if l.route == "" {
			select {
			case slot <- struct{}{}: // room: the shared lane hands it out
			default:
				return c.move(ctx, t, "its MaxConcurrency is reached here")
			}
		} else {
			// The route's own lane holds at most its bound of jobs, but
			// the shared lane may hold tokens: wait for one.
			select {
			case slot <- struct{}{}:
			case <-c.stopping:
				return errGiveBack
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		defer func() { <-slot }()
	}
	return c.handOut(ctx, l, t)
}

// errMoveFailed returns a job that could not be moved to its route's own
// queue; like a give-back it is no delivery.
var errMoveFailed = errors.New("asynqbroker: moving the job to its route's own queue failed")

// move puts t on its route's own queue, under the same id, and lets it go
// from the queue it came from: the handler returns nil (Asynq keeps it
// there as completed, its result saying where it went). No delivery is
// counted: the copy starts afresh.
func (c *consumer) move(ctx context.Context, t *asynq.Task, why string) error {
	queue := c.q.QueueName(t.Type())
	id, _ := asynq.GetTaskID(ctx)
	if err := c.q.put(ctx, queue, t.Type(), id, t.Payload()); err != nil {
		return fmt.Errorf("%w: %w", errMoveFailed, err)
	}
	c.rdb.added(queue)
	if w := t.ResultWriter(); w != nil {
		_, _ = w.Write([]byte("moved to " + queue + ": " + why))
	}
	return nil
}

// handOut passes t to a Next caller and waits for its verdict.
func (c *consumer) handOut(ctx context.Context, l *lane, t *asynq.Task) error {
	lease, max := c.settings(t.Type())
	retried, _ := asynq.GetRetryCount(ctx)
	attempt := retried + 1
	if attempt > max {
		// Redelivered by Asynq's recoverer after the last allowed delivery.
		return fmt.Errorf("asynqbroker: delivery %d exceeds MaxDeliveries %d: %w", attempt, max, asynq.SkipRetry)
	}
	d := &delivery{
		attempt: attempt,
		last:    attempt >= max,
		outcome: make(chan error, 1),
		extend:  make(chan struct{}, 1),
	}
	if err := json.Unmarshal(t.Payload(), &d.job); err != nil {
		return fmt.Errorf("asynqbroker: undecodable job: %w: %w", err, asynq.SkipRetry)
	}
	// Asynq dequeues whenever the server has a free handler, wanted or
	// not; a job that no Next claims within a lease goes back to the queue
	// for another consumer, as a delivery nobody settles would.
	timer := time.NewTimer(lease)
	defer timer.Stop()
	select {
	case c.handoff <- d:
		l.lastOut.Store(time.Now().UnixNano())
		l.poke()
	case <-timer.C:
		return errNoTaker
	case <-c.stopping:
		return errGiveBack
	case <-ctx.Done():
		return ctx.Err()
	}

	timer.Reset(lease)
	for {
		select {
		case err := <-d.outcome:
			return err
		case <-d.extend:
			timer.Reset(lease)
		case <-timer.C:
			if !d.lose(errLeaseExpired) {
				return <-d.outcome // settled just now
			}
			if d.last {
				return fmt.Errorf("%w on the last of %d deliveries: %w", errLeaseExpired, max, asynq.SkipRetry)
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
