// Package statetest is the contract suite every taskstate.Store,
// taskstate.Catalog and taskstate.Sessions implementation passes, so NATS
// KV, Redis and the in-memory store behave the same by construction. An implementation's test calls Run, declaring its
// optional abilities in a Features value, with a constructor that returns a
// fresh, isolated store (its own bucket or key prefix) for each subtest;
// subtests run in parallel.
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
	// ToolRetention is how long a catalog entry is kept without a refresh
	// in the stores newStore returns (natskv.Config.ToolRetention, say). The expiry test
	// waits about this long, so keep it short, but long enough that the
	// other catalog subtests finish well within it: 2s is a good value.
	// Zero skips the catalog expiry test.
	ToolRetention time.Duration
	// SessionTTL is a session's lifetime in the stores newStore returns
	// (natskv.Config.SessionTTL, say). The expiry test waits about this
	// long; the other session subtests must finish well within it: 2s is a
	// good value. Zero skips the session expiry test.
	SessionTTL time.Duration
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

// Features declares which optional abilities of the taskstate seam the
// stores newStore returns have. The suite holds an implementation to its
// declaration both ways: a declared ability is tested, and one left out
// must be absent (its type assertion on the Store must fail), so a store
// that gains or loses an ability without saying so fails instead of
// being skipped.
type Features struct {
	// Sessions: the Store implements taskstate.Sessions (2025-11-25
	// protocol sessions; the front end needs it).
	Sessions bool
	// Blobs: the Store implements taskstate.Blobs (payloads kept out of
	// line).
	Blobs bool
	// Feed: the Store implements taskstate.Feed (one stream of every
	// record's changes).
	Feed bool
	// ActiveCount: the Store implements taskstate.ActiveCounter (an
	// owner's active tasks counted without reading its history).
	ActiveCount bool
	// Lease: the Store implements taskstate.Leaser (named leases).
	Lease bool
}

