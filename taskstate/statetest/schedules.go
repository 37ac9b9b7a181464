package statetest

import (
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/mcpqueue/mcpqueue/taskstate"
)

// schedules (Features.Schedules): schedules round-trip and list by name,
// a put replaces one of the same name, a delete removes it (ErrNotFound
// the second time), and a bad schedule is refused and not stored.
func (s *suite) schedules(t *testing.T, e *env) {
	sc := e.store.(taskstate.Schedules)
	now := time.Now().UTC().Truncate(time.Millisecond)
	b := &taskstate.Schedule{Name: "nightly-b", Tool: "echo", Arguments: json.RawMessage(`{"text":"hi"}`), Cron: "0 3 * * *", Owner: "iss|alice", CreatedAt: now}
	a := &taskstate.Schedule{Name: "a_every", Tool: "echo", Cron: "@every 2s", CreatedAt: now}
	for _, x := range []*taskstate.Schedule{b, a} {
		if err := sc.PutSchedule(e.ctx, x); err != nil {
			t.Fatalf("PutSchedule(%s): %v", x.Name, err)
		}
	}
	for _, bad := range []*taskstate.Schedule{{Name: "has space", Tool: "echo", Cron: "* * * * *"}, {Name: "x", Cron: "* * * * *"}, {Name: "y", Tool: "echo"}, {Name: "z", Tool: "echo", Cron: "* * * * *", Arguments: json.RawMessage(`[1]`)}} {
		if err := sc.PutSchedule(e.ctx, bad); err == nil {
			t.Errorf("PutSchedule(%+v) accepted a bad schedule", bad)
		}
	}
	list := func() []*taskstate.Schedule {
		t.Helper()
		got, err := sc.ListSchedules(e.ctx)
		if err != nil {
			t.Fatalf("ListSchedules: %v", err)
		}
		return got
	}
	got := list()
	if len(got) != 2 || got[0].Name != "a_every" || got[1].Name != "nightly-b" {
		t.Fatalf("ListSchedules = %v, want a_every, nightly-b", got)
	}
	if g := got[1]; g.Tool != b.Tool || string(g.Arguments) != string(b.Arguments) || g.Cron != b.Cron || g.Owner != b.Owner || !g.CreatedAt.Equal(now) {
		t.Fatalf("schedule read back %+v, want %+v", g, b)
	}
	a2 := *a
	a2.Cron = "*/5 * * * *"
	if err := sc.PutSchedule(e.ctx, &a2); err != nil {
		t.Fatal(err)
	}
	if got := list(); len(got) != 2 || got[0].Cron != a2.Cron {
		t.Fatalf("after replacing a_every: %v", got)
	}
	if err := sc.DeleteSchedule(e.ctx, "a_every"); err != nil {
		t.Fatalf("DeleteSchedule: %v", err)
	}
	if err := sc.DeleteSchedule(e.ctx, "a_every"); !errors.Is(err, taskstate.ErrNotFound) {
		t.Fatalf("second DeleteSchedule = %v, want ErrNotFound", err)
	}
	if got := list(); len(got) != 1 || got[0].Name != "nightly-b" {
		t.Fatalf("after the delete: %v", got)
	}
}
