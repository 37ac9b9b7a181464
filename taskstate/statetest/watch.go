package statetest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/mcpqueue/mcpqueue/taskstate"
)

// next receives one version from ch, failing after wait.
func next(t *testing.T, ch <-chan *taskstate.Task, wait time.Duration, what string) *taskstate.Task {
	t.Helper()
	select {
	case v, ok := <-ch:
		if !ok {
			t.Fatalf("%s: watch channel closed early", what)
		}
		if v == nil {
			t.Fatalf("%s: watch delivered nil", what)
		}
		return v
	case <-time.After(wait):
		t.Fatalf("%s: nothing delivered within %s", what, wait)
		return nil
	}
}

// closes fails unless ch closes within wait without delivering anything.
func closes(t *testing.T, ch <-chan *taskstate.Task, wait time.Duration, what string) {
	t.Helper()
	select {
	case v, ok := <-ch:
		if ok {
			t.Fatalf("%s: got another version (status %s, revision %d) where the channel should close", what, v.Status, v.Revision)
		}
	case <-time.After(wait):
		t.Fatalf("%s: watch channel still open after %s", what, wait)
	}
}

func (s *suite) watchVersions(t *testing.T, e *env) {
	task := e.create(t, newTask())
	wait := s.opts.Wait

	// Two watchers of the same record see the same versions.
	ch1, err := e.store.Watch(e.ctx, task.ID)
	if err != nil {
		t.Fatalf("Watch: %v", err)
	}
	ch2, err := e.store.Watch(e.ctx, task.ID)
	if err != nil {
		t.Fatalf("second Watch: %v", err)
	}
	chans := []<-chan *taskstate.Task{ch1, ch2}
	expect := func(what string, want *taskstate.Task) {
		t.Helper()
		for i, ch := range chans {
			sameRecord(t, fmt.Sprintf("watcher %d: %s", i+1, what), next(t, ch, wait, what), want)
		}
	}

	expect("current version", task)
	v2 := e.mutate(t, task.ID, func(t *taskstate.Task) { t.StatusMessage = "halfway" })
	expect("progress update", v2)
	v3 := e.mutate(t, task.ID, func(t *taskstate.Task) {
		t.Status = taskstate.InputRequired
		t.InputRequests = map[string]json.RawMessage{"k": json.RawMessage(`{"q":"?"}`)}
	})
	expect("input_required", v3)
	v4 := e.mutate(t, task.ID, func(t *taskstate.Task) {
		t.Status = taskstate.Working
		t.InputRequests = nil
		t.InputResponses = map[string]json.RawMessage{"k": json.RawMessage(`{"a":"!"}`)}
	})
	expect("back to working", v4)
	v5 := e.mutate(t, task.ID, func(t *taskstate.Task) {
		t.Status = taskstate.Completed
		t.Result = json.RawMessage(`{"content":[]}`)
	})
	expect("terminal version", v5)
	for i, ch := range chans {
		closes(t, ch, wait, fmt.Sprintf("watcher %d after terminal", i+1))
	}
}

func (s *suite) watchBurstEndsTerminal(t *testing.T, e *env) {
	task := e.create(t, newTask())
	ch, err := e.store.Watch(e.ctx, task.ID)
	if err != nil {
		t.Fatalf("Watch: %v", err)
	}
	first := next(t, ch, s.opts.Wait, "current version")
	sameRecord(t, "first delivery", first, task)

	// A burst of writes the watcher does not keep up with: it may skip
	// intermediate versions, but never goes backwards and always ends with
	// the terminal one.
	for i := range 10 {
		e.mutate(t, task.ID, func(t *taskstate.Task) { t.StatusMessage = fmt.Sprintf("step %d", i) })
	}
	final := e.mutate(t, task.ID, func(t *taskstate.Task) { t.Status = taskstate.Failed })

	last := first
	deadline := time.After(s.opts.Wait)
	for {
		select {
		case v, ok := <-ch:
			if !ok {
				if last.Revision != final.Revision {
					t.Fatalf("watch closed after revision %d (status %s); the terminal revision %d was never delivered", last.Revision, last.Status, final.Revision)
				}
				return
			}
			if v.Revision <= last.Revision {
				t.Fatalf("watch went from revision %d to %d", last.Revision, v.Revision)
			}
			if last.Status.Terminal() {
				t.Fatalf("watch delivered revision %d after the terminal one", v.Revision)
			}
			last = v
		case <-deadline:
			t.Fatalf("watch neither delivered the terminal version nor closed within %s (last revision %d)", s.opts.Wait, last.Revision)
		}
	}
}

