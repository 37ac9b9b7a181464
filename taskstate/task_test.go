package taskstate_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/mcpqueue/mcpqueue/broker"
	"github.com/mcpqueue/mcpqueue/taskstate"
)

var allStatuses = []taskstate.Status{
	taskstate.Working, taskstate.InputRequired,
	taskstate.Completed, taskstate.Failed, taskstate.Cancelled,
}

func TestCanTransition(t *testing.T) {
	t.Parallel()
	const (
		W = taskstate.Working
		I = taskstate.InputRequired
		C = taskstate.Completed
		F = taskstate.Failed
		X = taskstate.Cancelled
	)
	// Every pair of the five statuses, spelled out.
	cases := []struct {
		from, to taskstate.Status
		want     bool
	}{
		{W, W, true}, {W, I, true}, {W, C, true}, {W, F, true}, {W, X, true},
		{I, W, true}, {I, I, true}, {I, C, true}, {I, F, true}, {I, X, true},
		{C, W, false}, {C, I, false}, {C, C, false}, {C, F, false}, {C, X, false},
		{F, W, false}, {F, I, false}, {F, C, false}, {F, F, false}, {F, X, false},
		{X, W, false}, {X, I, false}, {X, C, false}, {X, F, false}, {X, X, false},
	}
	seen := map[[2]taskstate.Status]bool{}
	for _, c := range cases {
		seen[[2]taskstate.Status{c.from, c.to}] = true
		if got := taskstate.CanTransition(c.from, c.to); got != c.want {
			t.Errorf("CanTransition(%s, %s) = %v, want %v", c.from, c.to, got, c.want)
		}
	}
	if len(seen) != 25 {
		t.Fatalf("table covers %d distinct pairs, want all 25", len(seen))
	}

	// Anything outside the five statuses never transitions.
	for _, s := range allStatuses {
		for _, bad := range []taskstate.Status{"", "running", "WORKING", "done"} {
			if taskstate.CanTransition(s, bad) {
				t.Errorf("CanTransition(%s, %q) = true, want false", s, bad)
			}
			if taskstate.CanTransition(bad, s) {
				t.Errorf("CanTransition(%q, %s) = true, want false", bad, s)
			}
		}
	}
}

func TestStatusTerminalAndValid(t *testing.T) {
	t.Parallel()
	terminal := map[taskstate.Status]bool{
		taskstate.Working: false, taskstate.InputRequired: false,
		taskstate.Completed: true, taskstate.Failed: true, taskstate.Cancelled: true,
	}
	for _, s := range allStatuses {
		if got := s.Terminal(); got != terminal[s] {
			t.Errorf("%s.Terminal() = %v, want %v", s, got, terminal[s])
		}
		if !s.Valid() {
			t.Errorf("%s.Valid() = false", s)
		}
	}
	for _, s := range []taskstate.Status{"", "running", "Completed", "canceled"} {
		if s.Terminal() {
			t.Errorf("%q.Terminal() = true, want false", s)
		}
		if s.Valid() {
			t.Errorf("%q.Valid() = true, want false", s)
		}
	}
}

func TestNewID(t *testing.T) {
	t.Parallel()
	const n = 1000
	seen := make(map[string]bool, n)
	for range n {
		id := taskstate.NewID()
		if len(id) != 26 {
			t.Fatalf("NewID() = %q: length %d, want 26 (130 bits of base32)", id, len(id))
		}
		for i := 0; i < len(id); i++ {
			c := id[i]
			if !(c >= 'A' && c <= 'Z' || c >= '2' && c <= '7') {
				t.Fatalf("NewID() = %q: byte %q outside the base32 alphabet A-Z2-7", id, c)
			}
		}
		if !taskstate.ValidID(id) {
			t.Fatalf("ValidID(NewID()) = false for %q", id)
		}
		// Safe as an HTTP header value (it travels in Mcp-Name): a header
		// round trip leaves it untouched.
		h := http.Header{}
		h.Set("Mcp-Name", id)
		if got := h.Get("Mcp-Name"); got != id {
			t.Fatalf("header round trip of %q gave %q", id, got)
		}
		if seen[id] {
			t.Fatalf("NewID() returned %q twice in %d calls", id, n)
		}
		seen[id] = true
	}
}