// Run runs the whole contract suite as parallel subtests of t: the tests
// of every Store and Catalog, and those of each ability f declares.
func Run(t *testing.T, f Features, newStore NewStoreFunc, opts *Options) {
	o := opts.withDefaults()
	s := &suite{newStore: newStore, opts: o, features: f}
	tests := []stateTest{
		{"CreateGetRoundTrip", s.createGetRoundTrip},
		{"CreateDuplicate", s.createDuplicate},
		{"CreateInvalidID", s.createInvalidID},
		{"CreateIdempotentRace", s.createIdempotentRace},
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
		{"FollowFromBeforeCreate", s.followFromBeforeCreate},
		{"FollowOnlyLater", s.followOnlyLater},
		{"TerminalTTL", s.terminalTTL},
		{"ActiveOutlivesTTL", s.activeOutlivesTTL},
		{"ListPages", s.listPages},
		{"ListSameCreatedAt", s.listSameCreatedAt},
		{"ListNoOwner", s.listNoOwner},
		{"ListBadCursor", s.listBadCursor},
		{"ListDuplicateCreate", s.listDuplicateCreate},
		{"ListTerminalTTL", s.listTerminalTTL},
		{"ScanActiveAndAll", s.scanActiveAndAll},
		{"ScanStops", s.scanStops},
		{"DeleteTerminal", s.deleteTerminal},
		{"Features", s.declaredFeatures},
		{"CatalogRoundTrip", s.catalogRoundTrip},
		{"CatalogSorted", s.catalogSorted},
		{"CatalogRepublish", s.catalogRepublish},
		{"CatalogUnknown", s.catalogUnknown},
		{"CatalogNamesDistinct", s.catalogNamesDistinct},
		{"CatalogKindsDistinct", s.catalogKindsDistinct},
		{"CatalogExpiry", s.catalogExpiry},
		{"CatalogRemove", s.catalogRemove},
	}
	if f.Feed {
		tests = append(tests, stateTest{"Feed", s.feed})
	}
	if f.ActiveCount {
		tests = append(tests, stateTest{"CountActive", s.countActive})
	}
	if f.Lease {
		tests = append(tests, stateTest{"Lease", s.lease})
	}
	if f.Sessions {
		tests = append(tests,
			stateTest{"SessionRoundTrip", s.sessionRoundTrip},
			stateTest{"SessionUnknown", s.sessionUnknown},
			stateTest{"SessionDelete", s.sessionDelete},
			stateTest{"SessionExpiry", s.sessionExpiry},
			stateTest{"SessionLimit", s.sessionLimit},
			stateTest{"SessionLimitConcurrent", s.sessionLimitConcurrent})
	}
	if f.Blobs {
		tests = append(tests,
			stateTest{"BlobRoundTrip", s.blobRoundTrip},
			stateTest{"BlobExpiry", s.blobExpiry},
			stateTest{"BlobDelete", s.blobDelete})
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

type stateTest struct {
	name string
	fn   func(*testing.T, *env)
}

type suite struct {
	newStore NewStoreFunc
	opts     Options
	features Features
}

// declaredFeatures: the store has exactly the optional abilities the
// Features declare.
func (s *suite) declaredFeatures(t *testing.T, e *env) {
	for _, a := range []struct {
		name      string
		want, has bool
	}{
		{"taskstate.Sessions", s.features.Sessions, is[taskstate.Sessions](e.store)},
		{"taskstate.Blobs", s.features.Blobs, is[taskstate.Blobs](e.store)},
		{"taskstate.Feed", s.features.Feed, is[taskstate.Feed](e.store)},
		{"taskstate.ActiveCounter", s.features.ActiveCount, is[taskstate.ActiveCounter](e.store)},
		{"taskstate.Leaser", s.features.Lease, is[taskstate.Leaser](e.store)},
	} {
		switch {
		case a.want && !a.has:
			t.Errorf("Features declare %s, but %T does not implement it", a.name, e.store)
		case !a.want && a.has:
			t.Errorf("%T implements %s, which its Features do not declare", e.store, a.name)
		}
	}
}

func is[I any](v any) bool {
	_, ok := v.(I)
	return ok
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

// createIdempotentRace: many clients of the store create the record of one
// idempotency key (taskstate.IdempotentID) at once, as api replicas do for a
// retried call: exactly one Create succeeds, every other gets ErrExists, and
// all of them then read the winner's record, key and digest included.
func (s *suite) createIdempotentRace(t *testing.T, e *env) {
	const n = 12
	id := taskstate.IdempotentID("owner-"+taskstate.NewID(), "retry-key", "")
	var (
		wg      sync.WaitGroup
		mu      sync.Mutex
		winners []*taskstate.Task
		errs    []error
	)
	start := make(chan struct{})
	for i := range n {
		wg.Go(func() {
			task := newTask()
			task.ID, task.IdempotencyKey = id, "retry-key"
			task.InputDigest = taskstate.InputDigest(task.Kind, task.Tool, task.Arguments)
			task.StatusMessage = fmt.Sprintf("attempt %d", i)
			<-start
			err := e.store.Create(e.ctx, task)
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				winners = append(winners, task)
			case !errors.Is(err, taskstate.ErrExists):
				errs = append(errs, err)
			}
		})
	}
	close(start)
	wg.Wait()
	for _, err := range errs {
		t.Errorf("racing Create of one id: %v, want nil or ErrExists", err)
	}
	if len(winners) != 1 {
		t.Fatalf("%d of %d racing Creates of one id succeeded, want exactly 1", len(winners), n)
	}
	got := e.get(t, id)
	sameRecord(t, "the record after the race", got, winners[0])
	if got.IdempotencyKey != "retry-key" || got.InputDigest == "" {
		t.Fatalf("stored record lost its key or digest: %q, %q", got.IdempotencyKey, got.InputDigest)
	}
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

func (s *suite) followFromBeforeCreate(t *testing.T, e *env) {
	task := newTask()
	ch, err := e.store.Follow(e.ctx, task.ID)
	if err != nil {
		t.Fatalf("Follow of a record not created yet: %v", err)
	}
	created := e.create(t, task)
	sameRecord(t, "the creation", next(t, ch, s.opts.Wait, "the created version"), created)
	done := e.mutate(t, task.ID, func(t *taskstate.Task) { t.Status = taskstate.Completed })
	sameRecord(t, "terminal version", next(t, ch, s.opts.Wait, "terminal version"), done)
	closes(t, ch, s.opts.Wait, "follow after terminal")
	if _, err := e.store.Follow(e.ctx, "not a valid id"); !errors.Is(err, taskstate.ErrNotFound) {
		t.Errorf("Follow of a malformed id = %v, want ErrNotFound", err)
	}
}

func (s *suite) followOnlyLater(t *testing.T, e *env) {
	task := e.create(t, newTask())
	e.mutate(t, task.ID, func(t *taskstate.Task) { t.StatusMessage = "before" })
	ch, err := e.store.Follow(e.ctx, task.ID)
	if err != nil {
		t.Fatalf("Follow: %v", err)
	}
	after := e.mutate(t, task.ID, func(t *taskstate.Task) { t.StatusMessage = "after" })
	sameRecord(t, "first delivery: the version written after Follow", next(t, ch, s.opts.Wait, "later version"), after)
	done := e.mutate(t, task.ID, func(t *taskstate.Task) { t.Status = taskstate.Failed })
	sameRecord(t, "terminal version", next(t, ch, s.opts.Wait, "terminal version"), done)
	closes(t, ch, s.opts.Wait, "follow after terminal")
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

// --- listing ---

// owned returns a new task of owner created at base + i ms.
func owned(owner string, base time.Time, i int) *taskstate.Task {
	t := newTask()
	t.Owner = owner
	t.CreatedAt = base.Add(time.Duration(i) * time.Millisecond)
	t.LastUpdatedAt = t.CreatedAt
	return t
}

// list calls List and fails the test on error.
func (e *env) list(t *testing.T, owner, cursor string, limit int) ([]*taskstate.Task, string) {
	t.Helper()
	got, next, err := e.store.List(e.ctx, owner, cursor, limit)
	if err != nil {
		t.Fatalf("List(%q, %q, %d): %v", owner, cursor, limit, err)
	}
	return got, next
}

// listAll pages through owner's tasks with limit, failing on a page larger
// than limit, and returns the pages' sizes and the tasks.
func (e *env) listAll(t *testing.T, owner string, limit int) ([]int, []*taskstate.Task) {
	t.Helper()
	var (
		sizes  []int
		all    []*taskstate.Task
		cursor string
	)
	for {
		page, next := e.list(t, owner, cursor, limit)
		if len(page) > limit {
			t.Fatalf("List(%q, limit %d) returned %d tasks", owner, limit, len(page))
		}
		sizes = append(sizes, len(page))
		all = append(all, page...)
		if next == "" {
			return sizes, all
		}
		if len(sizes) > 100 {
			t.Fatalf("List(%q) still returns cursors after 100 pages", owner)
		}
		cursor = next
	}
}

// ids returns the tasks' ids.
func ids(tasks []*taskstate.Task) []string {
	out := make([]string, len(tasks))
	for i, t := range tasks {
		out[i] = t.ID
	}
	return out
}

// sameList fails unless got holds want's records, in that order.
func sameList(t *testing.T, what string, got, want []*taskstate.Task) {
	t.Helper()
	if g, w := strings.Join(ids(got), ","), strings.Join(ids(want), ","); g != w {
		t.Fatalf("%s: listed\n %s\nwant\n %s", what, g, w)
	}
	for i := range got {
		sameRecord(t, fmt.Sprintf("%s: task %d", what, i), got[i], want[i])
	}
}

func (s *suite) listPages(t *testing.T, e *env) {
	base := time.Now().UTC().Add(-time.Hour)
	var alice, bob []*taskstate.Task
	for i := range 7 {
		alice = append(alice, e.create(t, owned("alice", base, 2*i)))
		if i%3 == 0 {
			bob = append(bob, e.create(t, owned("bob", base, 2*i+1)))
		}
		e.create(t, owned("", base, 2*i+1)) // never listed
	}
	// A list shows each record as it is now.
	alice[1] = e.mutate(t, alice[1].ID, func(t *taskstate.Task) {
		t.Status = taskstate.InputRequired
		t.StatusMessage = "waiting"
	})
	alice[4] = e.mutate(t, alice[4].ID, func(t *taskstate.Task) { t.Status = taskstate.Completed })

	sizes, got := e.listAll(t, "alice", 3)
	if fmt.Sprint(sizes) != "[3 3 1]" {
		t.Fatalf("7 tasks in pages of 3 came in pages of %v, want [3 3 1]", sizes)
	}
	sameList(t, "alice's tasks in pages of 3", got, alice)

	// A page that ends with the last task has no cursor.
	sizes, got = e.listAll(t, "bob", len(bob))
	if fmt.Sprint(sizes) != fmt.Sprint([]int{len(bob)}) {
		t.Fatalf("bob's %d tasks with limit %d came in pages of %v, want one page", len(bob), len(bob), sizes)
	}
	sameList(t, "bob's tasks", got, bob)
	_, got = e.listAll(t, "bob", 100)
	sameList(t, "bob's tasks (limit 100)", got, bob)
	sizes, got = e.listAll(t, "alice", 1)
	if len(sizes) != 7 {
		t.Fatalf("7 tasks in pages of 1 came in pages of %v", sizes)
	}
	sameList(t, "alice's tasks in pages of 1", got, alice)

	if got, next := e.list(t, "carol", "", 10); len(got) != 0 || next != "" {
		t.Fatalf("List of an owner without tasks = %v, %q; want nothing", ids(got), next)
	}
	// Owners are compared exactly.
	if got, _ := e.list(t, "Alice", "", 10); len(got) != 0 {
		t.Fatalf("List(Alice) = %v; owners are case-sensitive", ids(got))
	}
}

// Tasks created in the same nanosecond still come once each, in a stable
// order, however they are paged.
func (s *suite) listSameCreatedAt(t *testing.T, e *env) {
	at := time.Now().UTC()
	var want []*taskstate.Task
	for range 5 {
		want = append(want, e.create(t, owned("alice", at, 0)))
	}
	_, all := e.listAll(t, "alice", 10)
	if len(all) != len(want) {
		t.Fatalf("listed %v, want the %d tasks", ids(all), len(want))
	}
	for _, limit := range []int{1, 2, 3, 4} {
		_, got := e.listAll(t, "alice", limit)
		sameList(t, fmt.Sprintf("same-time tasks in pages of %d", limit), got, all)
	}
}

func (s *suite) listNoOwner(t *testing.T, e *env) {
	base := time.Now().UTC()
	for i := range 3 {
		e.create(t, owned("", base, i))
	}
	alice := e.create(t, owned("alice", base, 3))
	got, next := e.list(t, "", "", 10)
	if len(got) != 0 || next != "" {
		t.Fatalf(`List("") = %v, %q; want nothing`, ids(got), next)
	}
	got, _ = e.list(t, "alice", "", 10)
	sameList(t, "alice's tasks among unowned ones", got, []*taskstate.Task{alice})
}

func (s *suite) listBadCursor(t *testing.T, e *env) {
	base := time.Now().UTC()
	for i := range 2 {
		e.create(t, owned("alice", base, 2*i))
		e.create(t, owned("bob", base, 2*i+1))
	}
	_, aliceCursor := e.list(t, "alice", "", 1)
	_, bobCursor := e.list(t, "bob", "", 1)
	if aliceCursor == "" || bobCursor == "" {
		t.Fatalf("first pages of 1 of 2 tasks have cursors %q and %q; want cursors", aliceCursor, bobCursor)
	}
	if aliceCursor == bobCursor {
		t.Fatal("two owners' cursors are the same")
	}
	bad := []string{
		bobCursor, // another owner's
		"x", "not a cursor", "%%%", "..", "0", "-1", "bob",
		aliceCursor[:len(aliceCursor)/2], // truncated
		"A" + aliceCursor,                // shifted
		strings.Repeat("QUFB", 30),
	}
	for _, c := range bad {
		got, next, err := e.store.List(e.ctx, "alice", c, 10)
		if !errors.Is(err, taskstate.ErrBadCursor) {
			t.Errorf("List(alice, %q) = %v, %q, %v; want ErrBadCursor", c, ids(got), next, err)
		}
	}
	// The good cursor still works after the bad ones.
	if got, _ := e.list(t, "alice", aliceCursor, 10); len(got) != 1 {
		t.Fatalf("List(alice, cursor) = %v, want the second task", ids(got))
	}
}

// A Create refused as a duplicate lists nothing: not another owner's task
// under the caller, nor the task twice.
func (s *suite) listDuplicateCreate(t *testing.T, e *env) {
	base := time.Now().UTC()
	mine := e.create(t, owned("alice", base, 0))
	for i, owner := range []string{"mallory", "alice"} {
		dup := owned(owner, base, i+1)
		dup.ID = mine.ID
		if err := e.store.Create(e.ctx, dup); !errors.Is(err, taskstate.ErrExists) {
			t.Fatalf("Create of an existing id by %s: err = %v, want ErrExists", owner, err)
		}
	}
	if got, next := e.list(t, "mallory", "", 10); len(got) != 0 || next != "" {
		t.Fatalf("List(mallory) after a refused Create = %v, %q; want nothing", ids(got), next)
	}
	_, got := e.listAll(t, "alice", 1)
	sameList(t, "alice's tasks after refused Creates", got, []*taskstate.Task{mine})
}

func (s *suite) listTerminalTTL(t *testing.T, e *env) {
	base := time.Now().UTC().Add(-time.Hour)
	first := e.create(t, owned("alice", base, 0))
	expiring := owned("alice", base, 1)
	expiring.TTLMs = terminalTTL.Milliseconds()
	e.create(t, expiring)
	kept := e.create(t, owned("alice", base, 2)) // terminal, 60s TTL
	active := owned("alice", base, 3)
	active.TTLMs = terminalTTL.Milliseconds()
	e.create(t, active)

	turned := time.Now()
	expiring = e.mutate(t, expiring.ID, func(t *taskstate.Task) { t.Status = taskstate.Completed })
	kept = e.mutate(t, kept.ID, func(t *taskstate.Task) { t.Status = taskstate.Failed })
	_, all := e.listAll(t, "alice", 10)
	sameList(t, "tasks right after two turned terminal", all, []*taskstate.Task{first, expiring, kept, active})
	// A cursor that points at the expiring task.
	_, cursor := e.list(t, "alice", "", 2)
	if cursor == "" {
		t.Fatal("first page of 2 of 4 tasks has no cursor")
	}

	eventually(t, terminalTTL+s.opts.Wait, "the expired task leaving the list", func() (bool, error) {
		got, _, err := e.store.List(e.ctx, "alice", "", 10)
		if err != nil {
			return false, err
		}
		for _, g := range got {
			if g.ID == expiring.ID {
				return false, nil
			}
		}
		return true, nil
	})
	if gone := time.Since(turned); gone < terminalTTL-100*time.Millisecond {
		t.Fatalf("terminal task with a %s TTL left the list after only %s", terminalTTL, gone)
	}
	_, all = e.listAll(t, "alice", 10)
	sameList(t, "tasks after one expired", all, []*taskstate.Task{first, kept, active})
	_, all = e.listAll(t, "alice", 1)
	sameList(t, "tasks after one expired, in pages of 1", all, []*taskstate.Task{first, kept, active})
	// A cursor stays good when the task it points at is gone.
	got, next, err := e.store.List(e.ctx, "alice", cursor, 10)
	if err != nil {
		t.Fatalf("List with a cursor at an expired task: %v", err)
	}
	sameList(t, "page after the expired task", got, []*taskstate.Task{kept, active})
	if next != "" {
		t.Fatalf("last page has cursor %q", next)
	}
}

// --- sessions ---

func (e *env) sessions(t *testing.T) taskstate.Sessions {
	t.Helper()
	return e.store.(taskstate.Sessions) // Features.Sessions
}

func newSession() *taskstate.Session {
	return &taskstate.Session{
		ID:                 taskstate.NewID(),
		ProtocolVersion:    "2025-11-25",
		ClientCapabilities: json.RawMessage(`{"elicitation":{},"tasks":{"requests":{"tools":{"call":{}}}}}`),
		ClientInfo:         json.RawMessage(`{"name":"inspector","version":"0.9.1 ✓"}`),
		Owner:              "alice@example.com",
		CreatedAt:          time.Date(2026, 7, 28, 12, 34, 56, 789_012_345, time.UTC),
	}
}

func sameSession(t *testing.T, what string, got, want *taskstate.Session) {
	t.Helper()
	g, _ := json.Marshal(got)
	w, _ := json.Marshal(want)
	if string(g) != string(w) || !got.CreatedAt.Equal(want.CreatedAt) {
		t.Fatalf("%s: session differs\n got %s\nwant %s", what, g, w)
	}
}

func (s *suite) sessionRoundTrip(t *testing.T, e *env) {
	ss := e.sessions(t)
	want := newSession()
	if err := ss.PutSession(e.ctx, want); err != nil {
		t.Fatalf("PutSession: %v", err)
	}
	minimal := &taskstate.Session{ID: taskstate.NewID(), ProtocolVersion: "2025-06-18", CreatedAt: time.Now().UTC()}
	if err := ss.PutSession(e.ctx, minimal); err != nil {
		t.Fatalf("PutSession (minimal): %v", err)
	}
	for _, w := range []*taskstate.Session{want, minimal} {
		got, err := ss.Session(e.ctx, w.ID)
		if err != nil {
			t.Fatalf("Session(%s): %v", w.ID, err)
		}
		sameSession(t, "Session after PutSession", got, w)
		if got == w {
			t.Fatal("Session returned the caller's own pointer")
		}
	}
}

func (s *suite) sessionUnknown(t *testing.T, e *env) {
	ss := e.sessions(t)
	if err := ss.PutSession(e.ctx, newSession()); err != nil { // not empty
		t.Fatalf("PutSession: %v", err)
	}
	for _, id := range []string{taskstate.NewID(), "", "x", "a.b.c", "*", ">", "has space", strings.Repeat("A", 1000)} {
		if got, err := ss.Session(e.ctx, id); !errors.Is(err, taskstate.ErrNotFound) {
			t.Errorf("Session(%.40q) = %v, %v; want ErrNotFound", id, got, err)
		}
	}
}

func (s *suite) sessionDelete(t *testing.T, e *env) {
	ss := e.sessions(t)
	gone, kept := newSession(), newSession()
	for _, sess := range []*taskstate.Session{gone, kept} {
		if err := ss.PutSession(e.ctx, sess); err != nil {
			t.Fatalf("PutSession: %v", err)
		}
	}
	if err := ss.DeleteSession(e.ctx, gone.ID); err != nil {
		t.Fatalf("DeleteSession: %v", err)
	}
	if got, err := ss.Session(e.ctx, gone.ID); !errors.Is(err, taskstate.ErrNotFound) {
		t.Fatalf("Session after DeleteSession = %v, %v; want ErrNotFound", got, err)
	}
	got, err := ss.Session(e.ctx, kept.ID)
	if err != nil {
		t.Fatalf("Session of the other session after DeleteSession: %v", err)
	}
	sameSession(t, "other session", got, kept)
	for _, id := range []string{gone.ID, taskstate.NewID(), "", "a.b", "*"} {
		if err := ss.DeleteSession(e.ctx, id); err != nil {
			t.Errorf("DeleteSession(%q) of an absent session = %v, want nil", id, err)
		}
	}
}

// CreateSession counts an owner's sessions: past the cap nothing is
// stored; another owner, an owner-less session and a cap of 0 are not held
// back; a deleted session gives its place back; PutSession (an update) is
// not capped.
func (s *suite) sessionLimit(t *testing.T, e *env) {
	ss := e.sessions(t)
	owned := func(owner string) *taskstate.Session {
		sess := newSession()
		sess.Owner = owner
		return sess
	}
	var alice []*taskstate.Session
	for i := range 3 {
		sess := owned("iss|alice")
		if err := ss.CreateSession(e.ctx, sess, 3); err != nil {
			t.Fatalf("CreateSession %d of 3: %v", i+1, err)
		}
		alice = append(alice, sess)
	}
	over := owned("iss|alice")
	if err := ss.CreateSession(e.ctx, over, 3); !errors.Is(err, taskstate.ErrSessionLimit) {
		t.Fatalf("CreateSession past the cap = %v, want ErrSessionLimit", err)
	}
	if _, err := ss.Session(e.ctx, over.ID); !errors.Is(err, taskstate.ErrNotFound) {
		t.Fatalf("the refused session was stored: %v", err)
	}
	if err := ss.PutSession(e.ctx, alice[0]); err != nil {
		t.Fatalf("PutSession of a counted session: %v", err)
	}
	if err := ss.CreateSession(e.ctx, over, 3); !errors.Is(err, taskstate.ErrSessionLimit) {
		t.Fatalf("CreateSession past the cap after an update = %v, want ErrSessionLimit", err)
	}
	for _, c := range []struct {
		what  string
		sess  *taskstate.Session
		limit int
	}{{"another owner", owned("iss|bob"), 3}, {"no owner", owned(""), 1}, {"no cap", owned("iss|alice"), 0}} {
		if err := ss.CreateSession(e.ctx, c.sess, c.limit); err != nil {
			t.Fatalf("CreateSession, %s: %v", c.what, err)
		}
		if _, err := ss.Session(e.ctx, c.sess.ID); err != nil {
			t.Fatalf("Session after CreateSession, %s: %v", c.what, err)
		}
	}
	if err := ss.DeleteSession(e.ctx, alice[1].ID); err != nil {
		t.Fatal(err)
	}
	if err := ss.DeleteSession(e.ctx, alice[2].ID); err != nil {
		t.Fatal(err)
	}
	// Four live now (three capped ones less two, and the uncapped one).
	if err := ss.CreateSession(e.ctx, owned("iss|alice"), 3); err != nil {
		t.Fatalf("CreateSession after two were deleted (4 of alice's before, 2 now): %v", err)
	}
	if err := ss.CreateSession(e.ctx, owned("iss|alice"), 3); !errors.Is(err, taskstate.ErrSessionLimit) {
		t.Fatalf("CreateSession at the cap again = %v, want ErrSessionLimit", err)
	}
}

// Concurrent creations for one owner (as on several api replicas) stop at
// the cap together.
func (s *suite) sessionLimitConcurrent(t *testing.T, e *env) {
	ss := e.sessions(t)
	const n, limit = 12, 5
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for range n {
		wg.Go(func() {
			sess := newSession()
			sess.Owner = "iss|carol"
			errs <- ss.CreateSession(e.ctx, sess, limit)
		})
	}
	wg.Wait()
	close(errs)
	ok := 0
	for err := range errs {
		switch {
		case err == nil:
			ok++
		case !errors.Is(err, taskstate.ErrSessionLimit):
			t.Fatalf("CreateSession: %v", err)
		}
	}
	if ok != limit {
		t.Fatalf("%d concurrent CreateSession calls with a cap of %d: %d stored, want %d", n, limit, ok, limit)
	}
}

func (s *suite) sessionExpiry(t *testing.T, e *env) {
	ttl := s.opts.SessionTTL
	if ttl <= 0 {
		t.Skip("statetest.Options.SessionTTL not set")
	}
	ss := e.sessions(t)
	sess := newSession()
	put := time.Now()
	if err := ss.PutSession(e.ctx, sess); err != nil {
		t.Fatalf("PutSession: %v", err)
	}
	if _, err := ss.Session(e.ctx, sess.ID); err != nil {
		t.Fatalf("Session right after PutSession: %v", err)
	}
	// Reading a session does not extend it: it is polled here all along.
	eventually(t, ttl+s.opts.Wait, "expiry of the session", func() (bool, error) {
		_, err := ss.Session(e.ctx, sess.ID)
		if errors.Is(err, taskstate.ErrNotFound) {
			return true, nil
		}
		return false, err
	})
	if gone := time.Since(put); gone < ttl-100*time.Millisecond {
		t.Fatalf("session with a %s lifetime expired after only %s", ttl, gone)
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
		LiveUntil:    time.Date(2031, 1, 2, 3, 4, 5, 600_000_000, time.UTC),
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

// An operator removes an entry; it is gone from Tool and Tools at once for
// this store, and a worker publishing it again brings it back.
func (s *suite) catalogRemove(t *testing.T, e *env) {
	e.publish(t, tool("gone.soon"))
	e.publish(t, tool("stays"))
	if err := e.cat.RemoveTool(e.ctx, "gone.soon"); err != nil {
		t.Fatalf("RemoveTool: %v", err)
	}
	if _, err := e.cat.Tool(e.ctx, "gone.soon"); !errors.Is(err, taskstate.ErrNotFound) {
		t.Fatalf("Tool after RemoveTool: %v, want ErrNotFound", err)
	}
	if names := e.toolNames(t); len(names) != 1 || names[0] != "stays" {
		t.Fatalf("Tools() after RemoveTool = %v, want [stays]", names)
	}
	if err := e.cat.RemoveTool(e.ctx, "gone.soon"); !errors.Is(err, taskstate.ErrNotFound) {
		t.Fatalf("RemoveTool of a removed tool: %v, want ErrNotFound", err)
	}
	if err := e.cat.RemoveTool(e.ctx, "never"); !errors.Is(err, taskstate.ErrNotFound) {
		t.Fatalf("RemoveTool of an unknown tool: %v, want ErrNotFound", err)
	}
	e.publish(t, tool("gone.soon"))
	sameTool(t, "republished after RemoveTool", e.tool(t, "gone.soon"), tool("gone.soon"))
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
	ttl := s.opts.ToolRetention
	if ttl <= 0 {
		t.Skip("statetest.Options.ToolRetention not set")
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
