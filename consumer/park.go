package consumer

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/mcpqueue/mcpqueue/taskstate"
	"github.com/mcpqueue/mcpqueue/vocab"
)

// ErrParked is what Ask returns when a task's run parks: nobody answered
// within the tool's ParkAfter, so the run ends and frees its worker slot,
// and the task waits for its client (input_required) with no run. Return
// it from the handler (as any error Ask returns). When the last answer
// comes, the handler runs again from the top on any worker, and Ask returns
// the stored answers without asking again: work done before Ask must be
// repeatable, or kept across runs with Checkpoint and Restore. A parked
// run's outcome is discarded, whatever the handler returns.
var ErrParked = errors.New("consumer: the task waits for client input without a run (parked)")

// MaxCheckpoint is the largest state Checkpoint stores.
const MaxCheckpoint = 64 << 10

func (c *callState) isParked() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.parked
}

// park records that the task waits for the answers to keys with no run,
// until deadline (the input timeout), and gives up the lease. If the answers
// arrived meanwhile it returns them instead.
func (c *callState) park(ctx context.Context, keys []string, deadline time.Time) ([]json.RawMessage, error) {
	if err := c.checkWaitingCap(ctx); err != nil {
		return nil, err
	}
	now := c.w.cfg.Now().UTC()
	t, err := c.mutate(ctx, func(t *taskstate.Task) error {
		if _, ok := answered(t, keys); ok {
			return taskstate.ErrSkip
		}
		t.Parked = &taskstate.Parked{Since: now, Until: deadline.UTC()}
		t.Parks++
		t.Lease = nil
		return nil
	})
	if errors.Is(err, taskstate.ErrSkip) {
		out, _ := answered(t, keys)
		return out, nil
	}
	if err != nil {
		return nil, fmt.Errorf("consumer: parking the task: %w", err)
	}
	c.mu.Lock()
	c.parked = true
	c.mu.Unlock()
	c.Logger().Info().Strs("keys", keys).Time("until", deadline).Msg("parking: no answer yet; the task waits without a worker slot")
	return nil, ErrParked
}

// checkWaitingCap refuses to park a task whose owner already has
// MaxWaitingInput tasks waiting for input. It reads the owner's tasks
// (taskstate.Store.List), stopping at the bound.
func (c *callState) checkWaitingCap(ctx context.Context) error {
	max := c.w.cfg.MaxWaitingInput
	if c.owner == "" || max < 0 {
		return nil
	}
	n, cursor := 0, ""
	for {
		page, next, err := c.w.store.List(ctx, c.owner, cursor, 200)
		if err != nil {
			return fmt.Errorf("consumer: counting the owner's tasks waiting for input: %w", err)
		}
		for _, t := range page {
			if t.ID != c.taskID && t.Status == taskstate.InputRequired {
				n++
			}
		}
		if n >= max {
			return &ProtocolError{Code: vocab.CodeLimited, Message: fmt.Sprintf(
				"this task cannot wait for input: its owner already has %d tasks waiting for input, the limit (--max-waiting-input); answer or cancel some of them", max)}
		}
		if next == "" {
			return nil
		}
		cursor = next
	}
}

// Checkpoint keeps v (JSON-encoded, at most MaxCheckpoint bytes) on the
// task's record, so a later run of the handler — after a park, a crash or a
// lost lease — can Restore it instead of repeating expensive work.
func (c *callState) Checkpoint(ctx context.Context, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("consumer: checkpoint: %w", err)
	}
	if len(b) > MaxCheckpoint {
		return fmt.Errorf("consumer: checkpoint of %d bytes exceeds the %d-byte limit", len(b), MaxCheckpoint)
	}
	_, err = c.mutate(ctx, func(t *taskstate.Task) error {
		t.Checkpoint = b
		return nil
	})
	if err != nil {
		return fmt.Errorf("consumer: checkpoint: %w", err)
	}
	return nil
}

// Restore decodes the state the last Checkpoint of this task kept into v
// and reports whether there was one.
func (c *callState) Restore(v any) (bool, error) {
	c.mu.Lock()
	var b json.RawMessage
	if c.rec != nil {
		b = c.rec.Checkpoint
	}
	c.mu.Unlock()
	if len(b) == 0 {
		return false, nil
	}
	if err := json.Unmarshal(b, v); err != nil {
		return false, fmt.Errorf("consumer: restore: %w", err)
	}
	return true, nil
}
