// Package statetest is the contract suite every taskstate.Store and
// taskstate.Catalog implementation passes, so NATS KV and Redis behave the
// same by construction. An implementation's test calls Run with a constructor
// that returns a fresh, isolated store (its own bucket or key prefix) for
// each subtest; subtests run in parallel.
package statetest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mcpqueue/mcpqueue/taskstate"
)

// Options tells the suite how the stores under test are configured. A nil
// *Options is valid.
type Options struct {
	// ToolTTL is how long a catalog entry lives without a refresh in the
	// stores newStore returns (natskv.Config.ToolTTL, say). The expiry test
	// waits about this long, so keep it short, but long enough that the
	// other catalog subtests finish well within it: 2s is a good value.
	// Zero skips the catalog expiry test.
	ToolTTL time.Duration
	// Wait bounds every wait for something the store should do by itself
	// (a watch delivery, an expiry beyond its TTL). Default 10s.
	Wait time.Duration
}

func (o *Options) withDefaults() Options {
	var out Options
	if o != nil {
		out = *o
	}
	if out.Wait <= 0 {
		out.Wait = 10 * time.Second
	}
	return out
}

// terminalTTL is the retention the suite gives terminal records it expects
// to expire. One second is the smallest JetStream per-message TTL.
const terminalTTL = time.Second

// NewStoreFunc returns a fresh store for one subtest; cleanup goes in
// t.Cleanup. Store and Catalog may be the same value.
type NewStoreFunc func(t *testing.T) (taskstate.Store, taskstate.Catalog)

// Run runs the whole contract suite as parallel subtests of t.
func Run(t *testing.T, newStore NewStoreFunc, opts *Options) {
	o := opts.withDefaults()
	s := &suite{newStore: newStore, opts: o}
	tests := []struct {
		name string
		fn   func(*testing.T, *env)
	}{
		{"CreateGetRoundTrip", s.createGetRoundTrip},
		{"CreateDuplicate", s.createDuplicate},
		{"CreateInvalidID", s.createInvalidID},
		{"GetUnknown", s.getUnknown},
		{"UpdateBumpsRevision", s.updateBumpsRevision},
		{"UpdateStaleRevision", s.updateStaleRevision},
		{"UpdateUnknown", s.updateUnknown},
		{"MutateConcurrent", s.mutateConcurrent},
		{"MutateStampsLastUpdated", s.mutateStampsLastUpdated},
		{"MutateTerminalRefused", s.mutateTerminalRefused},
		{"MutateInvalidTransition", s.mutateInvalidTransition},
		{"MutateSkip", s.mutateSkip},
		{"MutateUnknown", s.mutateUnknown},
		{"WatchVersions", s.watchVersions},
		{"WatchBurstEndsTerminal", s.watchBurstEndsTerminal},
		{"WatchAlreadyTerminal", s.watchAlreadyTerminal},
		{"WatchContextCancel", s.watchContextCancel},
		{"WatchUnknown", s.watchUnknown},
		{"TerminalTTL", s.terminalTTL},
		{"CatalogRoundTrip", s.catalogRoundTrip},
		{"CatalogSorted", s.catalogSorted},
		{"CatalogRepublish", s.catalogRepublish},
		{"CatalogUnknown", s.catalogUnknown},
		{"CatalogNamesDistinct", s.catalogNamesDistinct},
		{"CatalogKindsDistinct", s.catalogKindsDistinct},
		{"CatalogExpiry", s.catalogExpiry},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			st, cat := newStore(t)
			if st == nil || cat == nil {
				t.Fatal("newStore returned a nil Store or Catalog")
			}
			ctx, cancel := context.WithTimeout(t.Context(), 3*o.Wait+time.Minute)
			defer cancel()
			tc.fn(t, &env{ctx: ctx, store: st, cat: cat})
		})
	}
}

type suite struct {
	newStore NewStoreFunc
	opts     Options
}

type env struct {
	ctx   context.Context
	store taskstate.Store
	cat   taskstate.Catalog
}

// newTask returns a working task with a fresh id and every field that a
// freshly created record has.
func newTask() *taskstate.Task {
	now := time.Now().UTC()
	return &taskstate.Task{
		ID:             taskstate.NewID(),
		Tool:           "echo",
		Arguments:      json.RawMessage(`{"text":"hi"}`),
		Era:            taskstate.Era20260728,
		Mode:           taskstate.ModeTask,
		Status:         taskstate.Working,
		CreatedAt:      now,
		LastUpdatedAt:  now,
		TTLMs:          60_000,
		PollIntervalMs: 500,
	}
}

