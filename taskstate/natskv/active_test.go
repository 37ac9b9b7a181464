package natskv_test

import (
	"slices"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/mcpqueue/mcpqueue/taskstate"
)

// The active index: an owner's active tasks are counted from its entries
// (one per active task, whatever the owner's history), an entry left by a
// terminal write that did not finish is dropped by the count that reaches
// the limit and by an active Scan, and an active record written without
// an entry (by a version before the index) is found by the first active
// Scan and indexed.
func TestActiveIndex(t *testing.T) {
	t.Parallel()
	s, js, name := memoryStore(t)
	ctx := t.Context()
	tasks, err := js.KeyValue(ctx, name+"_tasks")
	if err != nil {
		t.Fatal(err)
	}
	owners, err := js.Stream(ctx, "KV_"+name+"_tasks_owners")
	if err != nil {
		t.Fatal(err)
	}
	entries := func() int {
		t.Helper()
		info, err := owners.Info(ctx, jetstream.WithSubjectFilter("$KV."+name+"_tasks_owners.a.>"))
		if err != nil {
			t.Fatal(err)
		}
		return len(info.State.Subjects)
	}
	count := func(owner string, limit int) int {
		t.Helper()
		n, err := s.CountActive(ctx, owner, limit)
		if err != nil {
			t.Fatalf("CountActive(%s, %d): %v", owner, limit, err)
		}
		return n
	}
	const total, live = 300, 4
	var active []string
	for i := range total {
		task := newTask()
		task.Owner = "alice"
		if i%7 == 0 {
			task.Owner = "" // ownerless tasks are in the index too (the reaper's)
		}
		if err := s.Create(ctx, task); err != nil {
			t.Fatal(err)
		}
		if len(active) < live && task.Owner != "" {
			active = append(active, task.ID)
			continue
		}
		setStatus(t, s, task.ID, taskstate.Completed)
	}
	if n := entries(); n != live {
		t.Fatalf("the active index holds %d entries after %d tasks, %d of them active", n, total, live)
	}
	if n := count("alice", 1000); n != live {
		t.Fatalf("CountActive(alice) = %d, want %d", n, live)
	}

	// A terminal version written without the index's step (the writer died
	// between the record and the entry's purge).
	stale := newTask()
	stale.Owner = "alice"
	if err := s.Create(ctx, stale); err != nil {
		t.Fatal(err)
	}
	done := stale.Clone()
	done.Status = taskstate.Completed
	b, err := taskstate.Encode(done)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tasks.Put(ctx, stale.ID, b); err != nil {
		t.Fatal(err)
	}
	if n := count("alice", 1000); n != live+1 {
		t.Fatalf("CountActive below the limit = %d, want %d (a stale entry counts until the limit)", n, live+1)
	}
	if n := count("alice", live+1); n != live {
		t.Fatalf("CountActive at the limit = %d, want %d, the stale entry dropped", n, live)
	}
	if n := entries(); n != live {
		t.Fatalf("the active index holds %d entries after the count dropped the stale one, want %d", n, live)
	}

	// An active record of an older version: no entry until the first
	// active Scan, which visits it and indexes it.
	old := newTask()
	old.Owner = "bob"
	b, err = taskstate.Encode(old)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tasks.Put(ctx, old.ID, b); err != nil {
		t.Fatal(err)
	}
	if n := count("bob", 0); n != 0 {
		t.Fatalf("CountActive(bob) before any Scan = %d, want 0", n)
	}
	var got []string
	if err := s.Scan(ctx, true, func(task *taskstate.Task) bool { got = append(got, task.ID); return true }); err != nil {
		t.Fatal(err)
	}
	want := append(slices.Clone(active), old.ID)
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Fatalf("Scan(active) visited %v, want %v", got, want)
	}
	if n := count("bob", 0); n != 1 {
		t.Fatalf("CountActive(bob) after the first active Scan = %d, want 1", n)
	}
	// Its owner-index entry too (a creator that died between Create's
	// acks may have left either out).
	if listed, _, err := s.List(ctx, "bob", "", 10); err != nil || len(listed) != 1 || listed[0].ID != old.ID {
		t.Fatalf("List(bob) after the first active Scan = %d tasks, %v; want the old record", len(listed), err)
	}
}

func newTask() *taskstate.Task {
	now := time.Now().UTC()
	return &taskstate.Task{ID: taskstate.NewID(), Tool: "echo", Status: taskstate.Working, CreatedAt: now, LastUpdatedAt: now, TTLMs: 60_000}
}

func setStatus(tb testing.TB, s taskstate.Store, id string, st taskstate.Status) {
	tb.Helper()
	if _, err := taskstate.Mutate(tb.Context(), s, id, time.Now, func(t *taskstate.Task) error {
		t.Status = st
		return nil
	}); err != nil {
		tb.Fatal(err)
	}
}
