package console_test

import (
	"testing"
	"time"

	"github.com/mcpqueue/mcpqueue/taskstate"
)

// Dead letters in the console: listed as such (?dead=true), replayed by an
// admin of their tenant as a new task of the same owner, linked both ways;
// an admin of another tenant is refused (404, nothing created), and a task
// not ended is 409.
func TestConsoleReplayDead(t *testing.T) {
	f := tenantFixture(t, "T1/admin", "T2/admin")
	now := time.Now().UTC()
	owner := "iss|user|T1"
	dead := f.write(t, f.owned(t, "wait", owner, now), now, func(x *taskstate.Task) {
		x.Attempt, x.MaxAttempts, x.Status, x.StatusMessage = 3, 3, taskstate.Failed, "worker lost on its last attempt"
	})
	once := f.write(t, f.owned(t, "wait", owner, now), now, func(x *taskstate.Task) { x.Attempt, x.Status = 1, taskstate.Failed })
	running := f.owned(t, "wait", owner, now)

	var ans struct {
		Tasks []struct {
			ID   string `json:"id"`
			Dead bool   `json:"dead"`
		} `json:"tasks"`
	}
	if code := f.do(t, "GET", "/console/api/tasks?dead=true", "T1/admin", &ans); code != 200 || len(ans.Tasks) != 1 || ans.Tasks[0].ID != dead.ID || !ans.Tasks[0].Dead {
		t.Fatalf("dead letters: %d %+v, want only %s (not %s, failed with attempts left)", code, ans, dead.ID, once.ID)
	}

	var e struct{ Error string }
	if code := f.do(t, "POST", "/console/api/tasks/"+dead.ID+"/replay", "T2/admin", &e); code != 404 {
		t.Fatalf("replay by another tenant's admin: %d (%s), want 404", code, e.Error)
	}
	if got, _ := f.store.Get(t.Context(), dead.ID); got.ReplayedBy() != "" {
		t.Fatalf("a refused replay linked the task to %s", got.ReplayedBy())
	}
	if code := f.do(t, "POST", "/console/api/tasks/"+running+"/replay", "T1/admin", &e); code != 409 {
		t.Fatalf("replay of a working task: %d (%s), want 409", code, e.Error)
	}
	var rep struct {
		Task struct {
			ID       string `json:"id"`
			Owner    string `json:"owner"`
			ReplayOf string `json:"replayOf"`
		} `json:"task"`
		Created bool `json:"created"`
	}
	if code := f.do(t, "POST", "/console/api/tasks/"+dead.ID+"/replay", "T1/admin", &rep); code != 200 || !rep.Created ||
		rep.Task.Owner != owner || rep.Task.ReplayOf != dead.ID || rep.Task.ID == dead.ID {
		t.Fatalf("replay: %d %+v, want a new task of %s linked to %s", code, rep, owner, dead.ID)
	}
	if got, _ := f.store.Get(t.Context(), dead.ID); got.ReplayedBy() != rep.Task.ID {
		t.Fatalf("the dead task names %q as its replay, want %s", got.ReplayedBy(), rep.Task.ID)
	}
	if got, err := f.store.Get(t.Context(), rep.Task.ID); err != nil || got.Owner != owner || got.Tool != "wait" || got.Status != taskstate.Working {
		t.Fatalf("the replay's record: %+v, %v", got, err)
	}
}
