package natsbroker

import (
	"context"
	"errors"
	"fmt"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/mcpqueue/mcpqueue/broker"
)

var _ broker.Depth = (*Queue)(nil)

// Depth reads each tool's consumer: Pending is its NumPending (jobs not yet
// delivered), InFlight its NumAckPending (delivered, not acked). A tool
// whose consumer does not exist yet (no worker ever served it) is left out.
func (q *Queue) Depth(ctx context.Context, tools []string) (map[string]broker.ToolDepth, error) {
	out := make(map[string]broker.ToolDepth, len(tools))
	for _, tool := range tools {
		c, err := q.stream.Consumer(ctx, ConsumerName(tool))
		if errors.Is(err, jetstream.ErrConsumerNotFound) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("natsbroker: depth of %s: %w", tool, err)
		}
		info, err := c.Info(ctx)
		if err != nil {
			return nil, fmt.Errorf("natsbroker: depth of %s: %w", tool, err)
		}
		out[tool] = broker.ToolDepth{Pending: int64(info.NumPending), InFlight: int64(info.NumAckPending)}
	}
	return out, nil
}
