package statetest

import (
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mcpqueue/mcpqueue/taskstate"
)

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
