package natsbroker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/mcpqueue/mcpqueue/broker"
	"github.com/mcpqueue/mcpqueue/internal/jsdurable"
)

// legacyDurable is the one consumer of every tool that versions before
// per-tool routing created. Its filter (<Subject>.>) overlaps every per-tool
// consumer, which a work-queue stream refuses, so the first per-tool consumer
// replaces it (see ensureConsumer).
const legacyDurable = "workers"

// Consumer creates (or updates) the durable consumer of each tool in
// opts.Tools and returns a consumer that pulls from those only.
func (q *Queue) Consumer(ctx context.Context, opts broker.ConsumerOptions) (broker.Consumer, error) {
	if err := broker.CheckRoutes(opts); err != nil {
		return nil, fmt.Errorf("natsbroker: %w", err)
	}
	lease := opts.Lease
	if lease <= 0 {
		lease = 30 * time.Second
	}
	maxDeliver := opts.MaxDeliveries
	switch {
	case maxDeliver == 0:
		maxDeliver = 5
	case maxDeliver < 0:
		maxDeliver = -1
	}
	c := &consumer{slots: opts.Slots, wake: make(chan struct{})}
	for _, r := range opts.Tools {
		rt := &route{tool: r.Tool, lease: lease, max: maxDeliver, limit: r.MaxConcurrency}
		if r.Lease > 0 {
			rt.lease = r.Lease
		}
		switch {
		case r.MaxDeliveries > 0:
			rt.max = r.MaxDeliveries
		case r.MaxDeliveries < 0:
			rt.max = -1 // JetStream: no bound
		}
		var cons jetstream.Consumer
		err := jsdurable.Retry(ctx, func(ctx context.Context) (err error) {
			cons, err = q.ensureConsumer(ctx, rt)
			return err
		})
		if err != nil {
			return nil, err
		}
		rt.c = cons
		c.routes = append(c.routes, rt)
	}
	return c, nil
}

func (q *Queue) ensureConsumer(ctx context.Context, rt *route) (jetstream.Consumer, error) {
	cfg := jetstream.ConsumerConfig{
		Durable:       ConsumerName(rt.tool),
		Description:   "mcpqueue jobs of tool " + rt.tool,
		AckPolicy:     jetstream.AckExplicitPolicy,
		AckWait:       rt.lease,
		MaxDeliver:    rt.max,
		FilterSubject: q.cfg.names().ToolSubjects(rt.tool),
		MaxAckPending: -1,
	}
	if cons, err := q.stream.Consumer(ctx, cfg.Durable); err == nil {
		if have := cons.CachedInfo().Config; have.AckWait == cfg.AckWait && have.MaxDeliver == cfg.MaxDeliver &&
			have.FilterSubject == cfg.FilterSubject && have.Description == cfg.Description {
			return cons, nil // as configured: no replicated update for every worker that starts
		}
	}
	cons, err := q.stream.CreateOrUpdateConsumer(ctx, cfg)
	if err != nil && overlaps(err) {
		// The consumer of every tool from before per-tool routing. Its
		// workers (an older version) lose it: from now on each tool has
		// its own.
		if derr := q.stream.DeleteConsumer(ctx, legacyDurable); derr == nil {
			cons, err = q.stream.CreateOrUpdateConsumer(ctx, cfg)
		}
	}
	if err != nil {
		return nil, fmt.Errorf("natsbroker: consumer %s of tool %q: %w", cfg.Durable, rt.tool, err)
	}
	return cons, nil
}

// overlaps reports a work-queue stream refusing a consumer whose filter
// overlaps another consumer's.
func overlaps(err error) bool {
	const notUnique = 10100 // JSConsumerWQConsumerNotUniqueErr
	var apiErr *jetstream.APIError
	return errors.As(err, &apiErr) && apiErr.ErrorCode == notUnique
}

// pullWait bounds one pull request; Next issues the next one, possibly on
// another tool, when it expires empty. It also bounds how long a pull
// abandoned by a cancelled Next stays open on the server (see release).
const pullWait = time.Second

// sweepEvery is how often a consumer with more tools than waiting slots
// checks the tools no open pull covers, with a no-wait fetch each.
const sweepEvery = 250 * time.Millisecond

// No pull heartbeats: with one open pull per idle slot they cost ~0.6 ms of
// one-at-a-time latency here (bench (d), 3.6–3.9 ms with, 2.8 without), so
// after a NATS restart an idle slot may wait out its pull (≤ pullWait)
// before it asks the new connection.

