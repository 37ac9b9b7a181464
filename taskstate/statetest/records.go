package statetest

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mcpqueue/mcpqueue/taskstate"
)

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
