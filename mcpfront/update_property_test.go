package mcpfront

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"pgregory.net/rapid"

	"github.com/mcpqueue/mcpqueue/backend"
	"github.com/mcpqueue/mcpqueue/internal/testenv"
	"github.com/mcpqueue/mcpqueue/taskstate"
	"github.com/mcpqueue/mcpqueue/vocab"
)

// TestTasksUpdateKeys is a property test of how tasks/update applies
// inputResponses (answerInputs) against a model, on a real store: a worker
// posts input requests, a client answers any mix of outstanding, answered
// and unknown keys with valid and invalid results, and the task may end in
// between. The model (tasks/update in the Tasks extension,
// https://modelcontextprotocol.github.io/ext-tasks/specification/2026-07-28/tasks.html):
// an answered key sent again is ignored (it keeps its first answer); an
// invalid result for an outstanding key is a -32602 error naming it and
// changes nothing; a key neither outstanding nor answered is ignored beside
// outstanding ones, as the extension says, unless it is an outstanding
// key's handler key ("a" for "a-1"), and is a -32602 error naming the
// unknown and pending keys when nothing is outstanding (or the task ended),
// changing nothing; a subset leaves the task input_required with the rest
// outstanding; the last answer returns it to working.
func TestTasksUpdateKeys(t *testing.T) {
	t.Parallel()
	// Memory buckets: the storage type plays no part in key handling. Every
	// generated sequence gets a task of its own.
	st := testenv.StartNATS(t).Connect(t).Store
	front := New(nil, backend.Backend{Store: st}, &Config{StateKey: make([]byte, 32), Logger: zerolog.Nop()})
	rapid.Check(t, func(rt *rapid.T) {
		ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
		defer cancel()
		now := time.Now().UTC()
		task := &taskstate.Task{ID: taskstate.NewID(), Tool: "t", Era: taskstate.Era20260728, Mode: taskstate.ModeTask,
			Status: taskstate.Working, CreatedAt: now, LastUpdatedAt: now}
		if err := st.Create(ctx, task); err != nil {
			rt.Fatalf("Create: %v", err)
		}
		m := &updateMachine{
			ctx: ctx, store: st, id: task.ID, rev: task.Revision,
			srv:  front,
			want: inputModel{status: taskstate.Working, requests: map[string]string{}, answers: map[string]string{}},
		}
		rt.Repeat(rapid.StateMachineActions(m))
	})
}

// inputModel is the part of the record tasks/update touches.
type inputModel struct {
	status   taskstate.Status
	requests map[string]string // outstanding key → method
	answers  map[string]string // answered key → the answer stored
}

func (m inputModel) String() string {
	return fmt.Sprintf("{%s requests=%v answers=%v}", m.status, m.requests, m.answers)
}

var (
	inputKeys    = []string{"a", "b", "c", "a-1"} // few, so keys are asked, answered and re-sent; "a" is a-1's handler key
	inputMethods = []string{"elicitation/create", "sampling/createMessage", "roots/list", "x/custom"}
)

// answerKind is a shape of client answer and the methods it is a valid
// result of; "x/custom" (a method the server does not know) takes any
// object.
type answerKind struct {
	format  string // %d: a number that makes each answer distinct
	validOf []string
}

var answerKinds = []answerKind{
	{`{"action":"accept","content":{"n":%d}}`, []string{"elicitation/create", "x/custom"}},
	{`{"action":"decline","n":%d}`, []string{"elicitation/create", "x/custom"}},
	{`{"role":"assistant","content":{"type":"text","text":"%d"}}`, []string{"sampling/createMessage", "x/custom"}},
	{`{"roots":[],"n":%d}`, []string{"roots/list", "x/custom"}},
	{`{"action":"maybe","n":%d}`, []string{"x/custom"}},
	{`{"action":"accept","content":"%d"}`, []string{"x/custom"}},
	{`"%d"`, nil},
	{`null`, nil},
}

