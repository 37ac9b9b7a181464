package integration

// Tasks waiting for input end to end: a worker parks them and frees their
// slots, answers that come later, through another replica or after the
// worker died, resume them on any worker, and limits on waiting hold.

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mcpqueue/mcpqueue/auth/jwtauth"
	"github.com/mcpqueue/mcpqueue/integration/harness"
)

// count is how many lines of p's output mention task id with message msg.
func count(p *harness.Proc, id, msg string) int {
	n := 0
	for _, line := range strings.Split(p.Output(), "\n") {
		if strings.Contains(line, id) && strings.Contains(line, `"message":"`+msg) {
			n++
		}
	}
	return n
}

// awaitInput returns the input request keys of a task once it is
// input_required.
func awaitInput(t *testing.T, c *harness.Client, id string) []string {
	t.Helper()
	var keys []string
	harness.Eventually(t, 20*time.Second, func() (bool, string) {
		var tk struct {
			Status        string         `json:"status"`
			InputRequests map[string]any `json:"inputRequests"`
		}
		if err := c.Call(context.Background(), "tasks/get", map[string]any{"taskId": id}, &tk); err != nil {
			return false, err.Error()
		}
		keys = keys[:0]
		for k := range tk.InputRequests {
			keys = append(keys, k)
		}
		return tk.Status == "input_required" && len(keys) > 0, "task " + id + " is " + tk.Status
	})
	return keys
}

func confirm(t *testing.T, c *harness.Client, id string, keys []string) {
	t.Helper()
	answers := map[string]any{}
	for _, k := range keys {
		answers[k] = map[string]any{"action": "accept", "content": map[string]any{"confirm": true}}
	}
	if err := c.Call(context.Background(), "tasks/update", map[string]any{"taskId": id, "inputResponses": answers}, nil); err != nil {
		t.Fatalf("tasks/update %s: %v", id, err)
	}
}

// TestAnswerToNoPendingRequest: tasks/update with the handler's key (the
// wire key without its "-<n>") is -32602 naming it and the pending key and
// leaves the task waiting; once the task is done, an answer to a key never
// asked is -32602 saying nothing is pending.
func TestAnswerToNoPendingRequest(t *testing.T) {
	t.Parallel()
	onBrokers(t, func(t *testing.T, s *system) {
		s.conformanceWorker(t, "fixtures")
		c := harness.NewClient(s.mcpURL, true)
		id := c.StartTask(t, "confirm_delete", map[string]any{"filename": "a.txt"})
		keys := awaitInput(t, c, id)
		i := strings.LastIndex(keys[0], "-")
		if len(keys) != 1 || i <= 0 {
			t.Fatalf("confirm_delete asks %v: want one key <stem>-<n>", keys)
		}
		update := func(key string) error {
			answer := map[string]any{key: map[string]any{"action": "accept", "content": map[string]any{"confirm": true}}}
			return c.Call(context.Background(), "tasks/update", map[string]any{"taskId": id, "inputResponses": answer}, nil)
		}
		var rpc *harness.RPCError
		if err := update(keys[0][:i]); !errors.As(err, &rpc) || rpc.Code != -32602 || !strings.Contains(rpc.Message, strconv.Quote(keys[0])) {
			t.Fatalf("tasks/update with the handler's key %q: %v; want -32602 naming the pending %q", keys[0][:i], err, keys[0])
		}
		if again := awaitInput(t, c, id); len(again) != 1 || again[0] != keys[0] {
			t.Fatalf("the task's requests after the refused answer: %v", again)
		}
		confirm(t, c, id, keys)
		c.WaitStatus(t, id, 20*time.Second, "completed")
		if err := update("never-asked-1"); !errors.As(err, &rpc) || rpc.Code != -32602 || !strings.Contains(rpc.Message, "no pending input request") {
			t.Fatalf("tasks/update on the completed task: %v; want -32602, no pending input request", err)
		}
	})
}

