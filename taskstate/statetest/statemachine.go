package statetest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/mcpqueue/mcpqueue/taskstate"
)

// StatusMachine is a property test of the status machine as
// taskstate.Mutate and taskstate.MutateFrom enforce it on a real store:
// random sequences of what a worker, a client and a stale writer do to one
// record run against the store and against a model of the record, and after
// every step the stored record must equal the model. Along the way it checks
// that a terminal status never changes (a cancelled task stays cancelled, no
// later result overwrites it), that only allowed transitions are written,
// that every write raises the revision, and that a write from a stale
// revision gets ErrConflict and changes nothing.
//
// Each generated sequence (rapid check; -rapid.checks sets how many) works
// on a task of its own in st. Fresh buckets per sequence would isolate no
// better, as every operation addresses one record, and cost ten times the
// run time.
func StatusMachine(t *testing.T, st taskstate.Store) {
	rapid.Check(t, func(rt *rapid.T) {
		ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
		defer cancel()
		task := newTask()
		if err := st.Create(ctx, task); err != nil {
			rt.Fatalf("Create: %v", err)
		}
		m := &machine{ctx: ctx, store: st, id: task.ID, versions: []*taskstate.Task{task},
			want: record{status: taskstate.Working, requests: map[string]bool{}, answers: map[string]bool{}}}
		rt.Repeat(rapid.StateMachineActions(m))
	})
}

// record is the model: the part of a task record the operations change.
type record struct {
	status   taskstate.Status
	message  string
	result   string
	attempt  int
	requests map[string]bool // outstanding input request keys
	answers  map[string]bool // answered keys
}

func (r record) clone() record {
	r.requests, r.answers = maps.Clone(r.requests), maps.Clone(r.answers)
	return r
}

func recordOf(t *taskstate.Task) record {
	r := record{status: t.Status, message: t.StatusMessage, result: string(t.Result), attempt: t.Attempt,
		requests: map[string]bool{}, answers: map[string]bool{}}
	for k := range t.InputRequests {
		r.requests[k] = true
	}
	for k := range t.InputResponses {
		r.answers[k] = true
	}
	return r
}

func (r record) String() string {
	return fmt.Sprintf("{%s msg=%q result=%s attempt=%d requests=%v answers=%v}", r.status, r.message, r.result, r.attempt,
		slices.Sorted(maps.Keys(r.requests)), slices.Sorted(maps.Keys(r.answers)))
}

func sameModel(a, b record) bool {
	return a.status == b.status && a.message == b.message && a.result == b.result && a.attempt == b.attempt &&
		maps.Equal(a.requests, b.requests) && maps.Equal(a.answers, b.answers)
}

type machine struct {
	ctx      context.Context
	store    taskstate.Store
	id       string
	versions []*taskstate.Task // every version written, oldest first
	want     record
	keys     int // input request keys handed out
	steps    int
}

func (m *machine) latest() *taskstate.Task { return m.versions[len(m.versions)-1] }

// from picks what a writer starts from: nothing (read first), the latest
// version, or an older one (a writer that missed later changes).
func (m *machine) from(t *rapid.T) *taskstate.Task {
	i := rapid.IntRange(-1, len(m.versions)-1).Draw(t, "from")
	if i < 0 {
		return nil
	}
	return m.versions[i]
}

// mutate runs decide through MutateFrom and checks the outcome against
// model: the model's next record, or the error it expects (the record then
// unchanged).
func (m *machine) mutate(t *rapid.T, what string, decide func(*taskstate.Task) error, model func(r *record) error) {
	m.steps++
	next := m.want.clone()
	wantErr := model(&next)
	before := m.latest()
	got, err := taskstate.MutateFrom(m.ctx, m.store, m.from(t), m.id, func() time.Time { return time.Now() }, decide)
	switch {
	case wantErr != nil:
		if !errors.Is(err, wantErr) {
			t.Fatalf("%s on %s: error %v, want %v", what, m.want, err, wantErr)
		}
		return // Check compares the store with the unchanged model
	case err != nil:
		t.Fatalf("%s on %s: %v", what, m.want, err)
	}
	if got.Revision <= before.Revision {
		t.Fatalf("%s: revision %d after %d; revisions must increase", what, got.Revision, before.Revision)
	}
	if !taskstate.CanTransition(before.Status, got.Status) {
		t.Fatalf("%s: wrote %s → %s", what, before.Status, got.Status)
	}
	m.want = next
	m.versions = append(m.versions, got)
}

// terminal is the model of Mutate's rule: a terminal record never changes.
func terminal(r *record) error {
	if r.status.Terminal() {
		return taskstate.ErrInvalidChange
	}
	return nil
}

