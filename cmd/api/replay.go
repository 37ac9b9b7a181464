package main

import (
	"context"
	"errors"
	"fmt"

	"github.com/mcpqueue/mcpqueue/backend"
	"github.com/mcpqueue/mcpqueue/producer"
	"github.com/mcpqueue/mcpqueue/taskstate"
)

// replay runs each ended task's call again (producer.Replay: a new task of
// the same owner, linked both ways) and reports on each: "<id>: replayed
// as <new id>", or why not.
func (c *tasksCLI) replay(ctx context.Context, b *backend.Backend, ids []string) error {
	prod, ids, failed := c.producerFor(b, ids)
	for _, id := range ids {
		t, created, err := prod.Replay(ctx, id)
		switch {
		case err == nil && created:
			fmt.Fprintf(c.stdout, "%s: replayed as %s\n", id, t.ID)
		case err == nil:
			fmt.Fprintf(c.stdout, "%s: replayed already, as %s (%s); replay that one to run it again\n", id, t.ID, t.Status)
		case errors.Is(err, taskstate.ErrNotFound):
			fmt.Fprintf(c.stdout, "%s: not found\n", id)
			failed = true
		case errors.Is(err, producer.ErrNotReplayable):
			fmt.Fprintf(c.stdout, "%s: not ended yet: %v\n", id, err)
			failed = true
		default:
			fmt.Fprintf(c.stdout, "%s: error: %v\n", id, err)
			failed = true
		}
	}
	if failed {
		return errReported
	}
	return nil
}
