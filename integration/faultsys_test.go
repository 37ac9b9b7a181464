package integration

// The machinery of the fault suite (faults_test.go): a system whose
// processes a test kills, freezes and restarts, a feeder of tasks that
// tolerates outages, and the tally of what the store holds at the end.

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"math/rand/v2"
	"os"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mcpqueue/mcpqueue/integration/harness"
	"github.com/mcpqueue/mcpqueue/taskstate"
)

// faultsFull selects the full sizes (MCPQ_FAULTS=full); by default
// every case runs a bounded form small enough for CI.
var faultsFull = os.Getenv("MCPQ_FAULTS") == "full"

// pick is bounded in the default run and full under MCPQ_FAULTS=full.
func pick[T any](bounded, full T) T {
	if faultsFull {
		return full
	}
	return bounded
}

// faultSystem is one broker, api replicas and a changing set of workers.
// It keeps every process it ever started, killed or not: their logs are
// the evidence of who ran and who ended each task.
type faultSystem struct {
	bins    *harness.Bins
	be      harness.Backend
	prefix  string
	logDir  string
	env     []string // for every api and worker (broker options)
	apiEnv  []string // for api replicas only
	wArgs   []string // for every worker
	mcpURL  string   // the first healthy api
	apis    []*harness.Proc
	workers []*harness.Proc
	mu      sync.Mutex
	live    []*harness.Proc // workers not yet killed
	started int
}

// faultPrefix names a test's streams, buckets and keys.
func faultPrefix(t *testing.T) string {
	return harness.Prefix("flt", strings.TrimPrefix(t.Name(), "TestFault"))
}

// newFaultSystem sets up a system on be without starting anything. Workers
// get a short lease and enough attempts that no schedule of kills exhausts
// them; the api's reaper looks for lapsed leases twice a second.
func newFaultSystem(t *testing.T, be harness.Backend, lease string) *faultSystem {
	t.Helper()
	return &faultSystem{
		bins: harness.Build(t), be: be, prefix: faultPrefix(t), logDir: harness.LogDir(t),
		apiEnv: []string{"MCPQ_REAP_INTERVAL=500ms", "MCPQ_PUBLISH_GRACE=" + pick("3s", "10s")},
		env:    []string{"MCPQ_MAX_ATTEMPTS=1000"},
		wArgs:  []string{"--lease", lease},
	}
}

// faultBackend is what a case runs on when the broker itself is not the
// fault: a nats-server process with file storage, or the machine's Redis.
func faultBackend(t *testing.T, broker string) harness.Backend {
	t.Helper()
	return harness.NewBackend(t, harness.Build(t), broker, faultPrefix(t))
}

// startAPI starts an api replica with extra environment; the first one
// becomes the system's endpoint.
func (s *faultSystem) startAPI(t *testing.T, name string, env ...string) (string, *harness.Proc) {
	t.Helper()
	all := append(append(append([]string{}, s.env...), s.apiEnv...), env...)
	url, p := harness.APILogged(t, s.bins, s.be, s.prefix, name, s.logDir, all)
	s.apis = append(s.apis, p)
	if s.mcpURL == "" {
		s.mcpURL = url
	}
	return url, p
}

// startWorker starts one more worker and waits until it runs.
func (s *faultSystem) startWorker(t *testing.T, extra ...string) *harness.Proc {
	t.Helper()
	s.mu.Lock()
	s.started++
	name := fmt.Sprintf("worker-%d", s.started)
	s.mu.Unlock()
	p := harness.WorkerEnv(t, s.logDir, s.bins.Worker, name, s.env, s.be, s.prefix, append(append([]string{}, s.wArgs...), extra...)...)
	s.mu.Lock()
	s.workers = append(s.workers, p)
	s.live = append(s.live, p)
	s.mu.Unlock()
	return p
}

// startWorkers starts n more workers with extra arguments.
func (s *faultSystem) startWorkers(t *testing.T, n int, extra ...string) {
	t.Helper()
	for range n {
		s.startWorker(t, extra...)
	}
}

// killRandomWorker is kill -9 of a random live worker.
func (s *faultSystem) killRandomWorker() *harness.Proc {
	s.mu.Lock()
	i := rand.IntN(len(s.live))
	p := s.live[i]
	s.live = append(s.live[:i], s.live[i+1:]...)
	s.mu.Unlock()
	p.Kill()
	return p
}

