package bridge

// Upstream tasks of a 2025-11-25 server (issue #33, item 1): a server that
// declares capabilities.tasks.requests.tools.call runs a tool whose
// execution.taskSupport is optional or required as a task of its own. The
// bridge sends the call task-augmented (params.task), reads the outcome
// with tasks/result (which blocks until the task ends; the server's
// elicitation and sampling requests for the task arrive on its stream and
// are relayed like a plain call's), polls tasks/get meanwhile to relay the
// statusMessage as progress, and cancels the upstream task (tasks/cancel)
// when the queue's task ends first.

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/mcpqueue/mcpqueue/consumer"
	"github.com/mcpqueue/mcpqueue/internal/mcpwire"
)

// legacyTasks reports whether the server runs task-augmented tools/call
// (2025-11-25 experimental tasks).
func (s *session) legacyTasks() bool {
	return s.init.ProtocolVersion != mcpwire.Version20260728 && s.init.Capabilities.TaskToolCalls()
}

// taskAugmented is the params.task member of a task-augmented call.
const taskAugmented = "task"

// followTask runs the rest of a task-augmented call whose answer was raw:
// a CreateTaskResult (a server may also answer with the plain result).
func (s *session) followTask(ctx context.Context, a *activeCall, raw json.RawMessage) (json.RawMessage, error) {
	var created mcpwire.LegacyCreateTaskResult
	if json.Unmarshal(raw, &created) != nil || created.Task == nil || created.Task.TaskID == "" {
		a.flush()
		return raw, nil
	}
	task := created.Task
	s.logger().Info().Str("task", a.taskID).Str("upstream_task", task.TaskID).Msg("the server runs the call as a task; waiting on tasks/result")
	pollCtx, stopPoll := context.WithCancel(a.ctx)
	polled := make(chan struct{})
	go func() {
		defer close(polled)
		s.pollTask(pollCtx, a, task)
	}()
	defer func() {
		stopPoll()
		<-polled
	}()
	id, ch, err := s.send("tasks/result", &mcpwire.TaskParams{TaskID: task.TaskID})
	if err != nil {
		return nil, consumer.Retryable(err)
	}
	select {
	case m := <-ch:
		stopPoll()
		<-polled
		a.flush()
		return outcome(m)
	case <-s.done:
		return nil, consumer.Retryable(fmt.Errorf("%w, during tasks/result", s.err))
	case err := <-a.aborted:
		s.cancelTask(task.TaskID)
		s.cancel(id, ch, err.Error())
		return nil, err
	case <-ctx.Done():
		s.cancelTask(task.TaskID)
		s.cancel(id, ch, cause(ctx))
		return nil, context.Cause(ctx)
	}
}

// pollTask polls tasks/get at the task's pollInterval (bounded to 0.1–5 s)
// until ctx ends or the task does, relaying a new statusMessage as
// progress.
func (s *session) pollTask(ctx context.Context, a *activeCall, t *mcpwire.LegacyTask) {
	last, step := "", 0
	for {
		if t.StatusMessage != "" && t.StatusMessage != last {
			last, step = t.StatusMessage, step+1
			a.note(&progressUpdate{progress: float64(step), message: t.StatusMessage})
		}
		switch t.Status {
		case "completed", "failed", "cancelled":
			return
		}
		d := time.Second
		if t.PollInterval != nil {
			d = time.Duration(*t.PollInterval) * time.Millisecond
		}
		timer := time.NewTimer(min(max(d, 100*time.Millisecond), 5*time.Second))
		select {
		case <-ctx.Done():
			timer.Stop()
			return
		case <-timer.C:
		}
		raw, err := s.request(ctx, "tasks/get", &mcpwire.TaskParams{TaskID: t.TaskID})
		if err != nil {
			if ctx.Err() == nil {
				s.logger().Warn().Err(err).Str("task", a.taskID).Msg("polling the upstream task")
			}
			return
		}
		var next mcpwire.LegacyTask
		if err := json.Unmarshal(raw, &next); err != nil {
			s.logger().Warn().Err(err).Str("task", a.taskID).Msg("undecodable tasks/get result")
			return
		}
		next.TaskID = t.TaskID
		t = &next
	}
}

// cancelTask asks the server to cancel its task; the queue's task has
// ended already, so this waits a bounded time for the acknowledgement.
func (s *session) cancelTask(taskID string) {
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if _, err := s.request(ctx, "tasks/cancel", &mcpwire.TaskParams{TaskID: taskID}); err != nil {
			s.logger().Warn().Err(err).Msg("tasks/cancel failed")
			return
		}
		s.logger().Info().Msg("sent tasks/cancel for the upstream task")
	}()
}
