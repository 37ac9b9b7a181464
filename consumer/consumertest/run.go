package consumertest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"sync"
	"time"

	"github.com/mcpqueue/mcpqueue/broker"
	"github.com/mcpqueue/mcpqueue/taskstate"
)

// Run is one call in progress.
type Run struct {
	h  *Harness
	id string

	mu       sync.Mutex
	answers  map[string]json.RawMessage // by the key the handler asked with
	asked    []Request
	progress []Progress
	logs     []Log
	flushes  int           // flush markers heard
	changed  chan struct{} // closed (and replaced) when any of the above grows
	poke     chan struct{} // room for one: the script changed
}

// Progress is one progress report (consumer.Call.Progress).
type Progress struct {
	Progress float64
	Total    float64 // 0 when the handler did not know it
	Message  string
}

// Log is one log message (consumer.Call.Log).
type Log struct {
	Level  string
	Logger string // the tool's name
	Data   json.RawMessage
}

// Request is one input request the handler made (consumer.Call.Ask).
type Request struct {
	// Key is the key the client sees: in a task, the handler's key with a
	// "-<n>" suffix that keeps it unique for the task's life.
	Key    string
	Method string // elicitation/create, sampling/createMessage, roots/list
	Params json.RawMessage
}

func newRun(h *Harness, id string, answers map[string]any) (*Run, error) {
	r := &Run{h: h, id: id, answers: map[string]json.RawMessage{}, changed: make(chan struct{}), poke: make(chan struct{}, 1)}
	for k, a := range answers {
		if err := r.script(k, a); err != nil {
			return nil, err
		}
	}
	return r, nil
}

func (r *Run) script(key string, answer any) error {
	b, err := json.Marshal(answer)
	if err != nil {
		return fmt.Errorf("consumertest: the answer to %q: %w", key, err)
	}
	r.mu.Lock()
	r.answers[key] = b
	r.mu.Unlock()
	return nil
}

// ID is the task's id (consumer.Call.TaskID).
func (r *Run) ID() string { return r.id }

// grewLocked wakes whoever waits for the run's notifications.
func (r *Run) grewLocked() {
	close(r.changed)
	r.changed = make(chan struct{})
}

// flushMarker is what Wait publishes after the outcome to know it heard
// every notification before it: the bus keeps a subscription's order.
var flushMarker = []byte("consumertest: flush")

// heard takes a notification of the task off the bus.
func (r *Run) heard(_ string, data []byte) {
	var n struct {
		Method string `json:"method"`
		Params struct {
			Progress float64         `json:"progress"`
			Total    float64         `json:"total"`
			Message  string          `json:"message"`
			Level    string          `json:"level"`
			Logger   string          `json:"logger"`
			Data     json.RawMessage `json:"data"`
		} `json:"params"`
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	switch {
	case string(data) == string(flushMarker):
		r.flushes++
	case json.Unmarshal(data, &n) != nil: // the end of notifications (empty)
		return
	case n.Method == "notifications/progress":
		r.progress = append(r.progress, Progress{n.Params.Progress, n.Params.Total, n.Params.Message})
	case n.Method == "notifications/message":
		r.logs = append(r.logs, Log{n.Params.Level, n.Params.Logger, n.Params.Data})
	default:
		return
	}
	r.grewLocked()
}

// Progress returns the progress reports heard so far, in order. After
// Wait it holds every report of the run.
func (r *Run) Progress() []Progress {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.progress)
}

// Logs returns the log messages heard so far, in order. After Wait it
// holds every message of the run.
func (r *Run) Logs() []Log {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.logs)
}

// Requests returns the input requests the handler made so far, in the
// order they were posted.
func (r *Run) Requests() []Request {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.asked)
}

// WaitProgress waits until the run reported progress at least n times and
// returns the reports, or ctx's error.
func (r *Run) WaitProgress(ctx context.Context, n int) ([]Progress, error) {
	if err := r.until(ctx, func() bool { return len(r.progress) >= n }); err != nil {
		return nil, err
	}
	return r.Progress(), nil
}

// until waits until cond (called under r.mu) holds, or ctx ends.
func (r *Run) until(ctx context.Context, cond func() bool) error {
	for {
		r.mu.Lock()
		ok, changed := cond(), r.changed
		r.mu.Unlock()
		if ok {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-changed:
		}
	}
}

// Answer scripts the answer to the requests of key (see the Answer
// option) while the run goes on: one it waits for now is answered at once.
func (r *Run) Answer(key string, answer any) error {
	if err := r.script(key, answer); err != nil {
		return err
	}
	select {
	case r.poke <- struct{}{}:
	default:
	}
	return nil
}

// suffix is what a task's input keys carry after the handler's key.
var suffix = regexp.MustCompile(`-[0-9]+$`)

