package taskstate

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
)

// Dead letters and replay (issue #32).

// Meta keys that link a replay and the task it replays, both ways.
const (
	MetaReplayOf   = "io.mcpqueue/replay-of"   // on the replay: the id of the task it runs again
	MetaReplayedBy = "io.mcpqueue/replayed-by" // on the replayed task: the id of its replay
)

// DefaultMaxAttempts is the bound on runs of a record that carries none
// (the workers' and the reaper's default).
const DefaultMaxAttempts = 3

// Dead reports whether t is a dead letter: failed after its last attempt
// (its worker lost on it, or its retries used up), so nothing will run it
// again unless it is replayed. defaultMax is the bound for a record that
// carries no MaxAttempts (0: DefaultMaxAttempts).
func (t *Task) Dead(defaultMax int) bool {
	return t.Status == Failed && t.Runs() >= cmp.Or(t.MaxAttempts, defaultMax, DefaultMaxAttempts)
}

// ReplayOf is the id of the task t replays, "" if it is no replay.
func (t *Task) ReplayOf() string { return t.metaID(MetaReplayOf) }

// ReplayedBy is the id of t's replay, "" if it was not replayed.
func (t *Task) ReplayedBy() string { return t.metaID(MetaReplayedBy) }

func (t *Task) metaID(key string) string {
	var id string
	if raw, ok := t.Meta[key]; !ok || json.Unmarshal(raw, &id) != nil {
		return ""
	}
	return id
}

// MarkReplayed writes on terminal record id that replay replays it
// (MetaReplayedBy): the one change a terminal record allows, made with a
// compare-and-set and written once (a record that names a replay already
// is left alone: ErrSkip). Its retention counts again from this write. An
// active record is ErrInvalidChange.
func MarkReplayed(ctx context.Context, s Store, id, replay string) (*Task, error) {
	for {
		t, err := s.Get(ctx, id)
		if err != nil {
			return nil, err
		}
		if !t.Status.Terminal() {
			return t, fmt.Errorf("%w: %s is %s; only an ended task is replayed", ErrInvalidChange, id, t.Status)
		}
		if t.ReplayedBy() != "" {
			return t, ErrSkip
		}
		next := t.Clone()
		next.Meta = maps.Clone(t.Meta)
		if next.Meta == nil {
			next.Meta = map[string]json.RawMessage{}
		}
		next.Meta[MetaReplayedBy], _ = json.Marshal(replay)
		err = s.Update(ctx, next)
		if errors.Is(err, ErrConflict) {
			continue
		}
		if err != nil {
			return t, err
		}
		return next, nil
	}
}
