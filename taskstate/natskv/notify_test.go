package natskv_test

import (
	"testing"
	"time"

	"github.com/mcpqueue/mcpqueue/taskstate"
)

// A Follow hears a version from its writer's announcement, with no
// JetStream consumer on the task bucket (so no api receives the versions
// of tasks it does not wait for); a version written without one (a process
// that died before announcing, an older version) still reaches it, read
// from the bucket once the subscription has been quiet.
func TestFollowByAnnouncement(t *testing.T) {
	t.Parallel()
	s, js, name := memoryStore(t)
	ctx := t.Context()
	stream, err := js.Stream(ctx, "KV_"+name+"_tasks")
	if err != nil {
		t.Fatal(err)
	}
	task := newTask()
	ch, err := s.Follow(ctx, task.ID)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Create(ctx, task); err != nil {
		t.Fatal(err)
	}
	next := func(what string, within time.Duration) *taskstate.Task {
		t.Helper()
		select {
		case got := <-ch:
			return got
		case <-time.After(within):
			t.Fatalf("%s did not reach the Follow within %s", what, within)
			return nil
		}
	}
	if got := next("the creation", 2*time.Second); got == nil || got.Revision != task.Revision {
		t.Fatalf("Follow delivered %+v, want the creation (revision %d)", got, task.Revision)
	}
	info, err := stream.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if info.State.Consumers != 0 {
		t.Fatalf("the task bucket has %d consumer(s) while a Follow waits; want none", info.State.Consumers)
	}

	// A version written straight to the bucket: no announcement.
	kv, err := js.KeyValue(ctx, name+"_tasks")
	if err != nil {
		t.Fatal(err)
	}
	done := task.Clone()
	done.Status = taskstate.Completed
	b, err := taskstate.Encode(done)
	if err != nil {
		t.Fatal(err)
	}
	rev, err := kv.Update(ctx, task.ID, b, task.Revision)
	if err != nil {
		t.Fatal(err)
	}
	if got := next("an unannounced version", 10*time.Second); got == nil || got.Revision != rev || got.Status != taskstate.Completed {
		t.Fatalf("Follow delivered %+v, want the completed version %d", got, rev)
	}
	select {
	case _, open := <-ch:
		if open {
			t.Fatal("Follow delivered after the terminal version")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Follow did not close after the terminal version")
	}
}