// TestParkFreesSlots: a worker with 4 slots and eight unanswered
// confirm_delete tasks parks them all within its --park-after; a quick task
// created afterwards completes within a second; answering the eight later,
// through another api replica, completes them all, each handler having run
// twice and asked once.
func TestParkFreesSlots(t *testing.T) {
	t.Parallel()
	onBrokers(t, func(t *testing.T, s *system) {
		w := s.conformanceWorker(t, "fixtures", "--concurrency", "4", "--park-after", "1s")
		c := harness.NewClient(s.mcpURL, true)
		ids := startAll(t, c, 8, "confirm_delete", map[string]any{"filename": "a.txt"})
		keys := map[string][]string{}
		for _, id := range ids {
			keys[id] = awaitInput(t, c, id)
		}
		harness.Eventually(t, 20*time.Second, func() (bool, string) {
			n := 0
			for _, id := range ids {
				n += count(w, id, "parking")
			}
			return n == 8, fmt.Sprintf("%d of 8 tasks parked", n)
		})

		created := time.Now()
		quick := c.StartTask(t, "slow_compute", map[string]any{"seconds": 0})
		c.WaitStatus(t, quick, time.Second, "completed")
		t.Logf("a task created behind eight parked ones on a 4-slot worker completed %s after creation", time.Since(created).Round(time.Millisecond))

		mcp2, _ := harness.API(t, s.bins, s.be, s.prefix)
		c2 := harness.NewClient(mcp2, true)
		for _, id := range ids {
			confirm(t, c2, id, keys[id])
		}
		for _, id := range ids {
			tk := c2.WaitStatus(t, id, 30*time.Second, "completed")
			if got := resultText(t, tk.Result); got != "Deleted a.txt" {
				t.Fatalf("task %s: %q", id, got)
			}
			if runs, asks := count(w, id, "task running"), count(w, id, "waiting for client input"); runs != 2 || asks != 1 {
				t.Errorf("task %s: handler ran %d times and asked %d times, want twice and once", id, runs, asks)
			}
		}
	})
}

// TestParkSurvivesWorkerKill: kill -9 of the worker while its tasks are
// parked loses nothing: answers given later complete them on another worker.
func TestParkSurvivesWorkerKill(t *testing.T) {
	t.Parallel()
	onBrokers(t, func(t *testing.T, s *system) {
		w := s.conformanceWorker(t, "fixtures", "--park-after", "500ms")
		c := harness.NewClient(s.mcpURL, true)
		ids := startAll(t, c, 3, "confirm_delete", map[string]any{"filename": "b.txt"})
		keys := map[string][]string{}
		for _, id := range ids {
			keys[id] = awaitInput(t, c, id)
			harness.Eventually(t, 20*time.Second, func() (bool, string) { return count(w, id, "parking") == 1, "task " + id + " not parked" })
		}
		w.Kill()
		for _, id := range ids {
			confirm(t, c, id, keys[id])
		}
		s.conformanceWorker(t, "fixtures-2")
		for _, id := range ids {
			if tk := c.WaitStatus(t, id, 30*time.Second, "completed"); resultText(t, tk.Result) != "Deleted b.txt" {
				t.Fatalf("task %s after the worker was killed: %s", id, tk.Result)
			}
		}
	})
}

// TestParkInputTimeout: a parked task whose answers never come fails after
// --input-timeout, saying so.
func TestParkInputTimeout(t *testing.T) {
	t.Parallel()
	onBrokersWith(t, []string{"--reap-interval", "500ms"}, func(t *testing.T, s *system) {
		w := s.conformanceWorker(t, "fixtures", "--park-after", "500ms", "--input-timeout", "3s")
		c := harness.NewClient(s.mcpURL, true)
		id := c.StartTask(t, "confirm_delete", map[string]any{"filename": "c.txt"})
		awaitInput(t, c, id)
		harness.Eventually(t, 20*time.Second, func() (bool, string) { return count(w, id, "parking") == 1, "not parked" })
		tk := c.WaitStatus(t, id, 20*time.Second, "failed")
		if !strings.Contains(tk.StatusMessage, "timed out waiting for client input") || !strings.Contains(tk.StatusMessage, "--input-timeout") {
			t.Fatalf("statusMessage %q, want it to name the input timeout", tk.StatusMessage)
		}
	})
}

