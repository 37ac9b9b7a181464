package membroker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/mcpqueue/mcpqueue/broker"
)

// Config tunes a Queue. A nil Config is valid; zero fields take defaults.
type Config struct {
	// DedupeWindow is how long a dedupe key is remembered after its job
	// was enqueued (JetStream's duplicate window). Default 2m.
	DedupeWindow time.Duration
}

// Queue is an in-memory broker.Queue. Its zero value is not usable; call
// NewQueue.
type Queue struct {
	cfg Config

	mu      sync.Mutex
	seq     uint64            // enqueue order
	jobs    map[string]*entry // by dedupe key: the jobs the queue holds
	seen    map[string]time.Time
	changed chan struct{} // closed (and replaced) on every change
}

var (
	_ broker.Queue  = (*Queue)(nil)
	_ broker.Holder = (*Queue)(nil)
	_ broker.Depth  = (*Queue)(nil)
)

// entry is one held job.
type entry struct {
	job        *broker.Job // decoded from raw, for routing; never handed out
	raw        []byte      // the job as broker.EncodeJob encoded it
	key        string
	seq        uint64
	due        time.Time // when it may be handed out (retry delay)
	deliveries int       // hand-outs so far (Delivery.Delivered)
	charged    int       // hand-outs that count against MaxDeliveries
	// The current hand-out, while one holds the job.
	holder *delivery
}

// NewQueue returns an empty queue.
func NewQueue(cfg *Config) *Queue {
	var c Config
	if cfg != nil {
		c = *cfg
	}
	if c.DedupeWindow <= 0 {
		c.DedupeWindow = 2 * time.Minute
	}
	return &Queue{cfg: c, jobs: map[string]*entry{}, seen: map[string]time.Time{}, changed: make(chan struct{})}
}

// changedLocked wakes every waiting Next.
func (q *Queue) changedLocked() {
	close(q.changed)
	q.changed = make(chan struct{})
}

// Enqueue implements broker.Queue. The job is kept encoded, as a broker
// keeps it, so the caller may reuse it and each delivery decodes its own
// copy; what a broker would refuse (no task id or tool, arguments that are
// not JSON) is refused here too.
func (q *Queue) Enqueue(ctx context.Context, job *broker.Job) error {
	raw, err := broker.EncodeJob(job)
	if err != nil {
		return fmt.Errorf("membroker: %w", err)
	}
	stored, err := decodeJob(raw)
	if err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	now := time.Now()
	key := job.DedupeKey()
	q.mu.Lock()
	defer q.mu.Unlock()
	for k, at := range q.seen {
		if now.Sub(at) > q.cfg.DedupeWindow {
			delete(q.seen, k)
		}
	}
	if _, dup := q.seen[key]; dup {
		return nil
	}
	if _, held := q.jobs[key]; held {
		return nil // still held past the window: stored once all the same
	}
	q.seen[key] = now
	q.seq++
	q.jobs[key] = &entry{job: stored, raw: raw, key: key, seq: q.seq, due: now}
	q.changedLocked()
	return nil
}

// decodeJob decodes a job broker.EncodeJob encoded.
func decodeJob(raw []byte) (*broker.Job, error) {
	j := new(broker.Job)
	if err := json.Unmarshal(raw, j); err != nil {
		return nil, fmt.Errorf("membroker: decode job: %w", err)
	}
	return j, nil
}

// Holds implements broker.Holder: a job is held from Enqueue until it is
// acked, terminated, or its deliveries are used up.
func (q *Queue) Holds(ctx context.Context, route, taskID, dedupe string) (bool, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.expireLocked(time.Now())
	_, ok := q.jobs[dedupe]
	return ok, nil
}

// Settled waits until the queue holds no job under the dedupe key (see
// broker.Job.DedupeKey): it was acked or terminated, or used up its
// deliveries. A test calls it to know a worker is done with a job. It
// returns ctx's error if ctx ends first.
func (q *Queue) Settled(ctx context.Context, dedupe string) error {
	for {
		now := time.Now()
		q.mu.Lock()
		q.expireLocked(now)
		e, held := q.jobs[dedupe]
		var wake time.Time
		if held && e.holder != nil {
			wake = e.holder.expires
		}
		changed := q.changed
		q.mu.Unlock()
		if !held {
			return nil
		}
		if err := wait(ctx, changed, wake, now); err != nil {
			return err
		}
	}
}

// Depth implements broker.Depth.
func (q *Queue) Depth(ctx context.Context, tools []string) (map[string]broker.ToolDepth, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.expireLocked(time.Now())
	out := make(map[string]broker.ToolDepth, len(tools))
	for _, tool := range tools {
		out[tool] = broker.ToolDepth{}
	}
	for _, e := range q.jobs {
		d, ok := out[e.job.Route()]
		if !ok {
			continue
		}
		if e.holder != nil {
			d.InFlight++
		} else {
			d.Pending++
		}
		out[e.job.Route()] = d
	}
	return out, nil
}

// expireLocked ends the hand-outs whose lease lapsed.
func (q *Queue) expireLocked(now time.Time) {
	for _, e := range q.jobs {
		if d := e.holder; d != nil && !now.Before(d.expires) {
			q.releaseLocked(e, now, true)
		}
	}
}

// releaseLocked ends e's current hand-out: the job is due again at due,
// or dropped when the hand-out was charged and used up the route's
// deliveries.
func (q *Queue) releaseLocked(e *entry, due time.Time, charged bool) {
	d := e.holder
	e.holder = nil
	d.c.inFlight[d.route]--
	d.c.total--
	if !charged {
		e.charged--
	}
	if d.max > 0 && e.charged >= d.max {
		delete(q.jobs, e.key)
	} else {
		e.due = due
	}
	q.changedLocked()
}