func (e *env) create(t *testing.T, task *taskstate.Task) *taskstate.Task {
	t.Helper()
	if err := e.store.Create(e.ctx, task); err != nil {
		t.Fatalf("Create(%s): %v", task.ID, err)
	}
	return task
}

func (e *env) get(t *testing.T, id string) *taskstate.Task {
	t.Helper()
	got, err := e.store.Get(e.ctx, id)
	if err != nil {
		t.Fatalf("Get(%s): %v", id, err)
	}
	return got
}

// mutate runs taskstate.Mutate and fails the test on error.
func (e *env) mutate(t *testing.T, id string, decide func(*taskstate.Task)) *taskstate.Task {
	t.Helper()
	got, err := taskstate.Mutate(e.ctx, e.store, id, time.Now, func(t *taskstate.Task) error {
		decide(t)
		return nil
	})
	if err != nil {
		t.Fatalf("Mutate(%s): %v", id, err)
	}
	return got
}

func encode(t *testing.T, task *taskstate.Task) string {
	t.Helper()
	b, err := taskstate.Encode(task)
	if err != nil {
		t.Fatalf("Encode: %v", err)
	}
	return string(b)
}

// sameRecord fails unless got and want serialize identically and carry the
// same revision.
func sameRecord(t *testing.T, what string, got, want *taskstate.Task) {
	t.Helper()
	if g, w := encode(t, got), encode(t, want); g != w {
		t.Fatalf("%s: record differs\n got %s\nwant %s", what, g, w)
	}
	if got.Revision != want.Revision {
		t.Fatalf("%s: revision %d, want %d", what, got.Revision, want.Revision)
	}
}

// eventually polls cond every 50ms until it reports true or wait passes.
func eventually(t *testing.T, wait time.Duration, what string, cond func() (bool, error)) {
	t.Helper()
	deadline := time.Now().Add(wait)
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		ok, err := cond()
		if err != nil {
			t.Fatalf("waiting for %s: %v", what, err)
		}
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s did not happen within %s", what, wait)
		}
		<-tick.C
	}
}

// --- records ---

func (s *suite) createGetRoundTrip(t *testing.T, e *env) {
	at := time.Date(2026, 7, 28, 12, 34, 56, 789_000_000, time.UTC)
	want := &taskstate.Task{
		ID:             taskstate.NewID(),
		Tool:           "render.report_v2",
		Arguments:      json.RawMessage(`{"pages":[1,2,3],"title":"Q3 ✓"}`),
		Owner:          "alice@example.com",
		Era:            taskstate.Era20251125,
		Mode:           taskstate.ModeGather,
		Status:         taskstate.InputRequired,
		StatusMessage:  "waiting for approval",
		CreatedAt:      at,
		LastUpdatedAt:  at.Add(1500 * time.Millisecond),
		TTLMs:          3_600_000,
		PollIntervalMs: 750,
		Result:         json.RawMessage(`{"content":[{"type":"text","text":"partial"}]}`),
		Error:          &taskstate.RPCError{Code: -32603, Message: "earlier attempt failed", Data: json.RawMessage(`{"retry":true}`)},
		InputRequests: map[string]json.RawMessage{
			"k1": json.RawMessage(`{"method":"elicitation/create","params":{"message":"ok?"}}`),
			"k2": json.RawMessage(`{"method":"sampling/createMessage"}`),
		},
		InputResponses: map[string]json.RawMessage{
			"k0": json.RawMessage(`{"action":"accept","content":{"ok":true}}`),
		},
		Attempt: 3,
		Lease:   &taskstate.Lease{Worker: "worker-7", Expires: at.Add(30 * time.Second)},
		Meta: map[string]json.RawMessage{
			"traceparent":   json.RawMessage(`"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"`),
			"progressToken": json.RawMessage(`17`),
		},
	}
	in := want.Clone()
	if err := e.store.Create(e.ctx, in); err != nil {
		t.Fatalf("Create: %v", err)
	}
	if in.Revision == 0 {
		t.Fatal("Create left Revision at 0; it must set the stored revision")
	}
	want.Revision = in.Revision

	got := e.get(t, want.ID)
	sameRecord(t, "Get after Create", got, want)
	if got == in {
		t.Fatal("Get returned the caller's own pointer")
	}
	// Every field survived, not just the serialization: spot-check types.
	if !got.CreatedAt.Equal(at) || got.Lease == nil || !got.Lease.Expires.Equal(at.Add(30*time.Second)) {
		t.Fatalf("times did not round-trip: createdAt %v lease %+v", got.CreatedAt, got.Lease)
	}
	if got.Error == nil || got.Error.Code != -32603 || len(got.InputRequests) != 2 || len(got.InputResponses) != 1 || len(got.Meta) != 2 {
		t.Fatalf("nested fields did not round-trip: %+v", got)
	}

	// Reading again gives the same thing, and mutating what Get returned
	// changes nothing stored.
	got.InputRequests["k3"] = json.RawMessage(`{}`)
	got.Status = taskstate.Failed
	sameRecord(t, "second Get", e.get(t, want.ID), want)
}

