package asynqbroker

import (
	"context"
	"fmt"
	"slices"

	"github.com/mcpqueue/mcpqueue/broker"
)

var _ broker.Depth = (*Queue)(nil)

// Depth reads each tool's queue with the inspector: Pending counts its
// pending, scheduled and retry-waiting jobs, InFlight its active ones (a job
// waiting in a consumer's handler for a Next counts as in flight). A tool
// whose queue never held a job is left out. Asynq's Inspector takes no
// context: ctx is checked between tools only.
func (q *Queue) Depth(ctx context.Context, tools []string) (map[string]broker.ToolDepth, error) {
	known, err := q.inspector.Queues()
	if err != nil {
		return nil, fmt.Errorf("asynqbroker: depth: %w", err)
	}
	out := make(map[string]broker.ToolDepth, len(tools))
	for _, tool := range tools {
		name := q.QueueName(tool)
		if !slices.Contains(known, name) {
			continue
		}
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		info, err := q.inspector.GetQueueInfo(name)
		if err != nil {
			return nil, fmt.Errorf("asynqbroker: depth of %s: %w", tool, err)
		}
		out[tool] = broker.ToolDepth{Pending: int64(info.Pending + info.Scheduled + info.Retry), InFlight: int64(info.Active)}
	}
	return out, nil
}