// feeder creates tasks through an api while the test breaks things: a
// call that fails (broker down) is not acknowledged and only counted.
type feeder struct {
	n        int // calls it makes
	mu       sync.Mutex
	accepted []string
	refused  []error
	done     chan struct{}
}

// feed starts creating n tasks of the wait tool (ms each), one every gap.
func feed(c *harness.Client, n, ms int, gap time.Duration) *feeder {
	f := &feeder{n: n, done: make(chan struct{})}
	go func() {
		defer close(f.done)
		for range n {
			id, err := tryStart(c, ms)
			f.mu.Lock()
			if err != nil {
				f.refused = append(f.refused, err)
			} else {
				f.accepted = append(f.accepted, id)
			}
			f.mu.Unlock()
			time.Sleep(gap) // the feed's pace, not synchronisation
		}
	}()
	return f
}

// awaitAcked waits, two minutes at most, until at least want calls of the
// feed were acknowledged.
func (f *feeder) awaitAcked(t *testing.T, want int) {
	t.Helper()
	harness.Eventually(t, 2*time.Minute, func() (bool, string) {
		a, _ := f.counts()
		return a >= want, fmt.Sprintf("only %d of %d tasks acknowledged", a, f.n)
	})
}

// tryStart calls the wait tool as a task and returns its id.
func tryStart(c *harness.Client, ms int) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var out harness.Task
	if err := c.Call(ctx, "tools/call", map[string]any{"name": "wait", "arguments": map[string]any{"ms": ms}}, &out); err != nil {
		return "", err
	}
	if out.ResultType != "task" || out.TaskID == "" {
		return "", fmt.Errorf("want a task handle, got %+v", out)
	}
	return out.TaskID, nil
}

func (f *feeder) counts() (accepted, refused int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.accepted), len(f.refused)
}

// wait waits for the feed to end and returns the accepted ids.
func (f *feeder) wait(t *testing.T, within time.Duration) []string {
	t.Helper()
	select {
	case <-f.done:
	case <-time.After(within):
		t.Fatalf("the feeder did not finish within %s", within)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	for i, err := range f.refused {
		if i < 5 {
			t.Logf("refused call (not acknowledged, not counted as lost): %v", err)
		}
	}
	return append([]string(nil), f.accepted...)
}

// startTasks creates n wait tasks now; every call must be acknowledged.
func startTasks(t *testing.T, c *harness.Client, n, ms int) []string {
	t.Helper()
	var ids []string
	for range n {
		ids = append(ids, c.StartTask(t, "wait", map[string]any{"ms": ms}))
	}
	return ids
}

// settled polls the store until every record is terminal and returns the
// records; at the deadline it returns them as they are (the tally then
// shows what was lost) and reports so. cond, if set, must hold too.
func (s *faultSystem) settled(t *testing.T, within time.Duration, cond func(map[string]*taskstate.Task) bool) (map[string]*taskstate.Task, bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		recs := harness.Records(t, s.be, s.prefix)
		open := 0
		for _, r := range recs {
			if !r.Status.Terminal() {
				open++
			}
		}
		if open == 0 && (cond == nil || cond(recs)) {
			return recs, true
		}
		if time.Now().After(deadline) {
			t.Errorf("%d of %d tasks still not ended %s after the run", open, len(recs), within)
			return recs, false
		}
		time.Sleep(250 * time.Millisecond) // no event covers "every record terminal"
	}
}

// logLine is the part of a JSON log line the tally reads.
type logLine struct {
	Message string `json:"message"`
	Task    string `json:"task"`
	Attempt int    `json:"attempt"`
	Status  string `json:"status"`
	Worker  string `json:"worker"`
}

// lines parses the JSON log lines of procs that concern a task.
func lines(procs []*harness.Proc) map[string][]logLine {
	out := map[string][]logLine{}
	for _, p := range procs {
		for _, raw := range strings.Split(p.Output(), "\n") {
			var l logLine
			if !strings.HasPrefix(raw, "{") || json.Unmarshal([]byte(raw), &l) != nil || l.Task == "" {
				continue
			}
			out[l.Task] = append(out[l.Task], l)
		}
	}
	return out
}

// attemptRe finds the attempt a wait result reports ("waited 300 ms (attempt 2)").
var attemptRe = regexp.MustCompile(`\(attempt (\d+)\)`)

func resultAttempt(r *taskstate.Task) int {
	m := attemptRe.FindSubmatch(r.Result)
	if m == nil {
		return 0
	}
	n, _ := strconv.Atoi(string(m[1]))
	return n
}

