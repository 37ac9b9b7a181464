package redisstate_test

import (
	"testing"

	"github.com/mcpqueue/mcpqueue/internal/redistest"
	"github.com/mcpqueue/mcpqueue/taskstate"
	"github.com/mcpqueue/mcpqueue/taskstate/redisstate"
)

// Counting an owner's active tasks is one SCARD of its active set, however
// many finished records it has; a stale member (a record finished by an
// older version, or gone) is dropped by the count that reaches the limit,
// not counted against the owner.
func TestCountActiveOwnerSet(t *testing.T) {
	t.Parallel()
	counter := &commandCounter{calls: map[string]int{}}
	c := redistest.Client(t)
	c.AddHook(counter)
	s, prefix := prefixedStore(t, c)
	ctx := t.Context()
	const total, live = 500, 4
	for i := range total {
		task := newTask()
		task.Owner = "alice"
		if err := s.Create(ctx, task); err != nil {
			t.Fatal(err)
		}
		if i >= live {
			setStatus(t, s, task.ID, taskstate.Completed)
		}
	}
	counter.reset()
	if n, err := s.CountActive(ctx, "alice", 1000); err != nil || n != live {
		t.Fatalf("CountActive(alice) = %d, %v; want %d", n, err, live)
	}
	if calls, args := counter.reset(); calls["scard"] != 1 || args > 4 {
		t.Fatalf("CountActive below the limit sent %v (%d arguments), want one SCARD", calls, args)
	}

	// Stale members: an id whose record is gone, and a task finished the
	// way an older version's script does it (the set untouched).
	set := prefix + "owner:{" + redisstate.OwnerHash("alice") + "}:active"
	if err := c.SAdd(ctx, set, "gone_gone_gone_gone_1").Err(); err != nil {
		t.Fatal(err)
	}
	if n, _ := s.CountActive(ctx, "alice", 1000); n != live+1 {
		t.Fatalf("CountActive below the limit = %d, want %d (a stale member counts until the limit)", n, live+1)
	}
	if n, err := s.CountActive(ctx, "alice", live+1); err != nil || n != live {
		t.Fatalf("CountActive at the limit = %d, %v; want %d, the stale member dropped", n, err, live)
	}
	if m, _ := c.SIsMember(ctx, set, "gone_gone_gone_gone_1").Result(); m {
		t.Fatal("the stale member is still in the owner's active set")
	}
}