// TestParkWaitingCap: with --max-waiting-input 2, a principal's third task
// that asks for input fails with an error saying why; another principal's
// task waits as usual.
func TestParkWaitingCap(t *testing.T) {
	t.Parallel()
	eachBroker(t, func(t *testing.T, broker string) {
		s := newAuthSystem(t, broker, jwtauth.RS256)
		w := s.conformanceWorker(t, "fixtures", "--park-after", "500ms", "--max-waiting-input", "2")
		alice, bob := s.client(t, "alice"), s.client(t, "bob")
		for range 2 {
			id := alice.StartTask(t, "confirm_delete", map[string]any{"filename": "d.txt"})
			awaitInput(t, alice, id)
			harness.Eventually(t, 20*time.Second, func() (bool, string) { return count(w, id, "parking") == 1, "not parked" })
		}
		third := alice.StartTask(t, "confirm_delete", map[string]any{"filename": "d.txt"})
		tk := alice.WaitStatus(t, third, 20*time.Second, "failed")
		if tk.Error == nil || !strings.Contains(tk.Error.Message, "already has 2 tasks waiting for input") {
			t.Fatalf("alice's third task: %+v (error %+v), want it failed naming the limit", tk, tk.Error)
		}
		other := bob.StartTask(t, "confirm_delete", map[string]any{"filename": "d.txt"})
		awaitInput(t, bob, other)
		harness.Eventually(t, 20*time.Second, func() (bool, string) { return count(w, other, "parking") == 1, "bob's task not parked" })
		var rpc *harness.RPCError
		if err := bob.Call(context.Background(), "tasks/get", map[string]any{"taskId": third}, nil); !errors.As(err, &rpc) {
			t.Fatalf("bob reads alice's task: %v", err)
		}
	})
}

// A worker dies while its task waits for input; the answer goes in through
// tasks/update while no worker holds the task; a new worker resumes the task
// with the stored answer, and the client is never asked again.
func TestKillWorkerWhileWaitingForInput(t *testing.T) {
	t.Parallel()
	onBrokers(t, func(t *testing.T, s *system) {
		lease := []string{"--lease", "2s"}
		w1 := s.conformanceWorker(t, "worker-1", lease...)
		c := harness.NewClient(s.mcpURL, true)
		ctx := context.Background()

		id := c.StartTask(t, "confirm_delete", map[string]any{"filename": "report.pdf"})
		keys := awaitInput(t, c, id)
		if len(keys) != 1 {
			t.Fatalf("want one input request, got %v", keys)
		}

		w1.Kill() // kill -9 while the handler waits on the task's replies
		confirm(t, c, id, keys)
		w2 := s.conformanceWorker(t, "worker-2", lease...)

		// Until the task ends, the client must never be asked again.
		var final *harness.Task
		harness.Eventually(t, s.recoveryBound(), func() (bool, string) {
			var tk struct {
				harness.Task
				InputRequests map[string]any `json:"inputRequests"`
			}
			if err := c.Call(ctx, "tasks/get", map[string]any{"taskId": id}, &tk); err != nil {
				return false, err.Error()
			}
			if tk.Status == "input_required" {
				t.Fatalf("the client was asked again after answering: %v", tk.InputRequests)
			}
			final = &tk.Task
			return tk.Status == "completed" || tk.Status == "failed" || tk.Status == "cancelled", "status " + tk.Status
		})
		if final.Status != "completed" || !strings.Contains(resultText(t, final.Result), "Deleted report.pdf") {
			t.Fatalf("task ended %s: %s", final.Status, final.Result)
		}
		out := w2.Output()
		if !strings.Contains(out, fmt.Sprintf(`"task":"%s"`, id)) {
			t.Fatalf("worker-2 never ran the task")
		}
		for _, line := range strings.Split(out, "\n") {
			if strings.Contains(line, id) && strings.Contains(line, "waiting for client input") {
				t.Fatalf("worker-2 asked for input again: %s", line)
			}
		}
	})
}