func TestValidID(t *testing.T) {
	t.Parallel()
	cases := []struct {
		id   string
		want bool
	}{
		{taskstate.NewID(), true},
		{"ABCDEFGHIJKLMNOP", true}, // 16, the shortest allowed
		{"ABCDEFGHIJKLMNO", false}, // 15
		{"0123456789abcdef-_XYZ", true},
		{strings.Repeat("a", 64), true},
		{strings.Repeat("a", 65), false},
		{"", false},
		{"short", false},
		{"ABCDEFGHIJKLMNOP.Q", false},   // NATS token separator
		{"ABCDEFGHIJKLMNOP*", false},    // NATS wildcard
		{"ABCDEFGHIJKLMNOP>", false},    // NATS wildcard
		{"ABCDEFGHIJKLMNOP Q", false},   // space
		{"ABCDEFGHIJKLMNOP\r\n", false}, // header injection
		{"../../../../etc/passwd", false},
		{"ABCDEFGHIJKLMNOPé", false}, // non-ASCII
		{"ABCDEFGHIJKLMNOP:Q", false},
	}
	for _, c := range cases {
		if got := taskstate.ValidID(c.id); got != c.want {
			t.Errorf("ValidID(%q) = %v, want %v", c.id, got, c.want)
		}
	}
}

func TestParseBlobKey(t *testing.T) {
	t.Parallel()
	id := taskstate.NewID()
	if got, name, ok := taskstate.ParseBlobKey(taskstate.BlobKey(id, "artifact/a.txt")); !ok || got != id || name != "artifact/a.txt" {
		t.Errorf("ParseBlobKey(BlobKey(%q, artifact/a.txt)) = %q, %q, %v", id, got, name, ok)
	}
	for _, key := range []string{"", id, id + "/", "short/args", "/args"} {
		if _, _, ok := taskstate.ParseBlobKey(key); ok {
			t.Errorf("ParseBlobKey(%q) accepted it", key)
		}
	}
}

func TestSessionCodec(t *testing.T) {
	t.Parallel()
	want := &taskstate.Session{
		ID: taskstate.NewID(), ProtocolVersion: "2025-11-25", Owner: "alice",
		ClientInfo: json.RawMessage(`{"name":"c"}`), Subscriptions: []string{"mcpq://x"}, CreatedAt: time.Unix(1, 0).UTC(),
	}
	b, err := taskstate.EncodeSession(want)
	if err != nil {
		t.Fatalf("EncodeSession: %v", err)
	}
	got, err := taskstate.DecodeSession(b)
	if err != nil {
		t.Fatalf("DecodeSession: %v", err)
	}
	if g, _ := json.Marshal(got); string(g) != string(b) {
		t.Errorf("DecodeSession(EncodeSession(s)) = %s, want %s", g, b)
	}
	if _, err := taskstate.EncodeSession(&taskstate.Session{ID: "a.b"}); err == nil {
		t.Error("EncodeSession accepted a session with an invalid id")
	}
	if _, err := taskstate.DecodeSession([]byte("{")); err == nil {
		t.Error("DecodeSession accepted malformed JSON")
	}
}

func TestCloneIsIndependent(t *testing.T) {
	t.Parallel()
	orig := &taskstate.Task{
		ID:             taskstate.NewID(),
		Status:         taskstate.InputRequired,
		InputRequests:  map[string]json.RawMessage{"a": json.RawMessage(`{"q":1}`)},
		InputResponses: map[string]json.RawMessage{"b": json.RawMessage(`{"r":2}`)},
		Lease:          &taskstate.Lease{Worker: "w1", Expires: time.Unix(100, 0)},
		Error:          &taskstate.RPCError{Code: -32000, Message: "boom"},
		Revision:       7,
	}
	before, err := taskstate.Encode(orig)
	if err != nil {
		t.Fatal(err)
	}

	c := orig.Clone()
	if c == orig {
		t.Fatal("Clone returned the same pointer")
	}
	if c.Revision != orig.Revision {
		t.Errorf("Clone dropped Revision: %d, want %d", c.Revision, orig.Revision)
	}
	if got, _ := taskstate.Encode(c); string(got) != string(before) {
		t.Fatalf("clone differs from original:\n got %s\nwant %s", got, before)
	}

	c.InputRequests["new"] = json.RawMessage(`1`)
	delete(c.InputRequests, "a")
	c.InputResponses["b"] = json.RawMessage(`"changed"`)
	c.Lease.Worker = "w2"
	c.Lease.Expires = time.Unix(200, 0)
	c.Error.Message = "changed"
	c.Status = taskstate.Completed

	after, err := taskstate.Encode(orig)
	if err != nil {
		t.Fatal(err)
	}
	if string(after) != string(before) {
		t.Fatalf("mutating the clone changed the original:\nbefore %s\n after %s", before, after)
	}

	// A clone of a task without maps or pointers stays without them.
	bare := (&taskstate.Task{ID: "x"}).Clone()
	if bare.InputRequests != nil || bare.InputResponses != nil || bare.Lease != nil || bare.Error != nil {
		t.Errorf("Clone of a bare task invented fields: %+v", bare)
	}
}