func (s *suite) createDuplicate(t *testing.T, e *env) {
	first := e.create(t, newTask())
	dup := newTask()
	dup.ID = first.ID
	dup.Tool = "other"
	dup.Status = taskstate.Completed
	err := e.store.Create(e.ctx, dup)
	if !errors.Is(err, taskstate.ErrExists) {
		t.Fatalf("Create of an existing id: err = %v, want ErrExists", err)
	}
	sameRecord(t, "record after duplicate Create", e.get(t, first.ID), first)
}

func (s *suite) createInvalidID(t *testing.T, e *env) {
	for _, id := range []string{"", "short", "has.dots.in.it.xxxx", "wild*card*xxxxxxxxx", "spaces are not ok here"} {
		task := newTask()
		task.ID = id
		err := e.store.Create(e.ctx, task)
		if err == nil {
			t.Errorf("Create(%q) succeeded; ids that ValidID refuses must be refused", id)
			continue
		}
		if errors.Is(err, taskstate.ErrExists) {
			t.Errorf("Create(%q) = %v; an invalid id is not a duplicate", id, err)
		}
	}
}

func (s *suite) getUnknown(t *testing.T, e *env) {
	e.create(t, newTask()) // the store is not empty
	ids := []string{
		taskstate.NewID(), // well formed, never created
		"", "x", "..", "a.b.c", "*", ">", "foo.*", "foo.>", "has space",
		"../../../../etc/passwd", "ABCDEFGHIJKLMNOP\r\nX-Injected: 1",
		"ÄÖÜäöüß-not-ascii-0123456789", strings.Repeat("A", 1000), "$KV.x.y",
	}
	for _, id := range ids {
		got, err := e.store.Get(e.ctx, id)
		if !errors.Is(err, taskstate.ErrNotFound) {
			t.Errorf("Get(%.40q) = %v, %v; want ErrNotFound", id, got, err)
		}
	}
}

func (s *suite) updateBumpsRevision(t *testing.T, e *env) {
	task := e.create(t, newTask())
	created := task.Revision

	next := task.Clone()
	next.StatusMessage = "step 1"
	if err := e.store.Update(e.ctx, next); err != nil {
		t.Fatalf("Update: %v", err)
	}
	if next.Revision == created || next.Revision == 0 {
		t.Fatalf("Update left revision %d (created at %d); it must set a new one", next.Revision, created)
	}
	sameRecord(t, "Get after Update", e.get(t, task.ID), next)

	// The revision Update returned is the one to use next.
	again := next.Clone()
	again.StatusMessage = "step 2"
	if err := e.store.Update(e.ctx, again); err != nil {
		t.Fatalf("second Update with the returned revision: %v", err)
	}
	sameRecord(t, "Get after second Update", e.get(t, task.ID), again)
}

func (s *suite) updateStaleRevision(t *testing.T, e *env) {
	task := e.create(t, newTask())
	a, b := task.Clone(), task.Clone() // two writers read the same version

	a.StatusMessage = "writer A"
	if err := e.store.Update(e.ctx, a); err != nil {
		t.Fatalf("first writer: %v", err)
	}
	b.StatusMessage = "writer B"
	b.Status = taskstate.Completed
	err := e.store.Update(e.ctx, b)
	if !errors.Is(err, taskstate.ErrConflict) {
		t.Fatalf("Update with a stale revision: err = %v, want ErrConflict", err)
	}
	sameRecord(t, "record after lost race", e.get(t, task.ID), a)

	// Revision 0 is never current for an existing record.
	z := a.Clone()
	z.Revision = 0
	z.StatusMessage = "zero"
	if err := e.store.Update(e.ctx, z); !errors.Is(err, taskstate.ErrConflict) {
		t.Fatalf("Update with revision 0 of an existing record: err = %v, want ErrConflict", err)
	}
	sameRecord(t, "record after revision-0 update", e.get(t, task.ID), a)
}

