package natsbroker

import (
	"context"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/mcpqueue/mcpqueue/broker"
)

// Bus is the core-NATS implementation of broker.Bus.
type Bus struct {
	nc     *nats.Conn
	prefix string
}

var _ broker.Bus = (*Bus)(nil)

// NewBus returns a bus on nc. Only cfg.BusPrefix is used.
func NewBus(nc *nats.Conn, cfg *Config) *Bus {
	c := cfg.withDefaults()
	return &Bus{nc: nc, prefix: c.BusPrefix}
}

func (b *Bus) subject(topic broker.Topic, taskID string) string {
	if taskID == "" {
		taskID = "*"
	}
	return b.prefix + "." + string(topic) + "." + taskID
}

// Publish sends data on topic for taskID to every current subscriber (core
// NATS: nothing is kept for a subscriber that is not there).
func (b *Bus) Publish(_ context.Context, topic broker.Topic, taskID string, data []byte) error {
	if !broker.SafeName(taskID) {
		return fmt.Errorf("natsbroker: publish %s: invalid task id %q", topic, taskID)
	}
	if err := b.nc.Publish(b.subject(topic, taskID), data); err != nil {
		return fmt.Errorf("natsbroker: publish %s: %w", topic, err)
	}
	return nil
}

// Subscribe calls fn with the task id and data of each message published on
// topic for taskID, or for every task when taskID is "", until the
// subscription is closed (ctx bounds only the subscribe itself).
func (b *Bus) Subscribe(ctx context.Context, topic broker.Topic, taskID string, fn func(string, []byte)) (broker.Subscription, error) {
	if taskID != "" && !broker.SafeName(taskID) {
		// "a.>" or "*" would subscribe to other tasks' messages.
		return nil, fmt.Errorf("natsbroker: subscribe %s: invalid task id %q", topic, taskID)
	}
	cut := len(b.prefix) + len(topic) + 2
	sub, err := b.nc.Subscribe(b.subject(topic, taskID), func(m *nats.Msg) {
		if len(m.Subject) > cut {
			fn(m.Subject[cut:], m.Data)
		}
	})
	if err != nil {
		return nil, fmt.Errorf("natsbroker: subscribe %s: %w", topic, err)
	}
	// Make sure the server has registered interest before returning, so a
	// publish that follows Subscribe is not missed.
	if err := b.nc.FlushTimeout(flushTimeout(ctx)); err != nil {
		_ = sub.Unsubscribe()
		return nil, fmt.Errorf("natsbroker: subscribe %s: %w", topic, err)
	}
	return subscription{sub}, nil
}

type subscription struct{ s *nats.Subscription }

func (s subscription) Close() error { return s.s.Unsubscribe() }

func flushTimeout(ctx context.Context) time.Duration {
	if dl, ok := ctx.Deadline(); ok {
		if d := time.Until(dl); d > 0 {
			return d
		}
	}
	return 5 * time.Second
}
