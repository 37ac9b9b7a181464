package natsbroker

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/mcpqueue/mcpqueue/broker"
)

// delivery is one job handed out. Its place in its tool's MaxConcurrency is
// given back when the worker settles it, or when its lease lapses without
// an Extend (the broker then hands the job to another worker).
type delivery struct {
	msg     *nats.Msg
	job     broker.Job
	attempt int
	pending uint64

	c     *consumer
	r     *route
	once  sync.Once
	lapse *time.Timer
}

func newDelivery(msg *nats.Msg, c *consumer, r *route) (*delivery, error) {
	d := &delivery{msg: msg, c: c, r: r}
	if err := decodeJob(msg.Data, &d.job); err != nil {
		return nil, err
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

// Ack is a plain ack: sent, not confirmed (no ack-with-reply round trip).
// An ack that is lost (the connection drops) leaves the job to be delivered
// again after the lease, and that delivery finds the task's record
// terminal and is acked and dropped: the record's fencing, not the ack,
// keeps a task from running twice.
func (d *delivery) Ack(context.Context) error {
	defer d.release()
	return d.msg.Ack()
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
	return term(d.c.nc, d.msg, reason)
}

func (d *delivery) Extend(context.Context) error {
	d.lapse.Reset(d.r.lease)
	return d.msg.InProgress()
}

// term tells JetStream never to deliver msg again, giving reason (what
// jetstream.Msg.TermWithReason sends).
func term(nc *nats.Conn, msg *nats.Msg, reason string) error {
	return nc.Publish(msg.Reply, []byte("+TERM "+reason))
}
