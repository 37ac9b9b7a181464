package statetest

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/mcpqueue/mcpqueue/taskstate"
)

// owned returns a new task of owner created at base + i ms.
func owned(owner string, base time.Time, i int) *taskstate.Task {
	t := newTask()
	t.Owner = owner
	t.CreatedAt = base.Add(time.Duration(i) * time.Millisecond)
	t.LastUpdatedAt = t.CreatedAt
	return t
}

// list calls List and fails the test on error.
func (e *env) list(t *testing.T, owner, cursor string, limit int) ([]*taskstate.Task, string) {
	t.Helper()
	got, next, err := e.store.List(e.ctx, owner, cursor, limit)
	if err != nil {
		t.Fatalf("List(%q, %q, %d): %v", owner, cursor, limit, err)
	}
	return got, next
}

// listAll pages through owner's tasks with limit, failing on a page larger
// than limit, and returns the pages' sizes and the tasks.
func (e *env) listAll(t *testing.T, owner string, limit int) ([]int, []*taskstate.Task) {
	t.Helper()
	var (
		sizes  []int
		all    []*taskstate.Task
		cursor string
	)
	for {
		page, next := e.list(t, owner, cursor, limit)
		if len(page) > limit {
			t.Fatalf("List(%q, limit %d) returned %d tasks", owner, limit, len(page))
		}
		sizes = append(sizes, len(page))
		all = append(all, page...)
		if next == "" {
			return sizes, all
		}
		if len(sizes) > 100 {
			t.Fatalf("List(%q) still returns cursors after 100 pages", owner)
		}
		cursor = next
	}
}

// ids returns the tasks' ids.
func ids(tasks []*taskstate.Task) []string {
	out := make([]string, len(tasks))
	for i, t := range tasks {
		out[i] = t.ID
	}
	return out
}

// sameList fails unless got holds want's records, in that order.
func sameList(t *testing.T, what string, got, want []*taskstate.Task) {
	t.Helper()
	if g, w := strings.Join(ids(got), ","), strings.Join(ids(want), ","); g != w {
		t.Fatalf("%s: listed\n %s\nwant\n %s", what, g, w)
	}
	for i := range got {
		sameRecord(t, fmt.Sprintf("%s: task %d", what, i), got[i], want[i])
	}
}

func (s *suite) listPages(t *testing.T, e *env) {
	base := time.Now().UTC().Add(-time.Hour)
	var alice, bob []*taskstate.Task
	for i := range 7 {
		alice = append(alice, e.create(t, owned("alice", base, 2*i)))
		if i%3 == 0 {
			bob = append(bob, e.create(t, owned("bob", base, 2*i+1)))
		}
		e.create(t, owned("", base, 2*i+1)) // never listed
	}
	// A list shows each record as it is now.
	alice[1] = e.mutate(t, alice[1].ID, func(t *taskstate.Task) {
		t.Status = taskstate.InputRequired
		t.StatusMessage = "waiting"
	})
	alice[4] = e.mutate(t, alice[4].ID, func(t *taskstate.Task) { t.Status = taskstate.Completed })

	sizes, got := e.listAll(t, "alice", 3)
	if fmt.Sprint(sizes) != "[3 3 1]" {
		t.Fatalf("7 tasks in pages of 3 came in pages of %v, want [3 3 1]", sizes)
	}
	sameList(t, "alice's tasks in pages of 3", got, alice)

	// A page that ends with the last task has no cursor.
	sizes, got = e.listAll(t, "bob", len(bob))
	if fmt.Sprint(sizes) != fmt.Sprint([]int{len(bob)}) {
		t.Fatalf("bob's %d tasks with limit %d came in pages of %v, want one page", len(bob), len(bob), sizes)
	}
	sameList(t, "bob's tasks", got, bob)
	_, got = e.listAll(t, "bob", 100)
	sameList(t, "bob's tasks (limit 100)", got, bob)
	sizes, got = e.listAll(t, "alice", 1)
	if len(sizes) != 7 {
		t.Fatalf("7 tasks in pages of 1 came in pages of %v", sizes)
	}
	sameList(t, "alice's tasks in pages of 1", got, alice)

	if got, next := e.list(t, "carol", "", 10); len(got) != 0 || next != "" {
		t.Fatalf("List of an owner without tasks = %v, %q; want nothing", ids(got), next)
	}
	// Owners are compared exactly.
	if got, _ := e.list(t, "Alice", "", 10); len(got) != 0 {
		t.Fatalf("List(Alice) = %v; owners are case-sensitive", ids(got))
	}
}

// Tasks created in the same nanosecond still come once each, in a stable
// order, however they are paged.
func (s *suite) listSameCreatedAt(t *testing.T, e *env) {
	at := time.Now().UTC()
	var want []*taskstate.Task
	for range 5 {
		want = append(want, e.create(t, owned("alice", at, 0)))
	}
	_, all := e.listAll(t, "alice", 10)
	if len(all) != len(want) {
		t.Fatalf("listed %v, want the %d tasks", ids(all), len(want))
	}
	for _, limit := range []int{1, 2, 3, 4} {
		_, got := e.listAll(t, "alice", limit)
		sameList(t, fmt.Sprintf("same-time tasks in pages of %d", limit), got, all)
	}
}