func (s *suite) watchAlreadyTerminal(t *testing.T, e *env) {
	task := e.create(t, newTask())
	done := e.mutate(t, task.ID, func(t *taskstate.Task) { t.Status = taskstate.Cancelled })
	ch, err := e.store.Watch(e.ctx, task.ID)
	if err != nil {
		t.Fatalf("Watch of a terminal record: %v", err)
	}
	sameRecord(t, "delivered terminal record", next(t, ch, s.opts.Wait, "terminal record"), done)
	closes(t, ch, s.opts.Wait, "watch of a terminal record")
}

func (s *suite) watchContextCancel(t *testing.T, e *env) {
	task := e.create(t, newTask())
	ctx, cancel := context.WithCancel(e.ctx)
	defer cancel()
	ch, err := e.store.Watch(ctx, task.ID)
	if err != nil {
		t.Fatalf("Watch: %v", err)
	}
	next(t, ch, s.opts.Wait, "current version")
	cancel()
	// The channel closes; nothing written before the cancel may still be
	// in flight, so any delivery here is a bug.
	closes(t, ch, s.opts.Wait, "watch after ctx cancel")

	// A cancelled watch leaves the store working for other watchers.
	ch2, err := e.store.Watch(e.ctx, task.ID)
	if err != nil {
		t.Fatalf("Watch after a cancelled one: %v", err)
	}
	next(t, ch2, s.opts.Wait, "current version (second watch)")
	v := e.mutate(t, task.ID, func(t *taskstate.Task) { t.Status = taskstate.Completed })
	sameRecord(t, "second watch", next(t, ch2, s.opts.Wait, "terminal version (second watch)"), v)
}

func (s *suite) watchUnknown(t *testing.T, e *env) {
	for _, id := range []string{taskstate.NewID(), "not a valid id"} {
		ch, err := e.store.Watch(e.ctx, id)
		if !errors.Is(err, taskstate.ErrNotFound) {
			t.Errorf("Watch(%q) = %v, %v; want ErrNotFound", id, ch, err)
		}
	}
}

func (s *suite) followFromBeforeCreate(t *testing.T, e *env) {
	task := newTask()
	ch, err := e.store.Follow(e.ctx, task.ID)
	if err != nil {
		t.Fatalf("Follow of a record not created yet: %v", err)
	}
	created := e.create(t, task)
	sameRecord(t, "the creation", next(t, ch, s.opts.Wait, "the created version"), created)
	done := e.mutate(t, task.ID, func(t *taskstate.Task) { t.Status = taskstate.Completed })
	sameRecord(t, "terminal version", next(t, ch, s.opts.Wait, "terminal version"), done)
	closes(t, ch, s.opts.Wait, "follow after terminal")
	if _, err := e.store.Follow(e.ctx, "not a valid id"); !errors.Is(err, taskstate.ErrNotFound) {
		t.Errorf("Follow of a malformed id = %v, want ErrNotFound", err)
	}
}

func (s *suite) followOnlyLater(t *testing.T, e *env) {
	task := e.create(t, newTask())
	e.mutate(t, task.ID, func(t *taskstate.Task) { t.StatusMessage = "before" })
	ch, err := e.store.Follow(e.ctx, task.ID)
	if err != nil {
		t.Fatalf("Follow: %v", err)
	}
	after := e.mutate(t, task.ID, func(t *taskstate.Task) { t.StatusMessage = "after" })
	sameRecord(t, "first delivery: the version written after Follow", next(t, ch, s.opts.Wait, "later version"), after)
	done := e.mutate(t, task.ID, func(t *taskstate.Task) { t.Status = taskstate.Failed })
	sameRecord(t, "terminal version", next(t, ch, s.opts.Wait, "terminal version"), done)
	closes(t, ch, s.opts.Wait, "follow after terminal")
}