func (s *suite) updateUnknown(t *testing.T, e *env) {
	existing := e.create(t, newTask())
	for _, rev := range []uint64{0, 1, existing.Revision} {
		task := newTask()
		task.Revision = rev
		err := e.store.Update(e.ctx, task)
		if !errors.Is(err, taskstate.ErrNotFound) && !errors.Is(err, taskstate.ErrConflict) {
			t.Errorf("Update of an unknown id with revision %d: err = %v, want ErrNotFound or ErrConflict", rev, err)
		}
		if _, err := e.store.Get(e.ctx, task.ID); !errors.Is(err, taskstate.ErrNotFound) {
			t.Errorf("Update of an unknown id with revision %d created it (Get err = %v)", rev, err)
		}
	}
}

func (s *suite) mutateConcurrent(t *testing.T, e *env) {
	const n = 16
	task := e.create(t, newTask())
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		revs = map[uint64]bool{}
		errs []error
	)
	start := make(chan struct{})
	for range n {
		wg.Go(func() {
			<-start
			got, err := taskstate.Mutate(e.ctx, e.store, task.ID, time.Now, func(t *taskstate.Task) error {
				t.Attempt++
				return nil
			})
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				errs = append(errs, err)
				return
			}
			revs[got.Revision] = true
		})
	}
	close(start)
	wg.Wait()
	for _, err := range errs {
		t.Errorf("concurrent Mutate: %v", err)
	}
	got := e.get(t, task.ID)
	if got.Attempt != n {
		t.Fatalf("after %d concurrent increments Attempt = %d: compare-and-set lost writes", n, got.Attempt)
	}
	if len(revs) != n {
		t.Fatalf("%d successful Mutates returned %d distinct revisions", n, len(revs))
	}
	if !revs[got.Revision] {
		t.Fatalf("stored revision %d is not one any Mutate returned", got.Revision)
	}
}

func (s *suite) mutateStampsLastUpdated(t *testing.T, e *env) {
	task := e.create(t, newTask())
	at := time.Date(2030, 1, 2, 3, 4, 5, 0, time.FixedZone("X", 3600))
	got, err := taskstate.Mutate(e.ctx, e.store, task.ID, func() time.Time { return at }, func(t *taskstate.Task) error {
		t.StatusMessage = "stamped"
		return nil
	})
	if err != nil {
		t.Fatalf("Mutate: %v", err)
	}
	stored := e.get(t, task.ID)
	sameRecord(t, "Get after Mutate", stored, got)
	if !stored.LastUpdatedAt.Equal(at) || stored.LastUpdatedAt.Location() != time.UTC {
		t.Fatalf("LastUpdatedAt = %v, want %v in UTC", stored.LastUpdatedAt, at.UTC())
	}
	if stored.StatusMessage != "stamped" {
		t.Fatalf("StatusMessage = %q, want %q", stored.StatusMessage, "stamped")
	}
}

func (s *suite) mutateTerminalRefused(t *testing.T, e *env) {
	for _, final := range []taskstate.Status{taskstate.Completed, taskstate.Failed, taskstate.Cancelled} {
		task := e.create(t, newTask())
		done := e.mutate(t, task.ID, func(t *taskstate.Task) { t.Status = final })

		for _, to := range []taskstate.Status{taskstate.Working, taskstate.InputRequired, taskstate.Completed, taskstate.Failed, taskstate.Cancelled} {
			called := false
			cur, err := taskstate.Mutate(e.ctx, e.store, task.ID, time.Now, func(t *taskstate.Task) error {
				called = true
				t.Status = to
				t.StatusMessage = "should not be written"
				t.Attempt = 99
				return nil
			})
			if !errors.Is(err, taskstate.ErrInvalidChange) {
				t.Errorf("Mutate %s → %s: err = %v, want ErrInvalidChange", final, to, err)
			}
			if !called {
				t.Errorf("Mutate %s → %s never called decide", final, to)
			}
			if cur == nil || cur.Status != final {
				t.Errorf("Mutate %s → %s returned %+v, want the current (terminal) record", final, to, cur)
			}
		}
		sameRecord(t, fmt.Sprintf("%s record after refused changes", final), e.get(t, task.ID), done)
	}
}

func (s *suite) mutateInvalidTransition(t *testing.T, e *env) {
	task := e.create(t, newTask())
	for _, to := range []taskstate.Status{"", "running", "done"} {
		_, err := taskstate.Mutate(e.ctx, e.store, task.ID, time.Now, func(t *taskstate.Task) error {
			t.Status = to
			return nil
		})
		if !errors.Is(err, taskstate.ErrInvalidChange) {
			t.Errorf("Mutate working → %q: err = %v, want ErrInvalidChange", to, err)
		}
	}
	sameRecord(t, "record after refused changes", e.get(t, task.ID), task)
}