// scripted returns the scripted answer to the request the client sees as
// key.
func (r *Run) scripted(key string) (json.RawMessage, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	a, ok := r.answers[suffix.ReplaceAllString(key, "")]
	return a, ok
}

// answer answers the run's input requests from the script, as tasks/update
// does, until the task ends. A parked task (no run waits) is resumed.
func (r *Run) answer(updates <-chan *taskstate.Task) {
	for {
		select {
		case _, ok := <-updates:
			if !ok {
				return
			}
		case <-r.poke:
		}
		r.reply()
	}
}

// note records the requests t posts that were not seen before.
func (r *Run) note(t *taskstate.Task) {
	keys := make([]string, 0, len(t.InputRequests))
	for k := range t.InputRequests {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, k := range keys {
		if slices.ContainsFunc(r.asked, func(q Request) bool { return q.Key == k }) {
			continue
		}
		var q struct {
			Method string          `json:"method"`
			Params json.RawMessage `json:"params"`
		}
		_ = json.Unmarshal(t.InputRequests[k], &q)
		r.asked = append(r.asked, Request{Key: k, Method: q.Method, Params: q.Params})
	}
}

func (r *Run) reply() {
	ctx := r.h.ctx
	resume := false
	t, err := taskstate.Mutate(ctx, r.h.store, r.id, time.Now, func(t *taskstate.Task) error {
		resume = false
		r.note(t)
		if t.Status != taskstate.InputRequired {
			return taskstate.ErrSkip
		}
		var n int
		n, resume = t.FileResponses(r.scripted) // a parked task (no run waits) resumes by this write
		if n == 0 {
			return taskstate.ErrSkip
		}
		return nil
	})
	if err == nil && resume {
		job := &broker.Job{TaskID: t.ID, Dedupe: t.JobKey(), Tool: t.Tool, Arguments: t.Arguments, Owner: t.Owner, Meta: t.Meta}
		_ = r.h.queue.Enqueue(ctx, job) // fails only once the harness is closed
	}
}

// unscripted reports whether t waits for an answer the script lacks.
func (r *Run) unscripted(t *taskstate.Task) bool {
	if t.Status != taskstate.InputRequired {
		return false
	}
	for k := range t.InputRequests {
		if _, ok := r.scripted(k); !ok {
			return true
		}
	}
	return false
}

// Wait waits until the call ends and the worker is done with it (its job
// settled, every notification heard), or until it waits for an answer the
// script does not hold (Outcome.Status input_required), and returns the
// outcome; or ctx's error.
func (r *Run) Wait(ctx context.Context) (*Outcome, error) {
	wctx, cancel := context.WithCancel(ctx) // ends the watch when Wait returns early
	defer cancel()
	updates, err := r.h.store.Watch(wctx, r.id)
	if err != nil {
		return nil, fmt.Errorf("consumertest: %w", err)
	}
	var last *taskstate.Task
	for t := range updates {
		last = t
		if r.unscripted(t) {
			r.note(t)
			return r.h.outcome(ctx, t)
		}
	}
	switch {
	case ctx.Err() != nil:
		return nil, ctx.Err()
	case last == nil || !last.Status.Terminal():
		return nil, errNoRecord
	}
	if err := r.h.queue.Settled(ctx, last.JobKey()); err != nil {
		return nil, err
	}
	if err := r.flush(ctx); err != nil {
		return nil, err
	}
	return r.h.outcome(ctx, last)
}

// flush returns once every notification published so far was heard.
func (r *Run) flush(ctx context.Context) error {
	r.mu.Lock()
	want := r.flushes + 1
	r.mu.Unlock()
	if err := r.h.bus.Publish(ctx, broker.TopicNotify, r.id, flushMarker); err != nil {
		return fmt.Errorf("consumertest: %w", err)
	}
	return r.until(ctx, func() bool { return r.flushes >= want })
}

// ErrEnded is returned by Cancel for a call that already ended.
var ErrEnded = errors.New("consumertest: the task already ended")

// Cancel cancels the call as tasks/cancel does: the record turns cancelled
// first, then the worker hears the broadcast and the handler's context
// ends with cause consumer.ErrTaskCancelled. Wait then returns the
// cancelled outcome once the handler has returned.
func (r *Run) Cancel(ctx context.Context) error {
	_, err := taskstate.Mutate(ctx, r.h.store, r.id, time.Now, func(t *taskstate.Task) error {
		if t.Status.Terminal() {
			return fmt.Errorf("%w (%s)", ErrEnded, t.Status)
		}
		t.Status = taskstate.Cancelled
		t.StatusMessage = "cancelled by consumertest"
		t.InputRequests, t.Lease, t.Parked = nil, nil, nil
		return nil
	})
	if err != nil {
		return err
	}
	return r.h.bus.Publish(ctx, broker.TopicCancel, r.id, nil)
}