// tally is what a fault run left in the store.
type tally struct {
	created, completed, failed, cancelled, lost int
	// duplicated counts terminal writes beyond the first, per task. Each
	// terminal write is known from its writer:
	//   - a worker's "task finished" line, printed only after the worker's
	//     compare-and-set of the outcome onto the record succeeded (one line
	//     per successful write, in the logs of every worker process that ever
	//     ran, killed ones included);
	//   - the api's cancel: 1 if the record ends cancelled (only the api
	//     writes that status), so a worker outcome logged for a cancelled
	//     task counts as a second write;
	//   - the api failing a task: its reaper's "worker lost on the last
	//     attempt; task failed" line (printed after the write), or "job
	//     start failed; marking task failed" not followed by "could not mark
	//     unstarted task failed";
	//   - a completed outcome no logged line accounts for: when the record's
	//     result reports attempt N ("(attempt N)") and lines exist but none is
	//     from attempt N, an unlogged writer (killed right after writing)
	//     replaced or was replaced by a logged one: one more write.
	duplicated int
	// executions is how many handler runs started ("task running"), summed.
	executions int
}

// tallyRecords counts recs against the logs of every worker of s.
func (s *faultSystem) tallyRecords(recs map[string]*taskstate.Task) tally {
	var n tally
	byTask := lines(s.workers)
	apiLines := lines(s.apis)
	for id, r := range recs {
		n.created++
		switch r.Status {
		case taskstate.Completed:
			n.completed++
		case taskstate.Failed:
			n.failed++
		case taskstate.Cancelled:
			n.cancelled++
		}
		writes, attempts := 0, map[int]bool{}
		for _, l := range byTask[id] {
			switch l.Message {
			case "task finished":
				writes++
				attempts[l.Attempt] = true
			case "task running":
				n.executions++
			}
		}
		if r.Status == taskstate.Cancelled {
			writes++
		}
		for _, l := range apiLines[id] {
			switch l.Message {
			case "worker lost on the last attempt; task failed", "job start failed; marking task failed":
				writes++
			case "could not mark unstarted task failed":
				writes--
			}
		}
		if a := resultAttempt(r); r.Status == taskstate.Completed && len(attempts) > 0 && a > 0 && !attempts[a] {
			writes++
		}
		if writes > 1 {
			n.duplicated += writes - 1
		}
	}
	n.lost = n.created - (n.completed + n.failed + n.cancelled)
	return n
}

// report prints the count line (go test -v shows it) and fails the test
// unless nothing was lost and no task was ended twice.
func (n tally) report(t *testing.T) {
	t.Helper()
	line := fmt.Sprintf("created=%d completed=%d failed=%d cancelled=%d lost=%d duplicated_terminal_writes=%d",
		n.created, n.completed, n.failed, n.cancelled, n.lost, n.duplicated)
	fmt.Printf("FAULTS %s: %s (handler runs %d)\n", t.Name(), line, n.executions)
	t.Log(line)
	if n.lost != 0 || n.duplicated != 0 {
		t.Errorf("want lost=0 duplicated_terminal_writes=0, got %s", line)
	}
	if n.created == 0 {
		t.Errorf("no task records at all")
	}
}

// mustAllComplete fails unless every record is completed, and shows a few
// that are not.
func mustAllComplete(t *testing.T, recs map[string]*taskstate.Task) {
	t.Helper()
	mustComplete(t, recs, slices.Collect(maps.Keys(recs)))
}

// mustComplete fails unless each of ids has a completed record. Records of
// calls the client got an error for may end failed (the api could not
// queue the job): the client was told, nothing is lost.
func mustComplete(t *testing.T, recs map[string]*taskstate.Task, ids []string) {
	t.Helper()
	var bad []string
	for _, id := range ids {
		if r := recs[id]; r != nil && r.Status != taskstate.Completed {
			bad = append(bad, fmt.Sprintf("%s %s %q", id, r.Status, r.StatusMessage))
		}
	}
	sort.Strings(bad)
	if len(bad) > 0 {
		t.Errorf("%d tasks did not complete, e.g. %v", len(bad), bad[:min(5, len(bad))])
	}
}

// mustHold fails unless every acknowledged task has a record: a handle the
// client got is never lost.
// holdsAll is a settled condition: every one of ids has a record.
func holdsAll(ids []string) func(map[string]*taskstate.Task) bool {
	return func(recs map[string]*taskstate.Task) bool {
		for _, id := range ids {
			if recs[id] == nil {
				return false
			}
		}
		return true
	}
}

