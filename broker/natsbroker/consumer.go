package natsbroker

import (
	"context"
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
	pl, err := newPuller(q.js)
	if err != nil {
		return nil, fmt.Errorf("natsbroker: pull subscription: %w", err)
	}
	c := &consumer{slots: opts.Slots, wake: make(chan struct{}), signal: make(chan struct{}, 1), nc: q.js.Conn(), names: q.cfg.names(), p: pl}
	for _, r := range opts.Tools {
		lease, maxDeliver := opts.Settings(r) // -1 is JetStream's no bound too
		rt := &route{tool: r.Tool, durable: ConsumerName(r.Tool), lease: lease, max: maxDeliver, limit: r.MaxConcurrency}
		err := jsdurable.Retry(ctx, func(ctx context.Context) error {
			_, err := q.ensureConsumer(ctx, rt)
			return err
		})
		if err != nil {
			pl.close()
			return nil, err
		}
		c.routes = append(c.routes, rt)
	}
	context.AfterFunc(ctx, func() {
		c.p.close()
		c.mu.Lock()
		defer c.mu.Unlock()
		c.ended = true
		for _, r := range c.routes {
			r.listen(c, false)
		}
	})
	return c, nil
}

func (q *Queue) ensureConsumer(ctx context.Context, rt *route) (jetstream.Consumer, error) {
	cfg := jetstream.ConsumerConfig{
		Durable:       rt.durable,
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
// abandoned by a cancelled Next stays open on the server (see puller).
const pullWait = time.Second

// sweepEvery is how often the sweeper checks the tools no open pull covers
// (more tools than waiting slots, or idle ones while another is hot), with
// a no-wait fetch each.
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
	signal   chan struct{} // cap 1: an idle tool got a job (see route.listen)
	nc       *nats.Conn
	p        *puller // the pull subscription of every route
	names    Names
	ended    bool          // the ctx of Consumer ended: no more signals
	sweeping bool          // a Next checks the tools no pull covers
	sweptAt  time.Time     // when it last did
	wake     chan struct{} // closed (and replaced) when a capped tool frees a place
}

// route is one tool's consumer and what this process holds of it. The
// counters are guarded by consumer.mu.
type route struct {
	tool    string
	durable string // its consumer's name, where its pulls go (see puller)
	lease   time.Duration
	max     int
	limit   int // MaxConcurrency; 0: none

	pulls   int       // open pull requests, each of which may deliver one job
	held    int       // deliveries handed out and not settled (nor lapsed)
	hint    uint64    // jobs pending after the last delivery: more work likely
	lastOut time.Time // of the last delivery
	sub     *nats.Subscription
}

// listen subscribes to r's job subjects (on, unless the consumer's ctx has
// ended) or unsubscribes. A job published on a tool that is not hot marks
// the tool as having pending work and wakes the sweeper (see watch): with a
// hot tool taking the waiting slots' pulls, a job of an idle tool is then
// fetched at once instead of at the next sweep. A tool that delivered
// within hotFor has pulls open, so it does not listen: its jobs would cost
// every worker of the pool a copy each. c.mu is held.
func (r *route) listen(c *consumer, on bool) {
	switch {
	case on && r.sub == nil && !c.ended:
		r.sub, _ = c.nc.Subscribe(c.names.ToolSubjects(r.tool), func(*nats.Msg) {
			c.mu.Lock()
			r.hint = max(r.hint, 1)
			c.mu.Unlock()
			select {
			case c.signal <- struct{}{}:
			default:
			}
		})
	case !on && r.sub != nil:
		_ = r.sub.Unsubscribe()
		r.sub = nil
	}
}

// hotFor is how long a tool stays hot after a delivery (see pick).
const hotFor = time.Second

// hot reports whether r had work lately: jobs pending after its last
// delivery, or a delivery within hotFor.
func (r *route) hot(now time.Time) bool { return r.hint > 0 || now.Sub(r.lastOut) < hotFor }

// open reports whether one more pull may be opened on r.
func (r *route) open() bool { return r.limit <= 0 || r.pulls+r.held < r.limit }

// pick chooses the tool to pull from next and counts the pull as open:
// a tool with pending work first, then a hot one, then the one with the
// fewest open pulls; ties go round robin. nil when every tool is at its
// MaxConcurrency. So while some tool is hot, waiting slots pull from hot
// tools only and the others are left to the sweep: a slot parked in a pull
// on an idle tool is a slot the busy one lacks (with one pull per tool, a
// worker of 44 tools and 64 slots ran its busy tool on the 20 left over),
// and an idle tool then costs its sweep, not a slot per tool. While none is,
// every tool gets a pull in turn, as many as there are waiting slots.
func (c *consumer) pick() *route {
	now := time.Now()
	better := func(r, than *route) bool {
		if (r.hint > 0) != (than.hint > 0) {
			return r.hint > 0
		}
		if r.hot(now) != than.hot(now) {
			return r.hot(now)
		}
		return r.pulls < than.pulls
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	var best *route
	n := len(c.routes)
	for i := range n {
		r := c.routes[(c.rr+i)%n]
		r.listen(c, now.Sub(r.lastOut) >= hotFor)
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

// sweep reports whether the calling Next is the sweeper, the one Next at a
// time that checks the tools no pull covers while there are such tools
// (was: the caller held the role until now), and returns those tools when
// they are due: sweepEvery after the last sweep, whichever Next made it, so
// that under load, when the role passes from Next to Next, idle tools cost
// a sweep every sweepEvery and not one per job.
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
	if now := time.Now(); now.Sub(c.sweptAt) >= sweepEvery {
		c.sweptAt = now
		return out, c.sweeping
	}
	return nil, c.sweeping
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
func (c *consumer) done(r *route, got *nats.Msg) (*delivery, error) {
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
		r.lastOut = time.Now()
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

// watch lets the sweeper wait for a signal from an idle tool (or the next
// sweep) instead of pulling on r, the tool pick chose for it, when other
// slots have pulls open (they pull on r, or will once their pull on an idle
// tool expires) and r has no jobs known to be pending: one slot then serves
// the idle tools at once and the others the hot one. It reports whether it
// waited; if so the pull pick counted on r is closed.
func (c *consumer) watch(ctx context.Context, r *route) bool {
	c.mu.Lock()
	pulls := 0
	for _, o := range c.routes {
		pulls += o.pulls
	}
	if r.hint > 0 || pulls < 2 {
		c.mu.Unlock()
		return false
	}
	r.pulls--
	c.mu.Unlock()
	t := time.NewTimer(sweepEvery)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-c.signal:
	case <-t.C:
	}
	return true
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
			// Tools no pull covers (more tools than waiting slots, or
			// idle ones while another is hot): check them without
			// waiting when due, and come back to them soon.
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
		if sweeper && c.watch(ctx, r) {
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
	n, ch, err := c.p.request(c.names.Stream, r.durable, wait)
	if err != nil {
		_, _ = c.done(r, nil)
		if errors.Is(err, nats.ErrConnectionClosed) || errors.Is(err, errPullerClosed) {
			return nil, broker.ErrClosed
		}
		return nil, backoff(ctx)
	}
	t := time.NewTimer(wait + pullGrace)
	defer t.Stop()
	var msg *nats.Msg
	select {
	case m, ok := <-ch:
		if !ok {
			_, _ = c.done(r, nil)
			return nil, broker.ErrClosed
		}
		if !isJob(m) {
			_, _ = c.done(r, nil)
			if err := pullStatus(m); err != nil {
				return nil, backoff(ctx) // transient (leader election, reconnecting)
			}
			return nil, nil // the pull expired empty
		}
		msg = m
	case <-t.C:
		// No answer (lost in a reconnect): the pull counts as expired,
		// unless its job came just now.
		if msg = c.p.forget(n, ch); msg == nil {
			_, _ = c.done(r, nil)
			if c.nc.IsClosed() {
				return nil, broker.ErrClosed
			}
			return nil, nil
		}
	case <-ctx.Done():
		_, _ = c.done(r, nil)
		if m := c.p.forget(n, ch); m != nil {
			_ = m.Nak() // handed back, not left to sit out a lease
		}
		return nil, ctx.Err()
	}
	d, derr := c.done(r, msg)
	if derr != nil {
		// A message we cannot read will never run: drop it for good.
		_ = term(c.nc, msg, derr.Error())
		return nil, nil
	}
	return d, nil
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