func (s *suite) mutateSkip(t *testing.T, e *env) {
	task := e.create(t, newTask())
	cur, err := taskstate.Mutate(e.ctx, e.store, task.ID, time.Now, func(t *taskstate.Task) error {
		t.StatusMessage = "discarded"
		return taskstate.ErrSkip
	})
	if !errors.Is(err, taskstate.ErrSkip) {
		t.Fatalf("Mutate returning ErrSkip: err = %v, want ErrSkip", err)
	}
	if cur == nil {
		t.Fatal("Mutate with ErrSkip returned no record")
	}
	sameRecord(t, "record Mutate returned with ErrSkip", cur, task)
	sameRecord(t, "stored record after ErrSkip", e.get(t, task.ID), task)
}

func (s *suite) mutateUnknown(t *testing.T, e *env) {
	called := false
	_, err := taskstate.Mutate(e.ctx, e.store, taskstate.NewID(), time.Now, func(*taskstate.Task) error {
		called = true
		return nil
	})
	if !errors.Is(err, taskstate.ErrNotFound) {
		t.Fatalf("Mutate of an unknown id: err = %v, want ErrNotFound", err)
	}
	if called {
		t.Fatal("Mutate of an unknown id called decide")
	}
}

// --- watch ---

// next receives one version from ch, failing after wait.
func next(t *testing.T, ch <-chan *taskstate.Task, wait time.Duration, what string) *taskstate.Task {
	t.Helper()
	select {
	case v, ok := <-ch:
		if !ok {
			t.Fatalf("%s: watch channel closed early", what)
		}
		if v == nil {
			t.Fatalf("%s: watch delivered nil", what)
		}
		return v
	case <-time.After(wait):
		t.Fatalf("%s: nothing delivered within %s", what, wait)
		return nil
	}
}

// closes fails unless ch closes within wait without delivering anything.
func closes(t *testing.T, ch <-chan *taskstate.Task, wait time.Duration, what string) {
	t.Helper()
	select {
	case v, ok := <-ch:
		if ok {
			t.Fatalf("%s: got another version (status %s, revision %d) where the channel should close", what, v.Status, v.Revision)
		}
	case <-time.After(wait):
		t.Fatalf("%s: watch channel still open after %s", what, wait)
	}
}

func (s *suite) watchVersions(t *testing.T, e *env) {
	task := e.create(t, newTask())
	wait := s.opts.Wait

	// Two watchers of the same record see the same versions.
	ch1, err := e.store.Watch(e.ctx, task.ID)
	if err != nil {
		t.Fatalf("Watch: %v", err)
	}
	ch2, err := e.store.Watch(e.ctx, task.ID)
	if err != nil {
		t.Fatalf("second Watch: %v", err)
	}
	chans := []<-chan *taskstate.Task{ch1, ch2}
	expect := func(what string, want *taskstate.Task) {
		t.Helper()
		for i, ch := range chans {
			sameRecord(t, fmt.Sprintf("watcher %d: %s", i+1, what), next(t, ch, wait, what), want)
		}
	}

	expect("current version", task)
	v2 := e.mutate(t, task.ID, func(t *taskstate.Task) { t.StatusMessage = "halfway" })
	expect("progress update", v2)
	v3 := e.mutate(t, task.ID, func(t *taskstate.Task) {
		t.Status = taskstate.InputRequired
		t.InputRequests = map[string]json.RawMessage{"k": json.RawMessage(`{"q":"?"}`)}
	})
	expect("input_required", v3)
	v4 := e.mutate(t, task.ID, func(t *taskstate.Task) {
		t.Status = taskstate.Working
		t.InputRequests = nil
		t.InputResponses = map[string]json.RawMessage{"k": json.RawMessage(`{"a":"!"}`)}
	})
	expect("back to working", v4)
	v5 := e.mutate(t, task.ID, func(t *taskstate.Task) {
		t.Status = taskstate.Completed
		t.Result = json.RawMessage(`{"content":[]}`)
	})
	expect("terminal version", v5)
	for i, ch := range chans {
		closes(t, ch, wait, fmt.Sprintf("watcher %d after terminal", i+1))
	}
}

