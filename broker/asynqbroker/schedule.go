package asynqbroker

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/hibiken/asynq"
)

// Scheduled jobs (issue #32 item 1): Enqueue puts a job whose NotBefore is
// ahead in Asynq's scheduled set (asynq.ProcessAt), where it waits in
// Redis, across restarts of every process, visible in asynqmon, until
// Asynq's forwarder moves it to its queue when due.

// wholeSecondAfter is at rounded up to a whole second: Asynq keeps a
// scheduled job's time in Unix seconds and lets it go once that second has
// begun, which for a time within a second would be early.
func wholeSecondAfter(at time.Time) time.Time {
	if w := at.Truncate(time.Second); !w.Equal(at) {
		return w.Add(time.Second)
	}
	return at
}

// Unschedule implements broker.Scheduler: it deletes task taskID's first
// job (dedupe key = task id) from the scheduled set, in the route's own
// queue and in the queue of the pool that serves it, while it is still
// scheduled. A job already due (pending, active) is left to the worker,
// which finds the record terminal.
func (q *Queue) Unschedule(ctx context.Context, route, taskID string) error {
	for _, queue := range q.routeQueues(ctx, route) {
		info, err := q.inspector.GetTaskInfo(queue, taskID)
		if errors.Is(err, asynq.ErrTaskNotFound) || errors.Is(err, asynq.ErrQueueNotFound) {
			continue
		}
		if err != nil {
			return fmt.Errorf("asynqbroker: unschedule %s: %w", taskID, err)
		}
		if info.State != asynq.TaskStateScheduled {
			continue
		}
		err = q.inspector.DeleteTask(queue, taskID)
		if err != nil && !errors.Is(err, asynq.ErrTaskNotFound) {
			return fmt.Errorf("asynqbroker: unschedule %s: %w", taskID, err)
		}
	}
	return nil
}
