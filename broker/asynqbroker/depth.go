package asynqbroker

import (
	"context"
	"fmt"
	"slices"

	"github.com/hibiken/asynq"

	"github.com/mcpqueue/mcpqueue/broker"
)

var _ broker.Depth = (*Queue)(nil)

// Depth is the number of pending jobs (ready to run, not held by a worker)
// summed over the queues this Queue's consumers serve. Scheduled retries
// are not counted. Asynq's Inspector takes no context: ctx is checked
// between queues only.
func (q *Queue) Depth(ctx context.Context) (int64, error) {
	in := asynq.NewInspectorFromRedisClient(q.rdb)
	known, err := in.Queues()
	if err != nil {
		return 0, fmt.Errorf("asynqbroker: depth: %w", err)
	}
	var n int64
	for name := range q.cfg.Queues {
		if !slices.Contains(known, name) { // nothing was ever enqueued there
			continue
		}
		if err := ctx.Err(); err != nil {
			return 0, err
		}
		info, err := in.GetQueueInfo(name)
		if err != nil {
			return 0, fmt.Errorf("asynqbroker: depth of %s: %w", name, err)
		}
		n += int64(info.Pending)
	}
	return n, nil
}