func TestEncodeDecodeRoundTrip(t *testing.T) {
	t.Parallel()
	in := &taskstate.Task{
		ID: taskstate.NewID(), Tool: "t", Status: taskstate.Working,
		CreatedAt: time.Date(2026, 1, 2, 3, 4, 5, 6, time.UTC), Revision: 42,
	}
	b, err := taskstate.Encode(in)
	if err != nil {
		t.Fatal(err)
	}
	if !json.Valid(b) {
		t.Fatalf("Encode produced invalid JSON: %s", b)
	}
	var raw map[string]any
	_ = json.Unmarshal(b, &raw)
	if _, ok := raw["Revision"]; ok {
		t.Errorf("Revision is serialized: %s", b)
	}
	out, err := taskstate.Decode(b, 9)
	if err != nil {
		t.Fatal(err)
	}
	if out.Revision != 9 {
		t.Errorf("Decode revision = %d, want 9 (the store's)", out.Revision)
	}
	if !out.CreatedAt.Equal(in.CreatedAt) || out.ID != in.ID || out.Status != in.Status {
		t.Errorf("round trip changed the task: %+v", out)
	}
	if _, err := taskstate.Decode([]byte("{not json"), 1); err == nil {
		t.Error("Decode of garbage succeeded")
	}
}

// TestValidIDIsSafeName holds taskstate.ValidID to broker.SafeName's
// character rule (neither seam imports the other, so each spells it out): for
// every byte, an id made of it is valid exactly when the byte is a safe name
// (TestValidID covers the lengths).
func TestValidIDIsSafeName(t *testing.T) {
	for b := 0; b < 256; b++ {
		c := string([]byte{byte(b)})
		if got, want := taskstate.ValidID(strings.Repeat(c, 16)), broker.SafeName(c); got != want {
			t.Errorf("byte %#x: ValidID = %v, SafeName = %v", b, got, want)
		}
	}
	if id := taskstate.NewID(); !broker.SafeName(id) {
		t.Errorf("NewID %q is not a safe name", id)
	}
}

func TestFileResponses(t *testing.T) {
	t.Parallel()
	answers := map[string]json.RawMessage{"a": json.RawMessage(`1`), "b": json.RawMessage(`2`), "stray": json.RawMessage(`3`)}
	lookup := func(k string) (json.RawMessage, bool) { v, ok := answers[k]; return v, ok }
	open := func(keys ...string) map[string]json.RawMessage {
		m := map[string]json.RawMessage{}
		for _, k := range keys {
			m[k] = json.RawMessage(`{}`)
		}
		return m
	}
	cases := []struct {
		name        string
		task        taskstate.Task
		wantN       int
		wantResume  bool
		wantStatus  taskstate.Status
		wantOpen    int
		wantRequeue int
	}{
		{"one of two answered", taskstate.Task{Status: taskstate.InputRequired, InputRequests: open("a", "c")}, 1, false, taskstate.InputRequired, 1, 0},
		{"all answered, a run waits", taskstate.Task{Status: taskstate.InputRequired, InputRequests: open("a", "b")}, 2, false, taskstate.Working, 0, 0},
		{"all answered, parked", taskstate.Task{Status: taskstate.InputRequired, InputRequests: open("a"), Parked: &taskstate.Parked{}}, 1, true, taskstate.Working, 0, 1},
		{"none answered", taskstate.Task{Status: taskstate.InputRequired, InputRequests: open("c"), Parked: &taskstate.Parked{}}, 0, false, taskstate.InputRequired, 1, 0},
		{"filed while working", taskstate.Task{Status: taskstate.Working, InputRequests: open("a"), Parked: &taskstate.Parked{}}, 1, false, taskstate.Working, 0, 0},
	}
	for _, c := range cases {
		task := c.task
		n, resume := task.FileResponses(lookup)
		if n != c.wantN || resume != c.wantResume || task.Status != c.wantStatus || len(task.InputRequests) != c.wantOpen || task.Requeues != c.wantRequeue {
			t.Errorf("%s: n=%d resume=%v status=%s open=%d requeues=%d, want %d %v %s %d %d", c.name,
				n, resume, task.Status, len(task.InputRequests), task.Requeues, c.wantN, c.wantResume, c.wantStatus, c.wantOpen, c.wantRequeue)
		}
		if resume != (task.Parked == nil && c.task.Parked != nil) {
			t.Errorf("%s: Parked %v after resume=%v", c.name, task.Parked, resume)
		}
		if len(task.InputResponses) != n || (n > 0 && string(task.InputResponses["a"]) != "1") {
			t.Errorf("%s: responses %v", c.name, task.InputResponses)
		}
		if _, ok := task.InputResponses["stray"]; ok {
			t.Errorf("%s: an answer to no open request was filed", c.name)
		}
	}
}