func (s *suite) watchBurstEndsTerminal(t *testing.T, e *env) {
	task := e.create(t, newTask())
	ch, err := e.store.Watch(e.ctx, task.ID)
	if err != nil {
		t.Fatalf("Watch: %v", err)
	}
	first := next(t, ch, s.opts.Wait, "current version")
	sameRecord(t, "first delivery", first, task)

	// A burst of writes the watcher does not keep up with: it may skip
	// intermediate versions, but never goes backwards and always ends with
	// the terminal one.
	for i := range 10 {
		e.mutate(t, task.ID, func(t *taskstate.Task) { t.StatusMessage = fmt.Sprintf("step %d", i) })
	}
	final := e.mutate(t, task.ID, func(t *taskstate.Task) { t.Status = taskstate.Failed })

	last := first
	deadline := time.After(s.opts.Wait)
	for {
		select {
		case v, ok := <-ch:
			if !ok {
				if last.Revision != final.Revision {
					t.Fatalf("watch closed after revision %d (status %s); the terminal revision %d was never delivered", last.Revision, last.Status, final.Revision)
				}
				return
			}
			if v.Revision <= last.Revision {
				t.Fatalf("watch went from revision %d to %d", last.Revision, v.Revision)
			}
			if last.Status.Terminal() {
				t.Fatalf("watch delivered revision %d after the terminal one", v.Revision)
			}
			last = v
		case <-deadline:
			t.Fatalf("watch neither delivered the terminal version nor closed within %s (last revision %d)", s.opts.Wait, last.Revision)
		}
	}
}

func (s *suite) watchAlreadyTerminal(t *testing.T, e *env) {
	task := e.create(t, newTask())
	done := e.mutate(t, task.ID, func(t *taskstate.Task) { t.Status = taskstate.Cancelled })
	ch, err := e.store.Watch(e.ctx, task.ID)
	if err != nil {
		t.Fatalf("Watch of a terminal record: %v", err)
	}
	sameRecord(t, "delivered terminal record", next(t, ch, s.opts.Wait, "terminal record"), done)
	closes(t, ch, s.opts.Wait, "watch of a terminal record")
}

func (s *suite) watchContextCancel(t *testing.T, e *env) {
	task := e.create(t, newTask())
	ctx, cancel := context.WithCancel(e.ctx)
	defer cancel()
	ch, err := e.store.Watch(ctx, task.ID)
	if err != nil {
		t.Fatalf("Watch: %v", err)
	}
	next(t, ch, s.opts.Wait, "current version")
	cancel()
	// The channel closes; nothing written before the cancel may still be
	// in flight, so any delivery here is a bug.
	closes(t, ch, s.opts.Wait, "watch after ctx cancel")

	// A cancelled watch leaves the store working for other watchers.
	ch2, err := e.store.Watch(e.ctx, task.ID)
	if err != nil {
		t.Fatalf("Watch after a cancelled one: %v", err)
	}
	next(t, ch2, s.opts.Wait, "current version (second watch)")
	v := e.mutate(t, task.ID, func(t *taskstate.Task) { t.Status = taskstate.Completed })
	sameRecord(t, "second watch", next(t, ch2, s.opts.Wait, "terminal version (second watch)"), v)
}

func (s *suite) watchUnknown(t *testing.T, e *env) {
	for _, id := range []string{taskstate.NewID(), "not a valid id"} {
		ch, err := e.store.Watch(e.ctx, id)
		if !errors.Is(err, taskstate.ErrNotFound) {
			t.Errorf("Watch(%q) = %v, %v; want ErrNotFound", id, ch, err)
		}
	}
}

// --- retention ---