func (s *suite) listNoOwner(t *testing.T, e *env) {
	base := time.Now().UTC()
	for i := range 3 {
		e.create(t, owned("", base, i))
	}
	alice := e.create(t, owned("alice", base, 3))
	got, next := e.list(t, "", "", 10)
	if len(got) != 0 || next != "" {
		t.Fatalf(`List("") = %v, %q; want nothing`, ids(got), next)
	}
	got, _ = e.list(t, "alice", "", 10)
	sameList(t, "alice's tasks among unowned ones", got, []*taskstate.Task{alice})
}

func (s *suite) listBadCursor(t *testing.T, e *env) {
	base := time.Now().UTC()
	for i := range 2 {
		e.create(t, owned("alice", base, 2*i))
		e.create(t, owned("bob", base, 2*i+1))
	}
	_, aliceCursor := e.list(t, "alice", "", 1)
	_, bobCursor := e.list(t, "bob", "", 1)
	if aliceCursor == "" || bobCursor == "" {
		t.Fatalf("first pages of 1 of 2 tasks have cursors %q and %q; want cursors", aliceCursor, bobCursor)
	}
	if aliceCursor == bobCursor {
		t.Fatal("two owners' cursors are the same")
	}
	bad := []string{
		bobCursor, // another owner's
		"x", "not a cursor", "%%%", "..", "0", "-1", "bob",
		aliceCursor[:len(aliceCursor)/2], // truncated
		"A" + aliceCursor,                // shifted
		strings.Repeat("QUFB", 30),
	}
	for _, c := range bad {
		got, next, err := e.store.List(e.ctx, "alice", c, 10)
		if !errors.Is(err, taskstate.ErrBadCursor) {
			t.Errorf("List(alice, %q) = %v, %q, %v; want ErrBadCursor", c, ids(got), next, err)
		}
	}
	// The good cursor still works after the bad ones.
	if got, _ := e.list(t, "alice", aliceCursor, 10); len(got) != 1 {
		t.Fatalf("List(alice, cursor) = %v, want the second task", ids(got))
	}
}

// A Create refused as a duplicate lists nothing: not another owner's task
// under the caller, nor the task twice.
func (s *suite) listDuplicateCreate(t *testing.T, e *env) {
	base := time.Now().UTC()
	mine := e.create(t, owned("alice", base, 0))
	for i, owner := range []string{"mallory", "alice"} {
		dup := owned(owner, base, i+1)
		dup.ID = mine.ID
		if err := e.store.Create(e.ctx, dup); !errors.Is(err, taskstate.ErrExists) {
			t.Fatalf("Create of an existing id by %s: err = %v, want ErrExists", owner, err)
		}
	}
	if got, next := e.list(t, "mallory", "", 10); len(got) != 0 || next != "" {
		t.Fatalf("List(mallory) after a refused Create = %v, %q; want nothing", ids(got), next)
	}
	_, got := e.listAll(t, "alice", 1)
	sameList(t, "alice's tasks after refused Creates", got, []*taskstate.Task{mine})
}

func (s *suite) listTerminalTTL(t *testing.T, e *env) {
	base := time.Now().UTC().Add(-time.Hour)
	first := e.create(t, owned("alice", base, 0))
	expiring := owned("alice", base, 1)
	expiring.TTLMs = terminalTTL.Milliseconds()
	e.create(t, expiring)
	kept := e.create(t, owned("alice", base, 2)) // terminal, 60s TTL
	active := owned("alice", base, 3)
	active.TTLMs = terminalTTL.Milliseconds()
	e.create(t, active)

	turned := time.Now()
	expiring = e.mutate(t, expiring.ID, func(t *taskstate.Task) { t.Status = taskstate.Completed })
	kept = e.mutate(t, kept.ID, func(t *taskstate.Task) { t.Status = taskstate.Failed })
	_, all := e.listAll(t, "alice", 10)
	sameList(t, "tasks right after two turned terminal", all, []*taskstate.Task{first, expiring, kept, active})
	// A cursor that points at the expiring task.
	_, cursor := e.list(t, "alice", "", 2)
	if cursor == "" {
		t.Fatal("first page of 2 of 4 tasks has no cursor")
	}

	eventually(t, terminalTTL+s.opts.Wait, "the expired task leaving the list", func() (bool, error) {
		got, _, err := e.store.List(e.ctx, "alice", "", 10)
		if err != nil {
			return false, err
		}
		for _, g := range got {
			if g.ID == expiring.ID {
				return false, nil
			}
		}
		return true, nil
	})
	if gone := time.Since(turned); gone < terminalTTL-100*time.Millisecond {
		t.Fatalf("terminal task with a %s TTL left the list after only %s", terminalTTL, gone)
	}
	_, all = e.listAll(t, "alice", 10)
	sameList(t, "tasks after one expired", all, []*taskstate.Task{first, kept, active})
	_, all = e.listAll(t, "alice", 1)
	sameList(t, "tasks after one expired, in pages of 1", all, []*taskstate.Task{first, kept, active})
	// A cursor stays good when the task it points at is gone.
	got, next, err := e.store.List(e.ctx, "alice", cursor, 10)
	if err != nil {
		t.Fatalf("List with a cursor at an expired task: %v", err)
	}
	sameList(t, "page after the expired task", got, []*taskstate.Task{kept, active})
	if next != "" {
		t.Fatalf("last page has cursor %q", next)
	}
}
