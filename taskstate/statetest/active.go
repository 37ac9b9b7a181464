package statetest

import (
	"testing"
	"time"

	"github.com/mcpqueue/mcpqueue/taskstate"
)

// countActive: an owner's active tasks are counted, up to the limit, and
// nobody else's; a task that ends stops counting.
func (s *suite) countActive(t *testing.T, e *env) {
	c := e.store.(taskstate.ActiveCounter)
	count := func(owner string, limit int) int {
		t.Helper()
		n, err := c.CountActive(e.ctx, owner, limit)
		if err != nil {
			t.Fatalf("CountActive(%q, %d): %v", owner, limit, err)
		}
		return n
	}
	if n := count("alice", 0); n != 0 {
		t.Fatalf("CountActive(alice) of an empty store = %d", n)
	}
	var alice []string
	for i := range 5 {
		task := newTask()
		task.Owner = "alice"
		e.create(t, task)
		alice = append(alice, task.ID)
		if i >= 3 {
			e.finish(t, task.ID, taskstate.Completed)
		}
	}
	bob := newTask()
	bob.Owner = "bob"
	e.create(t, bob)
	e.create(t, newTask()) // ownerless
	e.mutate(t, alice[1], func(x *taskstate.Task) { x.Status = taskstate.InputRequired })
	for _, tc := range []struct {
		owner       string
		limit, want int
	}{
		{"alice", 0, 3}, {"alice", 10, 3}, {"alice", 3, 3}, {"alice", 2, 2},
		{"bob", 0, 1}, {"carol", 0, 0}, {"", 0, 0},
	} {
		if n := count(tc.owner, tc.limit); n != tc.want {
			t.Errorf("CountActive(%q, %d) = %d, want %d", tc.owner, tc.limit, n, tc.want)
		}
	}
	e.finish(t, alice[0], taskstate.Cancelled)
	e.finish(t, alice[1], taskstate.Failed)
	if n := count("alice", 0); n != 1 {
		t.Fatalf("CountActive(alice) after two of three ended = %d, want 1", n)
	}
}

// lease: one holder at a time; the holder renews; another takes it once it
// expires.
func (s *suite) lease(t *testing.T, e *env) {
	l := e.store.(taskstate.Leaser)
	take := func(name, holder string, ttl time.Duration) bool {
		t.Helper()
		ok, err := l.Lease(e.ctx, name, holder, ttl)
		if err != nil {
			t.Fatalf("Lease(%s, %s): %v", name, holder, err)
		}
		return ok
	}
	if !take("reaper", "api-1", time.Second) {
		t.Fatal("Lease of a free lease was refused")
	}
	if take("reaper", "api-2", time.Second) {
		t.Fatal("Lease taken by a second holder while the first holds it")
	}
	if !take("reaper", "api-1", time.Second) {
		t.Fatal("the holder could not renew its lease")
	}
	if !take("other", "api-2", time.Second) {
		t.Fatal("a lease of another name was refused")
	}
	if _, err := l.Lease(e.ctx, "bad name", "api-1", time.Second); err == nil {
		t.Fatal("Lease accepted a name with a space")
	}
	eventually(t, s.opts.Wait, "api-2 taking the expired lease", func() (bool, error) {
		return l.Lease(e.ctx, "reaper", "api-2", time.Minute)
	})
	if take("reaper", "api-1", time.Second) {
		t.Fatal("the old holder took the lease back from the new one")
	}
}