type consumer struct {
	routes []*route
	slots  int

	mu       sync.Mutex
	rr       int           // round-robin cursor for ties
	sweeping bool          // a Next checks the tools no pull covers
	wake     chan struct{} // closed (and replaced) when a capped tool frees a place
}

// route is one tool's consumer and what this process holds of it. The
// counters are guarded by consumer.mu.
type route struct {
	tool  string
	c     jetstream.Consumer
	lease time.Duration
	max   int
	limit int // MaxConcurrency; 0: none

	pulls int    // open pull requests, each of which may deliver one job
	held  int    // deliveries handed out and not settled (nor lapsed)
	hint  uint64 // jobs pending after the last delivery: more work likely
}

// open reports whether one more pull may be opened on r.
func (r *route) open() bool { return r.limit <= 0 || r.pulls+r.held < r.limit }

// pick chooses the tool to pull from next and counts the pull as open:
// a tool with pending work first, then the one with the fewest open pulls;
// ties go round robin. nil when every tool is at its MaxConcurrency.
func (c *consumer) pick() *route {
	better := func(r, than *route) bool {
		if (r.hint > 0) != (than.hint > 0) {
			return r.hint > 0
		}
		return r.pulls < than.pulls
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	var best *route
	n := len(c.routes)
	for i := range n {
		r := c.routes[(c.rr+i)%n]
		if r.open() && (best == nil || better(r, best)) {
			best = r
		}
	}
	c.rr = (c.rr + 1) % n
	if best != nil {
		best.pulls++
	}
	return best
}

// sweep reports whether the calling Next is to check the tools no pull
// covers (and returns them): one Next at a time does, while there are such
// tools. was says whether the caller held the role until now.
func (c *consumer) sweep(was bool) ([]*route, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.sweeping && !was {
		return nil, false
	}
	var out []*route
	for _, r := range c.routes {
		if r.pulls == 0 && r.open() {
			out = append(out, r)
		}
	}
	c.sweeping = len(out) > 0
	return out, c.sweeping
}

func (c *consumer) endSweep() {
	c.mu.Lock()
	c.sweeping = false
	c.mu.Unlock()
}

// opened counts a pull on r as open, unless r is at its MaxConcurrency.
func (c *consumer) opened(r *route) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !r.open() {
		return false
	}
	r.pulls++
	return true
}

// done closes a pull on r; got is the job it delivered (nil: none).
func (c *consumer) done(r *route, got jetstream.Msg) (*delivery, error) {
	var d *delivery
	var derr error
	if got != nil {
		d, derr = newDelivery(got, c, r)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	r.pulls--
	switch {
	case got == nil:
		r.hint = 0
	case derr == nil:
		r.held++
		r.hint = d.pending
	}
	return d, derr
}

// settled notes that a delivery of r is no longer held and wakes a Next
// waiting for a capped tool.
func (c *consumer) settled(r *route) {
	c.mu.Lock()
	r.held--
	close(c.wake)
	c.wake = make(chan struct{})
	c.mu.Unlock()
}

func (c *consumer) waitPlace(ctx context.Context) error {
	c.mu.Lock()
	w := c.wake
	c.mu.Unlock()
	t := time.NewTimer(pullWait)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-w:
	case <-t.C:
	}
	return nil
}

func (c *consumer) Next(ctx context.Context) (broker.Delivery, error) {
	sweeper := false
	defer func() {
		if sweeper {
			c.endSweep()
		}
	}()
	for {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		wait := pullWait
		var bare []*route
		if bare, sweeper = c.sweep(sweeper); sweeper {
			// More tools than waiting slots: check the uncovered ones
			// without waiting, and come back to them soon.
			for _, r := range bare {
				if !c.opened(r) {
					continue
				}
				if d, err := c.pull(ctx, r, 0); d != nil || err != nil {
					return d, err
				}
			}
			wait = sweepEvery
		}
		r := c.pick()
		if r == nil { // every tool at its MaxConcurrency
			if err := c.waitPlace(ctx); err != nil {
				return nil, err
			}
			continue
		}
		if dl, ok := ctx.Deadline(); ok {
			wait = min(wait, max(time.Until(dl), time.Millisecond))
		}
		if d, err := c.pull(ctx, r, wait); d != nil || err != nil {
			return d, err
		}
	}
}