// Take: a worker (re)takes the task: a new attempt, working.
func (m *machine) Take(t *rapid.T) {
	lease := &taskstate.Lease{Worker: "w", Expires: time.Now().Add(time.Minute)}
	m.mutate(t, "take", func(t *taskstate.Task) error {
		t.Attempt++
		t.Lease = lease
		t.Status = taskstate.Working
		return nil
	}, func(r *record) error {
		err := terminal(r)
		r.attempt++
		r.status = taskstate.Working
		return err
	})
}

// Progress: the handler reports progress.
func (m *machine) Progress(t *rapid.T) {
	msg := fmt.Sprintf("step %d", m.steps)
	m.mutate(t, "progress", func(t *taskstate.Task) error {
		t.StatusMessage = msg
		return nil
	}, func(r *record) error {
		r.message = msg
		return terminal(r)
	})
}

// Ask: the handler posts an input request.
func (m *machine) Ask(t *rapid.T) {
	m.keys++
	key := fmt.Sprintf("k%d", m.keys)
	m.mutate(t, "input_required", func(t *taskstate.Task) error {
		if t.InputRequests == nil {
			t.InputRequests = map[string]json.RawMessage{}
		}
		t.InputRequests[key] = json.RawMessage(`{"method":"elicitation/create"}`)
		t.Status = taskstate.InputRequired
		return nil
	}, func(r *record) error {
		err := terminal(r)
		r.requests[key] = true
		r.status = taskstate.InputRequired
		return err
	})
}

// Answer: a client answers every outstanding request (tasks/update);
// nothing outstanding writes nothing.
func (m *machine) Answer(t *rapid.T) {
	m.mutate(t, "answer", func(t *taskstate.Task) error {
		if len(t.InputRequests) == 0 {
			return taskstate.ErrSkip
		}
		if t.InputResponses == nil {
			t.InputResponses = map[string]json.RawMessage{}
		}
		for k := range t.InputRequests {
			t.InputResponses[k] = json.RawMessage(`{"action":"accept"}`)
		}
		t.InputRequests = nil
		if t.Status == taskstate.InputRequired {
			t.Status = taskstate.Working
		}
		return nil
	}, func(r *record) error {
		if len(r.requests) == 0 {
			return taskstate.ErrSkip
		}
		for k := range r.requests {
			r.answers[k] = true
		}
		r.requests = map[string]bool{}
		err := terminal(r)
		if r.status == taskstate.InputRequired {
			r.status = taskstate.Working
		}
		return err
	})
}

// end moves the task to a terminal status with a result naming the step.
func (m *machine) end(t *rapid.T, status taskstate.Status) {
	result := fmt.Sprintf(`{"step":%d}`, m.steps)
	m.mutate(t, string(status), func(t *taskstate.Task) error {
		t.Status = status
		t.Result = json.RawMessage(result)
		return nil
	}, func(r *record) error {
		err := terminal(r)
		r.status, r.result = status, result
		return err
	})
}

func (m *machine) Complete(t *rapid.T) { m.end(t, taskstate.Completed) }
func (m *machine) Fail(t *rapid.T)     { m.end(t, taskstate.Failed) }
func (m *machine) Cancel(t *rapid.T)   { m.end(t, taskstate.Cancelled) }

// Invalid: a status outside the machine is never written.
func (m *machine) Invalid(t *rapid.T) {
	bad := rapid.SampledFrom([]taskstate.Status{"", "done", "Working"}).Draw(t, "status")
	m.mutate(t, "invalid status", func(t *taskstate.Task) error {
		t.Status = bad
		return nil
	}, func(*record) error { return taskstate.ErrInvalidChange })
}

// StaleUpdate: a writer holding an older version writes it back with a
// change: ErrConflict, whatever the change.
func (m *machine) StaleUpdate(t *rapid.T) {
	if len(m.versions) < 2 {
		t.Skip("no older version yet")
	}
	old := m.versions[rapid.IntRange(0, len(m.versions)-2).Draw(t, "version")].Clone()
	old.Status = rapid.SampledFrom([]taskstate.Status{taskstate.Working, taskstate.Completed, taskstate.Cancelled}).Draw(t, "stale status")
	old.Result = json.RawMessage(`{"stale":true}`)
	if err := m.store.Update(m.ctx, old); !errors.Is(err, taskstate.ErrConflict) {
		t.Fatalf("Update from revision %d (latest %d): %v, want ErrConflict", old.Revision, m.latest().Revision, err)
	}
}

// Check: the stored record is the model, at the latest revision.
func (m *machine) Check(t *rapid.T) {
	got, err := m.store.Get(m.ctx, m.id)
	if err != nil {
		t.Fatalf("Get: %v", err)
	}
	if g := recordOf(got); !sameModel(g, m.want) {
		t.Fatalf("stored %s, model %s", g, m.want)
	}
	if got.Revision != m.latest().Revision {
		t.Fatalf("stored revision %d, last written %d", got.Revision, m.latest().Revision)
	}
}
