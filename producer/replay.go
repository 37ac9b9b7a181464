package producer

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/mcpqueue/mcpqueue/taskstate"
)

// ErrNotReplayable is Replay's refusal of a task that has not ended.
var ErrNotReplayable = errors.New("producer: only an ended task can be replayed")

// Replay runs the call of ended task id again as a new task of the same
// owner, kind, tool, arguments and wire, linked both ways: the new task's
// meta names the old one (taskstate.MetaReplayOf) and the old record names
// its replay (taskstate.MarkReplayed). The replay's id follows from the
// old one's, so replaying a task twice, or from two places at once, gives
// the one replay (created false the second time); to run it yet again,
// replay the replay. The caller checks who may replay it (the owner, an
// operator, a console admin of its tenant). Its progress token, client
// capabilities and webhook are not carried over: nobody waits on the
// replay but through tasks/get.
func (p *Producer) Replay(ctx context.Context, id string) (replay *taskstate.Task, created bool, err error) {
	old, err := p.store.Get(ctx, id)
	if err != nil {
		return nil, false, err
	}
	if !old.Status.Terminal() {
		return nil, false, fmt.Errorf("%w: %s is %s", ErrNotReplayable, id, old.Status)
	}
	args, err := p.argumentsOf(ctx, old)
	if err != nil {
		return nil, false, err
	}
	link, _ := json.Marshal(old.ID)
	replay, created, err = p.CreateOrGet(ctx, &Request{
		ID:   taskstate.IdempotentID(old.Owner, "replay:"+old.ID, ""),
		Kind: old.Kind, Tool: old.Tool, Arguments: args, Owner: old.Owner, Era: old.Era, Mode: taskstate.ModeTask,
		Meta: map[string]json.RawMessage{taskstate.MetaReplayOf: link},
	})
	if err != nil {
		return replay, false, err
	}
	if _, err := taskstate.MarkReplayed(ctx, p.store, old.ID, replay.ID); err != nil && !errors.Is(err, taskstate.ErrSkip) {
		return replay, created, fmt.Errorf("producer: replay %s of %s created, but the old record does not name it: %w", replay.ID, old.ID, err)
	}
	return replay, created, nil
}

// argumentsOf reads t's arguments, from its blob when they are kept in one.
func (p *Producer) argumentsOf(ctx context.Context, t *taskstate.Task) (json.RawMessage, error) {
	if t.ArgumentsRef == nil {
		return t.Arguments, nil
	}
	b, ok := p.store.(taskstate.Blobs)
	if !ok {
		return nil, fmt.Errorf("producer: the arguments of %s are in a blob, and the store keeps none", t.ID)
	}
	args, err := taskstate.ReadBlob(ctx, b, t.ArgumentsRef.Key)
	if err != nil {
		return nil, fmt.Errorf("producer: reading the arguments of %s: %w", t.ID, err)
	}
	return args, nil
}