// pull fetches one job of r, waiting up to wait (0: not at all). It closes
// the pull it counted. A nil delivery and nil error: nothing came.
func (c *consumer) pull(ctx context.Context, r *route, wait time.Duration) (broker.Delivery, error) {
	var batch jetstream.MessageBatch
	var err error
	if wait <= 0 {
		batch, err = r.c.FetchNoWait(1)
	} else {
		// Not FetchContext: on cancel it drops a message already on its
		// way to us, which then sits out a whole lease. We watch ctx
		// ourselves and hand such a message back (release).
		batch, err = r.c.Fetch(1, jetstream.FetchMaxWait(wait))
	}
	if err != nil {
		_, _ = c.done(r, nil)
		if errors.Is(err, nats.ErrConnectionClosed) {
			return nil, broker.ErrClosed
		}
		return nil, backoff(ctx)
	}
	select {
	case msg, ok := <-batch.Messages():
		if !ok {
			_, _ = c.done(r, nil)
			switch err := batch.Error(); {
			case err == nil, errors.Is(err, nats.ErrTimeout), errors.Is(err, jetstream.ErrNoMessages):
				return nil, nil // the pull expired empty
			case errors.Is(err, nats.ErrConnectionClosed):
				return nil, broker.ErrClosed
			default:
				// Transient (reconnecting, leader election).
				return nil, backoff(ctx)
			}
		}
		d, derr := c.done(r, msg)
		if derr != nil {
			// A message we cannot read will never run: drop it for good.
			_ = msg.TermWithReason(derr.Error())
			return nil, nil
		}
		return d, nil
	case <-ctx.Done():
		_, _ = c.done(r, nil)
		go release(batch)
		return nil, ctx.Err()
	}
}

// release hands back to the queue whatever still arrives for a pull request
// that its Next gave up on. The server keeps the request open until it
// expires or notices the client's interest is gone, and a job sent to it in
// that window would otherwise stay invisible for a whole lease. The Nak
// counts as a delivery: the job's next Attempt is one higher.
func release(batch jetstream.MessageBatch) {
	for msg := range batch.Messages() {
		_ = msg.Nak()
	}
}

func backoff(ctx context.Context) error {
	t := time.NewTimer(250 * time.Millisecond)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// delivery is one job handed out. Its place in its tool's MaxConcurrency is
// given back when the worker settles it, or when its lease lapses without
// an Extend (the broker then hands the job to another worker).
type delivery struct {
	msg     jetstream.Msg
	job     broker.Job
	attempt int
	pending uint64

	c     *consumer
	r     *route
	once  sync.Once
	lapse *time.Timer
}

func newDelivery(msg jetstream.Msg, c *consumer, r *route) (*delivery, error) {
	d := &delivery{msg: msg, c: c, r: r}
	if err := json.Unmarshal(msg.Data(), &d.job); err != nil {
		return nil, fmt.Errorf("natsbroker: undecodable job: %w", err)
	}
	md, err := msg.Metadata()
	if err != nil {
		return nil, fmt.Errorf("natsbroker: job metadata: %w", err)
	}
	d.attempt, d.pending = int(md.NumDelivered), md.NumPending
	// Armed only once d.lapse is set: release stops it.
	d.lapse = time.AfterFunc(time.Duration(1<<62), d.release)
	d.lapse.Reset(r.lease)
	return d, nil
}

func (d *delivery) release() { d.once.Do(func() { d.lapse.Stop(); d.c.settled(d.r) }) }

func (d *delivery) Job() *broker.Job { return &d.job }
func (d *delivery) Delivered() int   { return d.attempt }

func (d *delivery) Ack(ctx context.Context) error {
	defer d.release()
	return d.msg.DoubleAck(ctx)
}

func (d *delivery) Retry(_ context.Context, delay time.Duration) error {
	defer d.release()
	if delay <= 0 {
		return d.msg.Nak()
	}
	return d.msg.NakWithDelay(delay)
}

var _ broker.Deferrer = (*delivery)(nil)

// Defer is a delayed Nak: JetStream counts it as a delivery all the same,
// so routes whose jobs are deferred take no MaxDeliveries bound.
func (d *delivery) Defer(ctx context.Context, delay time.Duration) error { return d.Retry(ctx, delay) }

// RedeliversAfterLease implements broker.Redeliverer: JetStream delivers an
// unacknowledged job again after the consumer's ack wait, the route's lease.
func (d *delivery) RedeliversAfterLease() {}

func (d *delivery) Term(_ context.Context, reason string) error {
	defer d.release()
	return d.msg.TermWithReason(reason)
}

func (d *delivery) Extend(context.Context) error {
	d.lapse.Reset(d.r.lease)
	return d.msg.InProgress()
}
