package consumer

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/rs/zerolog"

	"github.com/mcpqueue/mcpqueue/broker"
	"github.com/mcpqueue/mcpqueue/taskstate"
)

// Call is one run of a handler: the decoded arguments and what the handler
// can do besides returning (report progress; later, ask for input).
type Call[In any] struct {
	Args In
	*callState
}

type callState struct {
	w       *Worker
	taskID  string
	tool    string
	owner   string
	attempt int
	sync    bool
	args    json.RawMessage
	meta    map[string]json.RawMessage
}

// Logger returns the worker's logger with the task's fields.
func (c *callState) Logger() *zerolog.Logger {
	l := c.w.log.With().Str("task", c.taskID).Str("tool", c.tool).Int("attempt", c.attempt).Logger()
	return &l
}

// TaskID is the id of the task this call runs.
func (c *callState) TaskID() string { return c.taskID }

// Attempt counts runs of this task, starting at 1 (more after a crash).
func (c *callState) Attempt() int { return c.attempt }

// Owner is the principal that created the task ("" without authentication).
func (c *callState) Owner() string { return c.owner }

// Sync reports whether the client waits inline for this call rather than
// holding a task handle.
func (c *callState) Sync() bool { return c.sync }

// ProgressEvent is what Progress publishes for clients that asked for
// progress notifications (the front end forwards it).
type ProgressEvent struct {
	ProgressToken json.RawMessage `json:"progressToken,omitempty"`
	Progress      float64         `json:"progress"`
	Total         float64         `json:"total,omitempty"`
	Message       string          `json:"message,omitempty"`
}

// Progress reports how far the call has come: message becomes the task's
// statusMessage, and clients that sent a progress token receive a progress
// notification with progress/total. Pass total 0 when unknown.
func (c *callState) Progress(ctx context.Context, progress, total float64, message string) error {
	if message != "" {
		_, err := taskstate.Mutate(ctx, c.w.store, c.taskID, c.w.cfg.Now, func(t *taskstate.Task) error {
			if t.StatusMessage == message {
				return taskstate.ErrSkip
			}
			t.StatusMessage = message
			return nil
		})
		if err != nil && err != taskstate.ErrSkip {
			return fmt.Errorf("consumer: progress: %w", err)
		}
	}
	tok, ok := c.meta["progressToken"]
	if !ok {
		return nil
	}
	b, _ := json.Marshal(ProgressEvent{ProgressToken: tok, Progress: progress, Total: total, Message: message})
	return c.w.bus.Publish(ctx, broker.TopicProgress, c.taskID, b)
}
