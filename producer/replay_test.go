package producer_test

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/mcpqueue/mcpqueue/producer"
	"github.com/mcpqueue/mcpqueue/taskstate"
)

// A dead task (failed on its last attempt) replayed: a new task of the
// same owner, tool and arguments, linked both ways; a second replay is the
// same task; an active task is refused.
func TestReplayDeadTask(t *testing.T) {
	t.Parallel()
	st, ex, p := newProducer(t, nil)
	ctx := t.Context()
	old, err := p.Create(ctx, &producer.Request{Tool: "work", Owner: "alice", Arguments: json.RawMessage(`{"n":7}`)})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := p.Replay(ctx, old.ID); !errors.Is(err, producer.ErrNotReplayable) {
		t.Fatalf("Replay of a working task: %v, want ErrNotReplayable", err)
	}
	if _, err := taskstate.Mutate(ctx, st, old.ID, fixedNow, func(t *taskstate.Task) error {
		t.Attempt, t.MaxAttempts = 2, 2
		t.Status, t.StatusMessage = taskstate.Failed, "worker lost on its last attempt"
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if dead := get(t, st, old.ID); !dead.Dead(0) {
		t.Fatalf("a task failed on its last attempt is not Dead: %+v", dead)
	}
	replay, created, err := p.Replay(ctx, old.ID)
	if err != nil || !created {
		t.Fatalf("Replay: %v (created %v)", err, created)
	}
	if replay.ID == old.ID || replay.Owner != "alice" || replay.Tool != "work" || string(replay.Arguments) != `{"n":7}` || replay.Status != taskstate.Working {
		t.Fatalf("replay %+v: want a new working task of alice's with the same call", replay)
	}
	if got := get(t, st, replay.ID).ReplayOf(); got != old.ID {
		t.Fatalf("replay names %q as its original, want %s", got, old.ID)
	}
	if got := get(t, st, old.ID).ReplayedBy(); got != replay.ID {
		t.Fatalf("the old record names %q as its replay, want %s", got, replay.ID)
	}
	again, created, err := p.Replay(ctx, old.ID)
	if err != nil || created || again.ID != replay.ID {
		t.Fatalf("second Replay: %v, %v, created %v; want the first replay", again, err, created)
	}
	if n := len(ex.jobs()); n != 2 {
		t.Fatalf("%d jobs started, want 2 (the task and one replay)", n)
	}
}
