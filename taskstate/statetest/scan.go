package statetest

import (
	"errors"
	"slices"
	"testing"

	"github.com/mcpqueue/mcpqueue/taskstate"
)

// scanIDs returns the ids Scan visits, sorted.
func (e *env) scanIDs(t *testing.T, active bool) []string {
	t.Helper()
	var got []string
	if err := e.store.Scan(e.ctx, active, func(task *taskstate.Task) bool {
		got = append(got, task.ID)
		return true
	}); err != nil {
		t.Fatalf("Scan(active=%v): %v", active, err)
	}
	slices.Sort(got)
	return got
}

// finish turns the task terminal with status.
func (e *env) finish(t *testing.T, id string, status taskstate.Status) {
	t.Helper()
	e.mutate(t, id, func(task *taskstate.Task) { task.Status = status })
}

func (s *suite) scanActiveAndAll(t *testing.T, e *env) {
	if got := e.scanIDs(t, false); len(got) != 0 {
		t.Fatalf("Scan of an empty store visited %v", got)
	}
	var active, all []string
	for i := range 7 {
		task := newTask()
		if i%2 == 1 {
			task.Owner = "alice" // owners do not matter to Scan
		}
		e.create(t, task)
		all = append(all, task.ID)
		switch i % 3 {
		case 0:
			e.finish(t, task.ID, taskstate.Completed)
		case 1:
			e.mutate(t, task.ID, func(x *taskstate.Task) { x.Status = taskstate.InputRequired })
			active = append(active, task.ID)
		default:
			active = append(active, task.ID)
		}
	}
	slices.Sort(active)
	slices.Sort(all)
	if got := e.scanIDs(t, true); !slices.Equal(got, active) {
		t.Fatalf("Scan(active) visited %v, want the active %v", got, active)
	}
	if got := e.scanIDs(t, false); !slices.Equal(got, all) {
		t.Fatalf("Scan(all) visited %v, want %v", got, all)
	}
	// The record Scan hands over is the stored one, revision included.
	id := active[0]
	want := e.get(t, id)
	_ = e.store.Scan(e.ctx, true, func(task *taskstate.Task) bool {
		if task.ID == id {
			sameRecord(t, "scanned record", task, want)
		}
		return true
	})
}

func (s *suite) scanStops(t *testing.T, e *env) {
	for range 5 {
		e.create(t, newTask())
	}
	n := 0
	if err := e.store.Scan(e.ctx, false, func(*taskstate.Task) bool { n++; return n < 2 }); err != nil {
		t.Fatalf("Scan: %v", err)
	}
	if n != 2 {
		t.Fatalf("Scan called fn %d times after it returned false on the 2nd, want 2", n)
	}
}

func (s *suite) deleteTerminal(t *testing.T, e *env) {
	done := newTask()
	done.Owner = "alice"
	e.create(t, done)
	e.finish(t, done.ID, taskstate.Cancelled)
	live := e.create(t, newTask())

	if err := e.store.Delete(e.ctx, live.ID); !errors.Is(err, taskstate.ErrInvalidChange) {
		t.Fatalf("Delete(active): %v, want ErrInvalidChange", err)
	}
	if got := e.get(t, live.ID); got.Revision != live.Revision {
		t.Fatalf("refused Delete changed the record: revision %d, want %d", got.Revision, live.Revision)
	}
	if err := e.store.Delete(e.ctx, done.ID); err != nil {
		t.Fatalf("Delete(terminal): %v", err)
	}
	if _, err := e.store.Get(e.ctx, done.ID); !errors.Is(err, taskstate.ErrNotFound) {
		t.Fatalf("Get after Delete: %v, want ErrNotFound", err)
	}
	if err := e.store.Delete(e.ctx, done.ID); !errors.Is(err, taskstate.ErrNotFound) {
		t.Fatalf("second Delete: %v, want ErrNotFound", err)
	}
	if err := e.store.Delete(e.ctx, taskstate.NewID()); !errors.Is(err, taskstate.ErrNotFound) {
		t.Fatalf("Delete(unknown): %v, want ErrNotFound", err)
	}
	if got := e.scanIDs(t, false); !slices.Equal(got, []string{live.ID}) {
		t.Fatalf("Scan after Delete visited %v, want only %s", got, live.ID)
	}
	if page, _ := e.list(t, "alice", "", 10); len(page) != 0 {
		t.Fatalf("List after Delete still shows %v", ids(page))
	}
}