type updateMachine struct {
	ctx   context.Context
	store taskstate.Store
	srv   *Server
	id    string
	rev   uint64 // the stored revision at the last Check
	wrote bool   // the model changed since: the revision must have risen
	want  inputModel
	n     int
}

// Ask: the worker posts input requests as consumer.askTask does: keys
// already open or answered are not posted again.
func (m *updateMachine) Ask(t *rapid.T) {
	keys := rapid.SliceOfNDistinct(rapid.SampledFrom(inputKeys), 1, 2, rapid.ID).Draw(t, "ask")
	methods := map[string]string{}
	for _, k := range keys {
		methods[k] = rapid.SampledFrom(inputMethods).Draw(t, "method of "+k)
	}
	got, err := taskstate.Mutate(m.ctx, m.store, m.id, time.Now, func(t *taskstate.Task) error {
		changed := false
		for k, method := range methods {
			_, done := t.InputResponses[k]
			_, open := t.InputRequests[k]
			if done || open {
				continue
			}
			if t.InputRequests == nil {
				t.InputRequests = map[string]json.RawMessage{}
			}
			t.InputRequests[k] = json.RawMessage(`{"method":"` + method + `"}`)
			changed = true
		}
		if len(t.InputRequests) > 0 && t.Status == taskstate.Working {
			t.Status, changed = taskstate.InputRequired, true
		}
		if !changed {
			return taskstate.ErrSkip
		}
		return nil
	})
	if errors.Is(err, taskstate.ErrSkip) || errors.Is(err, taskstate.ErrInvalidChange) && m.want.status.Terminal() {
		return
	}
	if err != nil {
		t.Fatalf("posting %v: %v", methods, err)
	}
	for k, method := range methods {
		_, done := m.want.answers[k]
		if _, open := m.want.requests[k]; !open && !done {
			m.want.requests[k] = method
		}
	}
	if len(m.want.requests) > 0 && m.want.status == taskstate.Working {
		m.want.status = taskstate.InputRequired
	}
	m.wrote = got.Revision > m.rev
	if !m.wrote {
		t.Fatalf("posting %v: revision %d after %d", methods, got.Revision, m.rev)
	}
}

// Update: a client sends tasks/update with any keys and answers.
func (m *updateMachine) Update(t *rapid.T) {
	keys := rapid.SliceOfDistinct(rapid.SampledFrom(append(inputKeys, "zz")), rapid.ID).Draw(t, "keys")
	responses := map[string]json.RawMessage{}
	kinds := map[string]answerKind{}
	for _, k := range keys {
		m.n++
		kind := rapid.SampledFrom(answerKinds).Draw(t, "answer to "+k)
		kinds[k] = kind
		responses[k] = json.RawMessage(strings.ReplaceAll(kind.format, "%d", fmt.Sprint(m.n)))
	}
	// The model: every outstanding key's answer is checked first.
	var invalid []string
	for k, kind := range kinds {
		if method, open := m.want.requests[k]; open && !slices.Contains(kind.validOf, method) {
			invalid = append(invalid, k)
		}
	}
	snapshot, err := m.store.Get(m.ctx, m.id) // what tasks/update loads first
	if err != nil {
		t.Fatalf("Get: %v", err)
	}
	rerr := m.srv.answerInputs(m.ctx, snapshot, responses, true, false)
	if len(invalid) > 0 {
		if rerr == nil || rerr.Code != vocab.CodeInvalidParams || !slices.ContainsFunc(invalid, func(k string) bool {
			return strings.HasPrefix(rerr.Message, fmt.Sprintf("invalid params: inputResponses[%q]: ", k))
		}) {
			t.Fatalf("answers %s to %s: %v; want -32602 naming one of %v", responses, m.want, rerr, invalid)
		}
		return // Check: nothing changed
	}
	// Then the keys: one neither open (an ended task has none open) nor
	// answered is stray; strays are an error when nothing is open or one
	// is an open key as its handler wrote it ("a" for "a-1").
	open := m.want.requests
	if m.want.status.Terminal() {
		open = nil
	}
	var stray []string
	handlerKey := false
	for k := range kinds {
		_, isOpen := open[k]
		_, done := m.want.answers[k]
		if !isOpen && !done {
			stray = append(stray, k)
			_, aOpen := open["a-1"]
			handlerKey = handlerKey || k == "a" && aOpen
		}
	}
	if len(stray) > 0 && (len(open) == 0 || handlerKey) {
		slices.Sort(stray)
		var data struct {
			UnknownKeys []string `json:"unknownKeys"`
			PendingKeys []string `json:"pendingKeys"`
		}
		if rerr != nil {
			_ = json.Unmarshal(rerr.Data, &data)
		}
		unknown, pending := data.UnknownKeys, data.PendingKeys
		if rerr == nil || rerr.Code != vocab.CodeInvalidParams || !strings.Contains(rerr.Message, "no pending input request") ||
			!slices.Equal(unknown, stray) || !slices.Equal(pending, slices.Sorted(maps.Keys(open))) {
			t.Fatalf("answers %s to %s: %+v; want -32602 naming %v", responses, m.want, rerr, stray)
		}
		return // Check: nothing changed
	}
	if rerr != nil {
		t.Fatalf("answers %s to %s: %v", responses, m.want, rerr)
	}
	answered := false
	for k, v := range responses {
		if _, open := m.want.requests[k]; open && !m.want.status.Terminal() {
			delete(m.want.requests, k)
			m.want.answers[k] = string(v)
			answered = true
		}
	}
	if answered {
		if len(m.want.requests) == 0 && m.want.status == taskstate.InputRequired {
			m.want.status = taskstate.Working
		}
		m.wrote = true
	}
}

