package statetest

import (
	"errors"
	"testing"
	"time"

	"github.com/mcpqueue/mcpqueue/taskstate"
)

// outbox (completion webhooks): a task's delivery is added once, rewritten
// in place, listed until removed, counted per owner, and removal is
// idempotent.
func (s *suite) outbox(t *testing.T, e *env) {
	o := e.store.(taskstate.Outbox)
	now := time.Now().UTC().Truncate(time.Millisecond)
	a := &taskstate.Delivery{TaskID: taskstate.NewID(), Owner: "alice", URL: "http://127.0.0.1:1/a", CreatedAt: now}
	b := &taskstate.Delivery{TaskID: taskstate.NewID(), Owner: "alice", URL: "http://127.0.0.1:1/b", CreatedAt: now}
	c := &taskstate.Delivery{TaskID: taskstate.NewID(), Owner: "bob", URL: "http://127.0.0.1:1/c", CreatedAt: now}
	for _, d := range []*taskstate.Delivery{a, b, c} {
		if err := o.AddDelivery(e.ctx, d); err != nil {
			t.Fatalf("AddDelivery(%s): %v", d.TaskID, err)
		}
	}
	if err := o.AddDelivery(e.ctx, &taskstate.Delivery{TaskID: a.TaskID, Owner: "alice", URL: "http://other/"}); !errors.Is(err, taskstate.ErrExists) {
		t.Fatalf("AddDelivery of a task's second delivery: %v, want ErrExists", err)
	}
	if err := o.AddDelivery(e.ctx, &taskstate.Delivery{TaskID: "not an id", URL: "http://x/"}); err == nil {
		t.Fatal("AddDelivery accepted an invalid task id")
	}
	count := func(owner string, want int) {
		t.Helper()
		n, err := o.CountDeliveries(e.ctx, owner)
		if err != nil || n != want {
			t.Fatalf("CountDeliveries(%q) = %d, %v; want %d", owner, n, err, want)
		}
	}
	count("alice", 2)
	count("bob", 1)
	count("carol", 0)
	count("", 0)

	a.Attempts, a.NextAt, a.FirstAt, a.Body, a.LastError = 2, now.Add(time.Minute), now, []byte(`{"taskId":"x"}`), "HTTP 500"
	if err := o.PutDelivery(e.ctx, a); err != nil {
		t.Fatalf("PutDelivery: %v", err)
	}
	got := s.deliveries(t, e, o)
	if len(got) != 3 {
		t.Fatalf("Deliveries listed %d, want 3", len(got))
	}
	if g := got[a.TaskID]; g == nil || g.Attempts != 2 || !g.NextAt.Equal(a.NextAt) || string(g.Body) != string(a.Body) || g.LastError != "HTTP 500" || g.URL != a.URL || g.Owner != "alice" {
		t.Fatalf("Deliveries after PutDelivery: %+v, want %+v", g, a)
	}
	if err := o.RemoveDelivery(e.ctx, b.TaskID); err != nil {
		t.Fatalf("RemoveDelivery: %v", err)
	}
	if err := o.RemoveDelivery(e.ctx, b.TaskID); err != nil {
		t.Fatalf("RemoveDelivery of a removed delivery: %v, want nil", err)
	}
	if err := o.PutDelivery(e.ctx, b); !errors.Is(err, taskstate.ErrNotFound) {
		t.Fatalf("PutDelivery of a removed delivery: %v, want ErrNotFound", err)
	}
	count("alice", 1)
	if got := s.deliveries(t, e, o); len(got) != 2 || got[b.TaskID] != nil {
		t.Fatalf("Deliveries after RemoveDelivery: %d listed (removed one there: %v)", len(got), got[b.TaskID] != nil)
	}
	if err := o.AddDelivery(e.ctx, b); err != nil {
		t.Fatalf("AddDelivery again after RemoveDelivery: %v", err)
	}
	count("alice", 2)
	stops := 0
	if err := o.Deliveries(e.ctx, func(*taskstate.Delivery) bool { stops++; return false }); err != nil || stops != 1 {
		t.Fatalf("Deliveries went on after fn returned false: %d calls, %v", stops, err)
	}
}

func (s *suite) deliveries(t *testing.T, e *env, o taskstate.Outbox) map[string]*taskstate.Delivery {
	t.Helper()
	out := map[string]*taskstate.Delivery{}
	if err := o.Deliveries(e.ctx, func(d *taskstate.Delivery) bool { out[d.TaskID] = d; return true }); err != nil {
		t.Fatalf("Deliveries: %v", err)
	}
	return out
}
