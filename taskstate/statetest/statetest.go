// Package statetest is the contract suite every taskstate.Store,
// taskstate.Catalog and taskstate.Sessions implementation passes, so NATS
// KV, Redis and the in-memory store behave the same by construction. An implementation's test calls Run, declaring its
// optional abilities in a Features value, with a constructor that returns a
// fresh, isolated store (its own bucket or key prefix) for each subtest;
// subtests run in parallel.
//
// The tests are split by concern, as the files say: records.go (create,
// get, update, Mutate), watch.go (Watch and Follow), retention.go (TTLs),
// list.go (List), scan.go, session.go (Sessions), catalog.go (Catalog),
// blob.go, feed.go, active.go (ActiveCounter and Leaser), rate.go
// (RateLimiter) and
// statemachine.go (the status machine under Mutate).
package statetest

import (
	"context"
	"encoding/json"
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
	// Twin returns a second client of the store s newStore returned: its
	// own connection to the same server, under the same names, as a
	// second worker process has. The rate-limit test holds the two to one
	// budget. Nil: s itself (an in-memory store has no second client).
	Twin func(t *testing.T, s taskstate.Store) taskstate.Store
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
	// RateLimit: the Store implements taskstate.RateLimiter (rate limits
	// kept in the store; feature: rate limits per tool).
	RateLimit bool
	// Schedules: the Store implements taskstate.Schedules (recurring
	// schedules, issue #32 item 5).
	Schedules bool
	// Outbox: the Store implements taskstate.Outbox (completion
	// webhooks' pending deliveries).
	Outbox bool
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
		{"MarkReplayed", s.markReplayed}, // dead letters and replay: replay.go
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
	if f.RateLimit { // feature: rate limits per tool (rate.go)
		tests = append(tests, stateTest{"RateLimitSpacing", s.rateSpacing}, stateTest{"RateLimitShared", s.rateShared})
	}
	if f.Schedules {
		tests = append(tests, stateTest{"Schedules", s.schedules})
	}
	if f.Outbox { // completion webhooks: outbox.go
		tests = append(tests, stateTest{"Outbox", s.outbox})
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
		{"taskstate.RateLimiter", s.features.RateLimit, is[taskstate.RateLimiter](e.store)},
		{"taskstate.Schedules", s.features.Schedules, is[taskstate.Schedules](e.store)},
		{"taskstate.Outbox", s.features.Outbox, is[taskstate.Outbox](e.store)},
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