// End: the task completes or is cancelled, possibly with requests open.
func (m *updateMachine) End(t *rapid.T) {
	if m.want.status.Terminal() {
		t.Skip("already ended")
	}
	status := rapid.SampledFrom([]taskstate.Status{taskstate.Completed, taskstate.Cancelled}).Draw(t, "end")
	got, err := taskstate.Mutate(m.ctx, m.store, m.id, time.Now, func(t *taskstate.Task) error {
		t.Status = status
		return nil
	})
	if err != nil {
		t.Fatalf("ending the task: %v", err)
	}
	m.want.status, m.wrote = status, got.Revision > m.rev
	if !m.wrote {
		t.Fatalf("ending the task: revision %d after %d", got.Revision, m.rev)
	}
}

// Check: the stored record is the model; no key is both outstanding and
// answered; input_required always has something outstanding; the revision
// moved only when the model changed.
func (m *updateMachine) Check(t *rapid.T) {
	got, err := m.store.Get(m.ctx, m.id)
	if err != nil {
		t.Fatalf("Get: %v", err)
	}
	requests, answers := map[string]string{}, map[string]string{}
	for k, raw := range got.InputRequests {
		var r struct{ Method string }
		_ = json.Unmarshal(raw, &r)
		requests[k] = r.Method
	}
	for k, raw := range got.InputResponses {
		answers[k] = string(raw)
		if _, open := got.InputRequests[k]; open {
			t.Fatalf("key %q is both outstanding and answered", k)
		}
	}
	stored := inputModel{status: got.Status, requests: requests, answers: answers}
	if got.Status != m.want.status || !maps.Equal(requests, m.want.requests) || !maps.Equal(answers, m.want.answers) {
		t.Fatalf("stored %s, model %s", stored, m.want)
	}
	if got.Status == taskstate.InputRequired && len(requests) == 0 {
		t.Fatalf("input_required with nothing outstanding")
	}
	if m.wrote && got.Revision <= m.rev || !m.wrote && got.Revision != m.rev {
		t.Fatalf("revision %d after %d (model changed: %v)", got.Revision, m.rev, m.wrote)
	}
	m.rev, m.wrote = got.Revision, false
}