// Consumer implements broker.Queue.
func (q *Queue) Consumer(ctx context.Context, opts broker.ConsumerOptions) (broker.Consumer, error) {
	if err := broker.CheckRoutes(opts); err != nil {
		return nil, fmt.Errorf("membroker: %w", err)
	}
	c := &consumer{q: q, slots: opts.Slots, routes: map[string]route{}, inFlight: map[string]int{}}
	for _, r := range opts.Tools {
		lease, max := opts.Settings(r)
		c.routes[r.Tool] = route{lease: lease, max: max, concurrency: r.MaxConcurrency}
	}
	return c, nil
}

type route struct {
	lease       time.Duration
	max         int // < 0: no bound
	concurrency int // 0: no bound
}

// consumer is one worker's handle; its counters are guarded by q.mu.
type consumer struct {
	q        *Queue
	slots    int
	routes   map[string]route
	inFlight map[string]int // per route: handed out, not settled
	total    int
}

// Next implements broker.Consumer.
func (c *consumer) Next(ctx context.Context) (broker.Delivery, error) {
	q := c.q
	for {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		now := time.Now()
		q.mu.Lock()
		q.expireLocked(now)
		d, wake := c.takeLocked(now)
		changed := q.changed
		q.mu.Unlock()
		if d != nil {
			return d, nil
		}
		if err := wait(ctx, changed, wake, now); err != nil {
			return nil, err
		}
	}
}

// wait returns when changed is closed, wake comes (zero: never) or ctx
// ends (then with its error).
func wait(ctx context.Context, changed <-chan struct{}, wake, now time.Time) error {
	var timer <-chan time.Time
	if !wake.IsZero() {
		t := time.NewTimer(wake.Sub(now))
		defer t.Stop()
		timer = t.C
	}
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-changed:
	case <-timer:
	}
	return nil
}

// takeLocked hands out the oldest due job c may take, or returns when the
// next one falls due or a lease lapses (zero: nothing scheduled).
func (c *consumer) takeLocked(now time.Time) (*delivery, time.Time) {
	var (
		best *entry
		wake time.Time
	)
	soonest := func(t time.Time) {
		if wake.IsZero() || t.Before(wake) {
			wake = t
		}
	}
	for _, e := range c.q.jobs {
		if e.holder != nil {
			soonest(e.holder.expires)
			continue
		}
		r, ok := c.routes[e.job.Route()]
		if !ok || (r.concurrency > 0 && c.inFlight[e.job.Route()] >= r.concurrency) {
			continue
		}
		if e.due.After(now) {
			soonest(e.due)
			continue
		}
		if best == nil || e.seq < best.seq {
			best = e
		}
	}
	if best == nil || (c.slots > 0 && c.total >= c.slots) {
		return nil, wake
	}
	r := c.routes[best.job.Route()]
	best.deliveries++
	best.charged++
	job, _ := decodeJob(best.raw) // Enqueue decoded the same bytes: it cannot fail
	d := &delivery{job: job, q: c.q, c: c, e: best, route: best.job.Route(), attempt: best.deliveries,
		lease: r.lease, max: r.max, expires: now.Add(r.lease)}
	best.holder = d
	c.inFlight[d.route]++
	c.total++
	return d, time.Time{}
}

// delivery is one hand-out of a job.
type delivery struct {
	job     *broker.Job // this hand-out's own copy
	q       *Queue
	c       *consumer
	e       *entry
	route   string
	attempt int
	lease   time.Duration
	max     int
	expires time.Time // guarded by q.mu
}

var (
	_ broker.Deferrer    = (*delivery)(nil)
	_ broker.Redeliverer = (*delivery)(nil)
)

// ErrLeaseLost is returned by a delivery's methods once its lease lapsed
// or it was settled: the job is no longer this delivery's.
var ErrLeaseLost = errors.New("membroker: the delivery no longer holds its job (lease lapsed or settled)")

func (d *delivery) Job() *broker.Job { return d.job }
func (d *delivery) Delivered() int   { return d.attempt }

// RedeliversAfterLease implements broker.Redeliverer: a hand-out whose
// lease lapses without Ack or Extend is handed out again.
func (d *delivery) RedeliversAfterLease() {}

// settle runs fn on the delivery's entry while the delivery still holds it.
func (d *delivery) settle(fn func(now time.Time)) error {
	d.q.mu.Lock()
	defer d.q.mu.Unlock()
	now := time.Now()
	d.q.expireLocked(now)
	if d.e.holder != d {
		return ErrLeaseLost
	}
	fn(now)
	return nil
}

func (d *delivery) remove(time.Time) {
	d.q.releaseLocked(d.e, time.Time{}, true)
	delete(d.q.jobs, d.e.key)
}

func (d *delivery) Ack(ctx context.Context) error                 { return d.settle(d.remove) }
func (d *delivery) Term(ctx context.Context, reason string) error { return d.settle(d.remove) }

func (d *delivery) Retry(ctx context.Context, delay time.Duration) error {
	return d.settle(func(now time.Time) { d.q.releaseLocked(d.e, now.Add(delay), true) })
}

func (d *delivery) Defer(ctx context.Context, delay time.Duration) error {
	return d.settle(func(now time.Time) { d.q.releaseLocked(d.e, now.Add(delay), false) })
}

func (d *delivery) Extend(ctx context.Context) error {
	return d.settle(func(now time.Time) { d.expires = now.Add(d.lease) })
}
