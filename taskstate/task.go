// Package taskstate owns the task record (one per tool call run as a task:
// its owner, status, input requests and outcome), the rules by which its
// status may change (working, input_required, completed, failed, cancelled),
// and the Store that keeps records, with the Catalog of the tools workers
// serve. It imports only the standard library; the implementations live in
// sub-packages (natskv and redisstate for deployments, memstate in one
// process for unit tests) and every one of them passes the shared contract
// suite in statetest.
package taskstate

import (
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"time"
)

// Status is where a task is in its life.
type Status string

// The statuses of MCP's task lifecycle: working and input_required are live,
// the other three terminal.
const (
	Working       Status = "working"
	InputRequired Status = "input_required"
	Completed     Status = "completed"
	Failed        Status = "failed"
	Cancelled     Status = "cancelled"
)

// Terminal reports whether s can never change again.
func (s Status) Terminal() bool {
	return s == Completed || s == Failed || s == Cancelled
}

// Valid reports whether s is one of the five statuses.
func (s Status) Valid() bool {
	switch s {
	case Working, InputRequired, Completed, Failed, Cancelled:
		return true
	}
	return false
}

// CanTransition reports whether a record may move from one status to another.
// Staying in a non-terminal status is allowed (a progress message, a lease
// renewal); a terminal status never changes.
func CanTransition(from, to Status) bool {
	if !from.Valid() || !to.Valid() || from.Terminal() {
		return false
	}
	return true // working ⇄ input_required, and either → any terminal status
}

// Mode says who waits for a task and how its input requests travel.
type Mode string

const (
	// ModeTask means the client holds a task handle and polls; input requests go
	// on the record (input_required) and answers come back through it.
	ModeTask Mode = "task"
	// ModeSync means the client waits inline for the result. A handler that needs
	// input ends the run with an input-required outcome (MRTR) and runs again
	// when the client retries with the answers.
	ModeSync Mode = "sync"
	// ModeGather is like ModeSync until the handler has the input it needs and
	// calls Continue; from then on it is a task and the waiting client gets
	// the task handle.
	ModeGather Mode = "gather"
)

// Era names the wire a task was created on.
type Era string

// The protocol revisions a task can be created on.
const (
	Era20260728 Era = "2026-07-28"
	Era20251125 Era = "2025-11-25"
)

// RPCError is a JSON-RPC error object stored on a failed task.
type RPCError struct {
	Code    int             `json:"code"`
	Message string          `json:"message"`
	Data    json.RawMessage `json:"data,omitempty"`
}

func (e *RPCError) Error() string { return fmt.Sprintf("rpc error %d: %s", e.Code, e.Message) }

// Lease records which worker holds a running task and until when.
type Lease struct {
	Worker  string    `json:"worker"`
	Expires time.Time `json:"expires"`
}

// Task is the durable record of one tool call. It is stored once, whatever
// wire created it; the wires map it at the edge.
type Task struct {
	ID        string          `json:"id"`
	Kind      string          `json:"kind,omitempty"` // KindTool or KindPrompt
	Tool      string          `json:"tool"`
	Arguments json.RawMessage `json:"arguments,omitempty"`
	Owner     string          `json:"owner,omitempty"`
	// IdempotencyKey is the key the client sent with the call that created
	// the task (its id is then IdempotentID of it), and InputDigest that
	// call's InputDigest: a later call with the key and another digest is
	// another call, refused.
	IdempotencyKey string    `json:"idempotencyKey,omitempty"`
	InputDigest    string    `json:"inputDigest,omitempty"`
	Era            Era       `json:"era"`
	Mode           Mode      `json:"mode"`
	Status         Status    `json:"status"`
	StatusMessage  string    `json:"statusMessage,omitempty"`
	CreatedAt      time.Time `json:"createdAt"`
	LastUpdatedAt  time.Time `json:"lastUpdatedAt"`
	// TTLMs is the retention after the task turns terminal; 0 means unlimited.
	TTLMs          int64                      `json:"ttlMs"`
	PollIntervalMs int64                      `json:"pollIntervalMs,omitempty"`
	Result         json.RawMessage            `json:"result,omitempty"`
	Error          *RPCError                  `json:"error,omitempty"`
	InputRequests  map[string]json.RawMessage `json:"inputRequests,omitempty"`
	InputResponses map[string]json.RawMessage `json:"inputResponses,omitempty"`
	Attempt        int                        `json:"attempt,omitempty"`
	// MaxAttempts is the tool's bound on runs, written by the worker that
	// takes the task, so the reaper fails a lost task on the tool's last
	// attempt (0: the reaper's own setting).
	MaxAttempts int    `json:"maxAttempts,omitempty"`
	Lease       *Lease `json:"lease,omitempty"`
	// Requeues counts how often the task's job went back on the queue: the
	// reaper's (its worker was lost, or its job never reached the queue)
	// and resumes of a parked task. The n-th publishes with dedupe key
	// JobKey.
	Requeues int `json:"requeues,omitempty"`
	// Parked is set while the task waits for answers to its input requests
	// with no run holding it: the run that asked gave its worker slot back
	// (consumer: "park and resume"). The last answer clears it and
	// publishes the job again.
	Parked *Parked `json:"parked,omitempty"`
	// Parks counts the runs that ended by parking; they are not attempts
	// (Attempt counts every take, so runs stay fenced from each other).
	Parks int `json:"parks,omitempty"`
	// Retries counts the runs that ended by asking to run again
	// (consumer.Retryable). A run counted in Runs and not here, on a task
	// not terminal, did not finish: its worker died or lost its lease.
	Retries int `json:"retries,omitempty"`
	// Checkpoint is state a handler keeps across its runs (Call.Checkpoint).
	Checkpoint json.RawMessage `json:"checkpoint,omitempty"`
	// ArgumentsRef and ResultRef stand for Arguments and Result when these
	// are kept in a blob (Blobs), being larger than InlineMax.
	ArgumentsRef *BlobRef `json:"argumentsRef,omitempty"`
	ResultRef    *BlobRef `json:"resultRef,omitempty"`
	// Artifacts are the blobs the task's handler attached (Call.Artifact),
	// by name, served as MCP resources to the task's owner.
	Artifacts map[string]Artifact `json:"artifacts,omitempty"`
	// Meta carries request context the worker may need (trace parent, progress token).
	Meta map[string]json.RawMessage `json:"meta,omitempty"`

	// Revision is the store's version of this record; it is not serialized.
	// Update succeeds only if it still matches the stored revision.
	Revision uint64 `json:"-"`
}

