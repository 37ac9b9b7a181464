package natsbroker

import (
	"context"
	"errors"
	"fmt"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/mcpqueue/mcpqueue/broker"
)

var _ broker.Depth = (*Queue)(nil)

// Depth is the number of jobs no worker has been handed yet: the shared
// consumer's pending count, or, before any worker created the consumer,
// every message in the stream.
func (q *Queue) Depth(ctx context.Context) (int64, error) {
	c, err := q.stream.Consumer(ctx, q.cfg.Durable)
	if errors.Is(err, jetstream.ErrConsumerNotFound) {
		info, err := q.stream.Info(ctx)
		if err != nil {
			return 0, fmt.Errorf("natsbroker: depth: %w", err)
		}
		return int64(info.State.Msgs), nil
	}
	if err != nil {
		return 0, fmt.Errorf("natsbroker: depth: %w", err)
	}
	info, err := c.Info(ctx)
	if err != nil {
		return 0, fmt.Errorf("natsbroker: depth: %w", err)
	}
	return int64(info.NumPending), nil
}