func (s *suite) terminalTTL(t *testing.T, e *env) {
	ttlMs := terminalTTL.Milliseconds()
	expiring := newTask()
	expiring.TTLMs = ttlMs
	active := newTask()
	active.TTLMs = ttlMs
	forever := newTask()
	forever.TTLMs = 0 // unlimited
	for _, task := range []*taskstate.Task{expiring, active, forever} {
		e.create(t, task)
	}

	turned := time.Now()
	e.mutate(t, expiring.ID, func(t *taskstate.Task) { t.Status = taskstate.Completed })
	// An active record that is being written to is no closer to expiry.
	e.mutate(t, active.ID, func(t *taskstate.Task) { t.StatusMessage = "still going" })
	e.mutate(t, forever.ID, func(t *taskstate.Task) { t.Status = taskstate.Completed })
	if _, err := e.store.Get(e.ctx, expiring.ID); err != nil {
		t.Fatalf("terminal record gone right after turning terminal: %v", err)
	}

	eventually(t, terminalTTL+s.opts.Wait, "expiry of the terminal record", func() (bool, error) {
		_, err := e.store.Get(e.ctx, expiring.ID)
		if errors.Is(err, taskstate.ErrNotFound) {
			return true, nil
		}
		return false, err
	})
	if gone := time.Since(turned); gone < terminalTTL-100*time.Millisecond {
		t.Fatalf("terminal record with a %s TTL expired after only %s", terminalTTL, gone)
	}

	// The active record is older than the TTL by now and must still be here.
	if got := e.get(t, active.ID); got.Status != taskstate.Working {
		t.Fatalf("active record status %s, want working", got.Status)
	}
	if got := e.get(t, forever.ID); got.Status != taskstate.Completed {
		t.Fatalf("terminal record with TTL 0 has status %s, want completed", got.Status)
	}
	// Retention counts from turning terminal, not from creation: the active
	// record, created more than a TTL ago, survives its own terminal write.
	e.mutate(t, active.ID, func(t *taskstate.Task) { t.Status = taskstate.Failed })
	if got := e.get(t, active.ID); got.Status != taskstate.Failed {
		t.Fatalf("record just turned terminal has status %s, want failed", got.Status)
	}
}

// --- catalog ---

func tool(name string) *taskstate.ToolInfo {
	return &taskstate.ToolInfo{
		Name:         name,
		Title:        "Tool " + name,
		Description:  "does " + name,
		InputSchema:  json.RawMessage(`{"type":"object","properties":{"x":{"type":"integer"}},"required":["x"]}`),
		OutputSchema: json.RawMessage(`{"type":"object"}`),
		Annotations:  json.RawMessage(`{"readOnlyHint":true}`),
		TaskSupport:  taskstate.TaskOptional,
		TimeoutMs:    60_000,
	}
}

func sameTool(t *testing.T, what string, got, want *taskstate.ToolInfo) {
	t.Helper()
	g, _ := json.Marshal(got)
	w, _ := json.Marshal(want)
	if string(g) != string(w) {
		t.Fatalf("%s: tool differs\n got %s\nwant %s", what, g, w)
	}
}

func (e *env) publish(t *testing.T, ti *taskstate.ToolInfo) {
	t.Helper()
	if err := e.cat.PublishTool(e.ctx, ti); err != nil {
		t.Fatalf("PublishTool(%s): %v", ti.Name, err)
	}
}

func (e *env) tool(t *testing.T, name string) *taskstate.ToolInfo {
	t.Helper()
	got, err := e.cat.Tool(e.ctx, name)
	if err != nil {
		t.Fatalf("Tool(%s): %v", name, err)
	}
	return got
}

func (e *env) toolNames(t *testing.T) []string {
	t.Helper()
	list, err := e.cat.Tools(e.ctx)
	if err != nil {
		t.Fatalf("Tools: %v", err)
	}
	names := make([]string, len(list))
	for i, ti := range list {
		names[i] = ti.Name
	}
	return names
}

func (s *suite) catalogRoundTrip(t *testing.T, e *env) {
	if names := e.toolNames(t); len(names) != 0 {
		t.Fatalf("fresh catalog lists %v, want nothing", names)
	}
	want := tool("render_report")
	want.TaskSupport = taskstate.TaskRequired
	e.publish(t, want)
	sameTool(t, "Tool after PublishTool", e.tool(t, want.Name), want)

	minimal := &taskstate.ToolInfo{Name: "min", InputSchema: json.RawMessage(`{"type":"object"}`), TaskSupport: taskstate.TaskForbidden}
	e.publish(t, minimal)
	sameTool(t, "minimal tool", e.tool(t, "min"), minimal)

	if err := e.cat.PublishTool(e.ctx, &taskstate.ToolInfo{InputSchema: json.RawMessage(`{}`)}); err == nil {
		t.Error("PublishTool of a tool without a name succeeded")
	}
}

func (s *suite) catalogSorted(t *testing.T, e *env) {
	for _, n := range []string{"zeta", "alpha", "Mid", "beta.two", "beta", "beta_two", "0num"} {
		e.publish(t, tool(n))
	}
	want := []string{"0num", "Mid", "alpha", "beta", "beta.two", "beta_two", "zeta"}
	list, err := e.cat.Tools(e.ctx)
	if err != nil {
		t.Fatalf("Tools: %v", err)
	}
	got := make([]string, len(list))
	for i, ti := range list {
		got[i] = ti.Name
		sameTool(t, "Tools entry "+ti.Name, ti, tool(ti.Name))
	}
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Fatalf("Tools() names = %v, want %v (sorted by name)", got, want)
	}
}

