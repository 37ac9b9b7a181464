package mcpfront

import (
	"fmt"
	"testing"
	"time"

	"github.com/mcpqueue/mcpqueue/backend"
	"github.com/mcpqueue/mcpqueue/taskstate"
)

func TestPollHint(t *testing.T) {
	const ms = time.Millisecond
	for _, c := range []struct {
		age, typical, want time.Duration
	}{
		// Unknown tool: a fifth of the age, between 100 ms and 5 s.
		{0, 0, 100 * ms},
		{2 * time.Second, 0, 400 * ms},
		{10 * time.Second, 0, 2000 * ms},
		{time.Hour, 0, 5000 * ms},
		// Known tool, task younger than its typical duration: the rest of it.
		{0, 300 * ms, 300 * ms},
		{100 * ms, 300 * ms, 200 * ms},
		{0, 20 * ms, 20 * ms},
		{0, time.Minute, 5000 * ms}, // at most 5 s
		// … but not below the floor, half the typical duration.
		{250 * ms, 300 * ms, 100 * ms}, // floor capped at 100 ms
		{18 * ms, 20 * ms, 10 * ms},
		{0, 2 * ms, 5 * ms}, // floor at least 5 ms
		// Task older than typical: a fifth of the age, with that floor.
		{20 * ms, 20 * ms, 10 * ms},
		{400 * ms, 20 * ms, 80 * ms},
		{2 * time.Second, 20 * ms, 400 * ms},
		{2 * time.Second, 300 * ms, 400 * ms},
		{time.Hour, 20 * ms, 5000 * ms},
		{400 * ms, 300 * ms, 100 * ms},
	} {
		if got := pollHint(c.age, c.typical); got != c.want {
			t.Errorf("pollHint(age %s, typical %s) = %s, want %s", c.age, c.typical, got, c.want)
		}
	}
}

// finished is a task of tool that ended in status after took.
func finished(id, tool string, status taskstate.Status, took time.Duration) *taskstate.Task {
	created := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	return &taskstate.Task{ID: id, Tool: tool, Status: status, CreatedAt: created, LastUpdatedAt: created.Add(took)}
}

func TestPollIntervalUsesTheToolsDuration(t *testing.T) {
	created := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	now := created
	s := New(nil, backend.Backend{}, &Config{StateKey: []byte("k"), Now: func() time.Time { return now }})
	running := &taskstate.Task{Tool: "slow", Status: taskstate.Working, CreatedAt: created, PollIntervalMs: 500}
	if got := s.pollInterval(running); got != 100 {
		t.Errorf("unmeasured tool at age 0: %d ms, want 100", got)
	}
	s.durations.observe(finished("A", "slow", taskstate.Completed, 300*time.Millisecond))
	if got := s.pollInterval(running); got != 300 {
		t.Errorf("300 ms tool at age 0: %d ms, want 300", got)
	}
	now = created.Add(100 * time.Millisecond)
	running.Status = taskstate.InputRequired // same rule
	if got := s.pollInterval(running); got != 200 {
		t.Errorf("300 ms tool at age 100 ms: %d ms, want 200", got)
	}
	running.Status = taskstate.Completed // a finished task keeps its interval
	if got := s.pollInterval(running); got != 500 {
		t.Errorf("completed: %d ms, want 500 (its stored interval)", got)
	}
}

func TestDurationEstimate(t *testing.T) {
	const ms = time.Millisecond
	var d durations
	typical := func(tool string) time.Duration { return d.typical(&taskstate.Task{Tool: tool}) }

	d.observe(finished("A", "t", taskstate.Completed, 20*ms))
	if got := typical("t"); got != 20*ms {
		t.Fatalf("after one sample: %s, want 20ms", got)
	}
	// The first samples are averaged plainly (geometric mean).
	d.observe(finished("B", "t", taskstate.Failed, 80*ms))
	if got := typical("t"); got < 39*ms || got > 41*ms {
		t.Errorf("after 20 ms and 80 ms: %s, want 40ms", got)
	}
	// The same task read again (tasks/get, then tasks/result) counts once;
	// cancelled tasks, running ones and prompts do not count.
	for _, tk := range []*taskstate.Task{
		finished("B", "t", taskstate.Completed, 80*ms),
		finished("C", "t", taskstate.Cancelled, time.Hour),
		finished("D", "t", taskstate.Working, time.Hour),
		{ID: "E", Kind: taskstate.KindPrompt, Tool: "t", Status: taskstate.Completed, LastUpdatedAt: time.Now()},
	} {
		d.observe(tk)
		if got := typical("t"); got < 39*ms || got > 41*ms {
			t.Errorf("after %s %s: %s, want 40ms still", tk.ID, tk.Status, got)
		}
	}
	// An outlier moves a settled estimate by a bounded factor.
	for i := range 20 {
		d.observe(finished(fmt.Sprint("F", i), "t", taskstate.Completed, 20*ms))
	}
	d.observe(finished("G", "t", taskstate.Completed, 10*time.Minute))
	if got := typical("t"); got < 20*ms || got > 100*ms {
		t.Errorf("a 10 min outlier after twenty 20 ms tasks: %s, want below 100ms", got)
	}
	// A clock skew that makes the task end before it began counts as 1 ms.
	d.observe(finished("H", "skew", taskstate.Completed, -time.Second))
	if got := typical("skew"); got != ms {
		t.Errorf("negative duration: %s, want 1ms", got)
	}
	if got := typical("never"); got != 0 {
		t.Errorf("unknown tool: %s, want 0", got)
	}
}

func TestDurationsBounded(t *testing.T) {
	var d durations
	for i := range maxTrackedTools + 10 {
		d.observe(finished("A", fmt.Sprint("tool", i), taskstate.Completed, time.Second))
	}
	if n := len(d.tools); n != maxTrackedTools {
		t.Errorf("%d tools tracked, want at most %d", n, maxTrackedTools)
	}
	if got := d.typical(&taskstate.Task{Tool: fmt.Sprint("tool", maxTrackedTools)}); got != 0 {
		t.Errorf("a tool past the bound has an estimate: %s", got)
	}
}

// The estimate is kept and read on every tasks/get of a finished task and
// every task answer: it must not allocate.
func TestDurationsDoNotAllocate(t *testing.T) {
	var d durations
	done := finished("A", "t", taskstate.Completed, 20*time.Millisecond)
	d.observe(done)
	other := finished("B", "t", taskstate.Completed, 30*time.Millisecond)
	i := 0
	if n := testing.AllocsPerRun(100, func() {
		i++
		if i%2 == 0 {
			d.observe(done)
		} else {
			d.observe(other)
		}
		_ = d.typical(done)
	}); n != 0 {
		t.Errorf("%v allocations per observe and typical, want 0", n)
	}
}
