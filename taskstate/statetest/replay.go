package statetest

import (
	"errors"
	"testing"

	"github.com/mcpqueue/mcpqueue/taskstate"
)

// markReplayed (dead letters and replay): a terminal record takes the one
// link to its replay, once; an active one refuses it.
func (s *suite) markReplayed(t *testing.T, e *env) {
	active := e.create(t, newTask())
	if _, err := taskstate.MarkReplayed(e.ctx, e.store, active.ID, taskstate.NewID()); !errors.Is(err, taskstate.ErrInvalidChange) {
		t.Fatalf("MarkReplayed of an active record: %v, want ErrInvalidChange", err)
	}
	done := newTask()
	done.Status, done.StatusMessage = taskstate.Failed, "lost on its last attempt"
	e.create(t, done)
	replay := taskstate.NewID()
	if _, err := taskstate.MarkReplayed(e.ctx, e.store, done.ID, replay); err != nil {
		t.Fatalf("MarkReplayed: %v", err)
	}
	got, err := e.store.Get(e.ctx, done.ID)
	if err != nil || got.ReplayedBy() != replay || got.Status != taskstate.Failed || got.StatusMessage != done.StatusMessage {
		t.Fatalf("after MarkReplayed: %+v, %v; want the record as it was, naming %s", got, err, replay)
	}
	if _, err := taskstate.MarkReplayed(e.ctx, e.store, done.ID, taskstate.NewID()); !errors.Is(err, taskstate.ErrSkip) {
		t.Fatalf("a second MarkReplayed: %v, want ErrSkip", err)
	}
	if got, _ := e.store.Get(e.ctx, done.ID); got.ReplayedBy() != replay {
		t.Fatalf("a second MarkReplayed changed the link to %q", got.ReplayedBy())
	}
}
