package statetest

import (
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/mcpqueue/mcpqueue/taskstate"
)

// gone waits until the record id has expired.
func (s *suite) gone(t *testing.T, e *env, id, what string) {
	t.Helper()
	eventually(t, terminalTTL+s.opts.Wait, what, func() (bool, error) {
		_, err := e.store.Get(e.ctx, id)
		if errors.Is(err, taskstate.ErrNotFound) {
			return true, nil
		}
		return false, err
	})
}

// activeOutlivesTTL: an active record (working or input_required) left
// alone for well over its TTL is still there, untouched, while terminal
// records with the same TTL expire around it. No clock is trusted: the
// expiry of a record turned terminal after the active ones were last
// written is what proves a TTL has passed.
func (s *suite) activeOutlivesTTL(t *testing.T, e *env) {
	ttlMs := terminalTTL.Milliseconds()
	working, asking, first, second := newTask(), newTask(), newTask(), newTask()
	for _, task := range []*taskstate.Task{working, asking, first, second} {
		task.TTLMs = ttlMs
		e.create(t, task)
	}
	asked := e.mutate(t, asking.ID, func(t *taskstate.Task) {
		t.Status = taskstate.InputRequired
		t.InputRequests = map[string]json.RawMessage{"k": json.RawMessage(`{"method":"elicitation/create"}`)}
	})
	// The active records' last writes are behind us. One TTL after the
	// first terminal write, and another after the second, they are older
	// than two TTLs.
	e.mutate(t, first.ID, func(t *taskstate.Task) { t.Status = taskstate.Completed })
	s.gone(t, e, first.ID, "expiry of the first terminal record")
	e.mutate(t, second.ID, func(t *taskstate.Task) { t.Status = taskstate.Cancelled })
	s.gone(t, e, second.ID, "expiry of the second terminal record")

	sameRecord(t, "working record older than two TTLs", e.get(t, working.ID), working)
	sameRecord(t, "input_required record older than two TTLs", e.get(t, asking.ID), asked)

	// Retention starts when the old record ends.
	e.mutate(t, working.ID, func(t *taskstate.Task) { t.Status = taskstate.Failed })
	s.gone(t, e, working.ID, "expiry of the old record once terminal")
}

func (s *suite) terminalTTL(t *testing.T, e *env) {
	ttlMs := terminalTTL.Milliseconds()
	expiring := newTask()
	expiring.TTLMs = ttlMs
	active := newTask()
	active.TTLMs = ttlMs
	forever := newTask()
	forever.TTLMs = 0 // unlimited
	for _, task := range []*taskstate.Task{expiring, active, forever} {
		e.create(t, task)
	}

	turned := time.Now()
	e.mutate(t, expiring.ID, func(t *taskstate.Task) { t.Status = taskstate.Completed })
	// An active record that is being written to is no closer to expiry.
	e.mutate(t, active.ID, func(t *taskstate.Task) { t.StatusMessage = "still going" })
	e.mutate(t, forever.ID, func(t *taskstate.Task) { t.Status = taskstate.Completed })
	if _, err := e.store.Get(e.ctx, expiring.ID); err != nil {
		t.Fatalf("terminal record gone right after turning terminal: %v", err)
	}

	eventually(t, terminalTTL+s.opts.Wait, "expiry of the terminal record", func() (bool, error) {
		_, err := e.store.Get(e.ctx, expiring.ID)
		if errors.Is(err, taskstate.ErrNotFound) {
			return true, nil
		}
		return false, err
	})
	if gone := time.Since(turned); gone < terminalTTL-100*time.Millisecond {
		t.Fatalf("terminal record with a %s TTL expired after only %s", terminalTTL, gone)
	}

	// The active record is older than the TTL by now and must still be here.
	if got := e.get(t, active.ID); got.Status != taskstate.Working {
		t.Fatalf("active record status %s, want working", got.Status)
	}
	if got := e.get(t, forever.ID); got.Status != taskstate.Completed {
		t.Fatalf("terminal record with TTL 0 has status %s, want completed", got.Status)
	}
	// Retention counts from turning terminal, not from creation: the active
	// record, created more than a TTL ago, survives its own terminal write.
	e.mutate(t, active.ID, func(t *taskstate.Task) { t.Status = taskstate.Failed })
	if got := e.get(t, active.ID); got.Status != taskstate.Failed {
		t.Fatalf("record just turned terminal has status %s, want failed", got.Status)
	}
}