func (s *suite) catalogRepublish(t *testing.T, e *env) {
	v1 := tool("report")
	e.publish(t, v1)
	sameTool(t, "Tool after first publish", e.tool(t, "report"), v1)
	v2 := tool("report")
	v2.Description = "version two"
	v2.InputSchema = json.RawMessage(`{"type":"object","properties":{"y":{"type":"string"}}}`)
	v2.TaskSupport = taskstate.TaskForbidden
	e.publish(t, v2)
	sameTool(t, "Tool after republish", e.tool(t, "report"), v2)
	if names := e.toolNames(t); len(names) != 1 || names[0] != "report" {
		t.Fatalf("Tools() after republishing one tool = %v, want [report]", names)
	}
}

func (s *suite) catalogUnknown(t *testing.T, e *env) {
	e.publish(t, tool("known"))
	for _, name := range []string{"unknown", "Known", "", "known.", "*", ">"} {
		if got, err := e.cat.Tool(e.ctx, name); !errors.Is(err, taskstate.ErrNotFound) {
			t.Errorf("Tool(%q) = %v, %v; want ErrNotFound", name, got, err)
		}
	}
}

func (s *suite) catalogNamesDistinct(t *testing.T, e *env) {
	// Names that a careless key mapping would fold together.
	names := []string{"a.b", "a_b", "a-b", "a=2eb", "a=b", "A.B"}
	for _, n := range names {
		ti := tool(n)
		ti.Description = "I am " + n
		e.publish(t, ti)
	}
	for _, n := range names {
		if got := e.tool(t, n); got.Name != n || got.Description != "I am "+n {
			t.Errorf("Tool(%q) = %q (%q): names collided", n, got.Name, got.Description)
		}
	}
	if got := e.toolNames(t); len(got) != len(names) {
		t.Fatalf("Tools() = %v, want %d distinct tools", got, len(names))
	}
}

// A tool and a prompt may share a name; they are addressed by Key.
func (s *suite) catalogKindsDistinct(t *testing.T, e *env) {
	ti := tool("summary")
	ti.Description = "the tool"
	pr := tool("summary")
	pr.Kind = taskstate.KindPrompt
	pr.Description = "the prompt"
	e.publish(t, ti)
	e.publish(t, pr)
	if got := e.tool(t, "summary"); got.Kind != taskstate.KindTool || got.Description != "the tool" {
		t.Errorf("Tool(summary) = %+v, want the tool", got)
	}
	if got := e.tool(t, pr.Key()); got.Kind != taskstate.KindPrompt || got.Description != "the prompt" {
		t.Errorf("Tool(%q) = %+v, want the prompt", pr.Key(), got)
	}
	if got := e.toolNames(t); len(got) != 2 {
		t.Fatalf("Tools() = %v, want the tool and the prompt", got)
	}
}

func (s *suite) catalogExpiry(t *testing.T, e *env) {
	ttl := s.opts.ToolTTL
	if ttl <= 0 {
		t.Skip("statetest.Options.ToolTTL not set")
	}
	published := time.Now()
	e.publish(t, tool("stale"))
	e.publish(t, tool("fresh"))
	e.tool(t, "stale")

	// Keep "fresh" alive the way a worker's heartbeat does until "stale" is
	// gone and "fresh" has outlived its first publish by half a TTL.
	refreshed := time.Now()
	staleGone := time.Duration(0)
	eventually(t, 2*ttl+s.opts.Wait, "expiry of an unrefreshed tool", func() (bool, error) {
		if time.Since(refreshed) > ttl/4 {
			if err := e.cat.PublishTool(e.ctx, tool("fresh")); err != nil {
				return false, err
			}
			refreshed = time.Now()
		}
		_, err := e.cat.Tool(e.ctx, "stale")
		switch {
		case errors.Is(err, taskstate.ErrNotFound):
			if staleGone == 0 {
				staleGone = time.Since(published)
			}
		case err != nil:
			return false, err
		case staleGone != 0:
			return false, fmt.Errorf("expired tool came back")
		}
		return staleGone != 0 && time.Since(published) > ttl+ttl/2, nil
	})
	if staleGone < ttl/2 {
		t.Fatalf("tool with a %s TTL expired after only %s", ttl, staleGone)
	}
	sameTool(t, "refreshed tool", e.tool(t, "fresh"), tool("fresh"))
	if names := e.toolNames(t); len(names) != 1 || names[0] != "fresh" {
		t.Fatalf("Tools() = %v, want [fresh]", names)
	}
}