// Parked says since when a task waits for its client's answers without a
// run, and until when it may (then it fails: the input timeout).
type Parked struct {
	Since time.Time `json:"since"`
	Until time.Time `json:"until"`
}

// Runs is how many runs of the task counted as attempts: takes that did
// not end by parking.
func (t *Task) Runs() int { return t.Attempt - t.Parks }

// JobKey is the dedupe key of the task's newest job: the task id for the
// job the producer published, id/r<n> for the reaper's n-th requeue, so a
// requeue is never mistaken for a job the broker already saw.
func (t *Task) JobKey() string {
	if t.Requeues == 0 {
		return t.ID
	}
	return fmt.Sprintf("%s/r%d", t.ID, t.Requeues)
}

// FileResponses files the client's answers to t's open input requests:
// each request whose key answer knows moves from InputRequests to
// InputResponses. It returns how many it filed (none: there is nothing to
// write). Once no request is open, a task in input_required is working
// again; if it was parked (it waited with no run), Parked is cleared,
// Requeues counts one more and resume is true: the caller queues its job
// again, under the fresh JobKey.
func (t *Task) FileResponses(answer func(key string) (json.RawMessage, bool)) (n int, resume bool) {
	for k := range t.InputRequests {
		a, ok := answer(k)
		if !ok {
			continue
		}
		if t.InputResponses == nil {
			t.InputResponses = map[string]json.RawMessage{}
		}
		t.InputResponses[k] = a
		delete(t.InputRequests, k)
		n++
	}
	if n > 0 && len(t.InputRequests) == 0 && t.Status == InputRequired {
		t.Status = Working
		if t.Parked != nil {
			t.Parked = nil
			t.Requeues++
			resume = true
		}
	}
	return n, resume
}

// TTL returns the retention to apply once the task is terminal (0 = forever).
func (t *Task) TTL() time.Duration { return time.Duration(t.TTLMs) * time.Millisecond }

// Clone returns a deep enough copy that mutating maps on it leaves t alone.
func (t *Task) Clone() *Task {
	c := *t
	c.InputRequests = maps.Clone(t.InputRequests)
	c.InputResponses = maps.Clone(t.InputResponses)
	c.Lease = clonePtr(t.Lease)
	c.Parked = clonePtr(t.Parked)
	c.ArgumentsRef = clonePtr(t.ArgumentsRef)
	c.ResultRef = clonePtr(t.ResultRef)
	c.Artifacts = maps.Clone(t.Artifacts)
	c.Error = clonePtr(t.Error)
	return &c
}

// clonePtr returns a pointer to a copy of *p (nil for nil).
func clonePtr[T any](p *T) *T {
	if p == nil {
		return nil
	}
	c := *p
	return &c
}

// Encode and Decode are the one serialization every store uses: the JSON
// encoding/json reads and writes for Task (see codec.go).
func Encode(t *Task) ([]byte, error) {
	if b, ok := appendRecord(make([]byte, 0, 320+len(t.Arguments)+len(t.Result)), t); ok {
		return b, nil
	}
	return json.Marshal(t)
}

// Decode reads a record stored by Encode, with the store's revision rev.
func Decode(b []byte, rev uint64) (*Task, error) {
	var t Task
	if json.Valid(b) && decodeRecord(b, &t) {
		t.Revision = rev
		return &t, nil
	}
	t = Task{}
	if err := json.Unmarshal(b, &t); err != nil {
		return nil, fmt.Errorf("taskstate: decode record: %w", err)
	}
	t.Revision = rev
	return &t, nil
}

// NewID returns an unguessable task id: 130 random bits as 26 base32
// characters, ASCII and safe in an HTTP header or a NATS subject token.
func NewID() string { return rand.Text() }

// ValidID reports whether s looks like an id NewID could have made: 16 to 64
// ASCII letters, digits, "_" and "-" — the plain-name rule broker.SafeName
// applies to bus keys (TestValidIDIsSafeName holds the two together, since
// neither seam imports the other). Stores use it to refuse keys that could
// never exist before touching the backend.
func ValidID(s string) bool {
	return len(s) >= 16 && len(s) <= 64 && plainName(s)
}

// plainName reports whether s holds only ASCII letters, digits, "_" and "-".
func plainName(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

// Errors every Store returns, checked with errors.Is.
var (
	ErrNotFound      = errors.New("taskstate: task not found")
	ErrExists        = errors.New("taskstate: task already exists")
	ErrConflict      = errors.New("taskstate: revision conflict")
	ErrInvalidChange = errors.New("taskstate: invalid status transition")
	// ErrTooLarge: the record is larger than the store can keep (NATS
	// bounds a message at its max_payload, 1 MiB by default). Writing it
	// again cannot help.
	ErrTooLarge = errors.New("taskstate: record too large for the store")
)
