package integration

import (
	"strings"
	"testing"
	"time"

	"github.com/mcpqueue/mcpqueue/integration/harness"
)

// Dead letters and replay on both backends, through real api and worker
// processes: a task whose worker is killed on its last attempt is failed by
// the reaper and listed by `api tasks list --dead` (a task with attempts
// left is not); `api tasks replay` runs its call again as a new task,
// linked both ways, which completes on a live worker; a second replay
// names the same task.
func TestReplayDeadLetter(t *testing.T) {
	t.Parallel()
	hooks := []string{"--webhook-allow", "127.0.0.1", "--webhook-secret", hookSecret, "--webhook-interval", "100ms"}
	onBrokersWith(t, append([]string{"--reap-interval", "300ms", "--max-attempts", "1"}, hooks...), func(t *testing.T, s *system) {
		c := harness.NewClient(s.mcpURL, true)
		rcv := newHookReceiver(t)
		lost := s.worker(t, "worker-lost", "--max-attempts", "1", "--lease", "2s")
		task, err := callWithMeta(t.Context(), c, "wait", map[string]any{"ms": 4000}, hookMeta(rcv.srv.URL+"/dead"))
		if err != nil {
			t.Fatal(err)
		}
		id := task.TaskID
		harness.Eventually(t, 30*time.Second, func() (bool, string) {
			tk, err := c.GetTask(t.Context(), id)
			return err == nil && strings.HasPrefix(tk.StatusMessage, "waiting"), "handler not running yet"
		})
		lost.Kill()
		dead := c.WaitStatus(t, id, time.Minute, "failed")
		t.Logf("dead letter: %s", dead.StatusMessage)
		// The reaper's terminal write sends the webhook too.
		harness.Eventually(t, time.Minute, func() (bool, string) {
			return len(rcv.requests("/dead")) > 0, "the dead task's webhook never arrived"
		})
		checkHook(t, rcv.requests("/dead")[0], id, "failed")
		fine := c.StartTask(t, "fail", map[string]any{"message": "a tool error is no dead letter"})

		r := s.tasksCLI(t, "list", "--dead", "--json")
		r.want(t, 0)
		if recs := jsonLines(t, r.stdout); len(recs) != 1 || recs[0]["id"] != id {
			t.Fatalf("list --dead: %v, want only %s (not %s)", recs, id, fine)
		}

		s.worker(t, "worker")
		r = s.tasksCLI(t, "replay", id)
		r.want(t, 0, id+": replayed as ")
		replay := strings.Fields(strings.TrimPrefix(strings.TrimSpace(r.stdout), id+": replayed as "))[0]
		done := c.WaitStatus(t, replay, time.Minute, "completed")
		if !strings.Contains(string(done.Result), "4000") {
			t.Fatalf("the replay's result %s: want the same call (wait 4000 ms)", done.Result)
		}
		s.tasksCLI(t, "get", replay).want(t, 0, `"io.mcpqueue/replay-of": "`+id+`"`)
		s.tasksCLI(t, "get", id).want(t, 0, `"io.mcpqueue/replayed-by": "`+replay+`"`)
		s.tasksCLI(t, "replay", id).want(t, 0, id+": replayed already, as "+replay)
		s.tasksCLI(t, "replay", "UNKNOWNTASKID0000000000000").want(t, 1, "not found")
	})
}
