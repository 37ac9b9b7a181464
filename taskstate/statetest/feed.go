package statetest

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/mcpqueue/mcpqueue/taskstate"
)

// feed is the Feed contract (Features.Feed).
func (s *suite) feed(t *testing.T, e *env) {
	f := e.store.(taskstate.Feed)
	t.Run("CreatesAndUpdates", func(t *testing.T) { s.feedCreatesAndUpdates(t, e, f) })
	t.Run("SlowConsumer", func(t *testing.T) { s.feedSlowConsumer(t, e, f) })
	t.Run("ContextCancel", func(t *testing.T) { s.feedContextCancel(t, e, f) })
}

// recv takes the next change or fails after the suite's wait.
func (s *suite) recv(t *testing.T, ch <-chan *taskstate.Task, what string) (*taskstate.Task, bool) {
	t.Helper()
	select {
	case got, ok := <-ch:
		return got, ok
	case <-time.After(s.opts.Wait):
		t.Fatalf("no change from the feed within %s while waiting for %s", s.opts.Wait, what)
		return nil, false
	}
}

func (s *suite) feedCreatesAndUpdates(t *testing.T, e *env, f taskstate.Feed) {
	before := e.create(t, newTask()) // written before Changes: never delivered
	ctx, cancel := context.WithCancel(e.ctx)
	defer cancel()
	ch, err := f.Changes(ctx)
	if err != nil {
		t.Fatalf("Changes: %v", err)
	}
	a := newTask()
	a.Owner = "alice"
	e.create(t, a)
	e.mutate(t, a.ID, func(x *taskstate.Task) { x.Status = taskstate.InputRequired })
	final := e.mutate(t, a.ID, func(x *taskstate.Task) { x.Status = taskstate.Completed })
	b := e.create(t, newTask())

	var lastA uint64
	var sawB bool
	for lastA < final.Revision || !sawB {
		got, ok := s.recv(t, ch, "the writes after Changes")
		if !ok {
			t.Fatal("the feed closed while its context was live")
		}
		switch {
		case got == nil:
			t.Fatal("the feed reported lost changes to a consumer that keeps up")
		case got.ID == before.ID:
			t.Fatalf("the feed delivered %s, written before Changes was called", before.ID)
		case got.ID == a.ID:
			if got.Revision <= lastA {
				t.Fatalf("versions of %s out of order: revision %d after %d", a.ID, got.Revision, lastA)
			}
			// Which versions arrive depends on how far behind the reader
			// is: unread versions of one record collapse into the newest
			// (the writes above all happen before the first receive), so
			// only the order and the final version are certain.
			lastA = got.Revision
			if lastA == final.Revision {
				sameRecord(t, "final version on the feed", got, final)
			}
		case got.ID == b.ID:
			sameRecord(t, "created record on the feed", got, b)
			sawB = true
		}
	}
}

// feedSlowConsumer: writers go on while nobody reads; the consumer then gets
// the newest version of the busy record (or nil: go rescan), never an old
// one last.
func (s *suite) feedSlowConsumer(t *testing.T, e *env, f taskstate.Feed) {
	ctx, cancel := context.WithCancel(e.ctx)
	defer cancel()
	ch, err := f.Changes(ctx)
	if err != nil {
		t.Fatalf("Changes: %v", err)
	}
	busy := e.create(t, newTask())
	done := make(chan struct{})
	var last *taskstate.Task
	var werr error
	go func() {
		defer close(done)
		for i := range 200 {
			last, werr = taskstate.Mutate(e.ctx, e.store, busy.ID, time.Now, func(x *taskstate.Task) error {
				x.StatusMessage = fmt.Sprintf("step %d", i)
				return nil
			})
			if werr != nil {
				return
			}
		}
	}()
	select {
	case <-done:
		if werr != nil {
			t.Fatalf("Mutate: %v", werr)
		}
	case <-time.After(3 * s.opts.Wait):
		t.Fatal("200 writes did not finish while a feed consumer was not reading: the feed blocks writers")
	}
	for {
		got, ok := s.recv(t, ch, "the newest version of the busy record")
		if !ok {
			t.Fatal("the feed closed while its context was live")
		}
		if got == nil {
			return // dropped, said so: the consumer rescans
		}
		if got.ID == busy.ID && got.Revision == last.Revision {
			sameRecord(t, "newest version after a backlog", got, last)
			return
		}
	}
}

func (s *suite) feedContextCancel(t *testing.T, e *env, f taskstate.Feed) {
	ctx, cancel := context.WithCancel(e.ctx)
	ch, err := f.Changes(ctx)
	if err != nil {
		t.Fatalf("Changes: %v", err)
	}
	cancel()
	for {
		select {
		case _, ok := <-ch:
			if !ok {
				return
			}
		case <-time.After(s.opts.Wait):
			t.Fatalf("the feed did not close within %s of its context ending", s.opts.Wait)
		}
	}
}