func mustHold(t *testing.T, recs map[string]*taskstate.Task, acked []string) {
	t.Helper()
	for _, id := range acked {
		if recs[id] == nil {
			t.Errorf("acknowledged task %s has no record", id)
		}
	}
}

// mustServe checks through the api that each task reads as the store holds
// it: the client side sees the same outcome.
func mustServe(t *testing.T, c *harness.Client, recs map[string]*taskstate.Task, ids []string) {
	t.Helper()
	for _, id := range ids {
		tk, err := c.GetTask(context.Background(), id)
		if err != nil {
			t.Errorf("tasks/get %s after the run: %v", id, err)
			continue
		}
		if r := recs[id]; r != nil && tk.Status != string(r.Status) {
			t.Errorf("tasks/get %s says %s, the store %s", id, tk.Status, r.Status)
		}
	}
}

// The tally counts what it claims: a second logged outcome, a worker
// outcome on a cancelled task and an unlogged writer each count as a
// duplicate; a record left working counts as lost.
func TestFaultTallyCounts(t *testing.T) {
	t.Parallel()
	logs := strings.Join([]string{
		`{"task":"A","attempt":1,"message":"task running"}`,
		`{"task":"A","attempt":1,"status":"completed","message":"task finished"}`,
		`{"task":"B","attempt":1,"status":"completed","message":"task finished"}`,
		`{"task":"B","attempt":2,"status":"completed","message":"task finished"}`,
		`{"task":"C","attempt":1,"status":"completed","message":"task finished"}`,
		`{"task":"D","attempt":1,"status":"completed","message":"task finished"}`,
		`{"task":"F","attempt":1,"status":"completed","message":"task finished"}`,
	}, "\n")
	apiLogs := strings.Join([]string{
		`{"task":"F","attempt":1,"message":"worker lost on the last attempt; task failed"}`,
		`{"task":"G","message":"job start failed; marking task failed"}`,
		`{"task":"H","message":"job start failed; marking task failed"}`,
		`{"task":"H","message":"could not mark unstarted task failed"}`,
	}, "\n")
	p := fakeLog(t, "fake-worker", logs)
	api := fakeLog(t, "fake-api", apiLogs)
	rec := func(s taskstate.Status, result string) *taskstate.Task {
		return &taskstate.Task{Status: s, Result: json.RawMessage(result)}
	}
	s := &faultSystem{workers: []*harness.Proc{p}, apis: []*harness.Proc{api}}
	n := s.tallyRecords(map[string]*taskstate.Task{
		"A": rec(taskstate.Completed, `{"text":"waited 1 ms (attempt 1)"}`), // one write: fine
		"B": rec(taskstate.Completed, `{"text":"waited 1 ms (attempt 2)"}`), // two logged writes
		"C": rec(taskstate.Cancelled, ``),                                   // worker outcome + cancel
		"D": rec(taskstate.Completed, `{"text":"waited 1 ms (attempt 3)"}`), // attempt 3 wrote unlogged
		"E": rec(taskstate.Working, ``),                                     // lost
		"F": rec(taskstate.Failed, ``),                                      // worker outcome + reaper's failure
		"G": rec(taskstate.Failed, ``),                                      // one write: fine
		"H": rec(taskstate.Working, ``),                                     // the api's write failed: lost
	})
	want := tally{created: 8, completed: 3, failed: 2, cancelled: 1, lost: 2, duplicated: 4, executions: 1}
	if n != want {
		t.Fatalf("tally %+v, want %+v", n, want)
	}
}

// mustEndTerminal fails unless every record ended; it logs the records of
// refused calls that ended otherwise than completed.
func mustEndTerminal(t *testing.T, recs map[string]*taskstate.Task) {
	t.Helper()
	for id, r := range recs {
		switch {
		case !r.Status.Terminal():
			t.Errorf("task %s is still %s", id, r.Status)
		case r.Status != taskstate.Completed:
			t.Logf("task %s (its call was refused) ended %s: %q", id, r.Status, r.StatusMessage)
		}
	}
}

// fakeLog is a process that prints text and exits.
func fakeLog(t *testing.T, name, text string) *harness.Proc {
	t.Helper()
	p := harness.Start(t, name, "/bin/sh", nil, "-c", "printf '%s\\n' \"$0\"", text)
	harness.Eventually(t, 10*time.Second, func() (bool, string) { return p.Exited(), "printf still running" })
	return p
}
