package taskstate

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// Store keeps task records. Every write is a compare-and-set on Revision.
type Store interface {
	// Create stores a new record; ErrExists if the id is taken. It sets t.Revision.
	Create(ctx context.Context, t *Task) error
	// Get returns the current record or ErrNotFound.
	Get(ctx context.Context, id string) (*Task, error)
	// Update replaces the record if its stored revision still equals t.Revision
	// (ErrConflict otherwise) and sets t.Revision to the new one. A terminal
	// record is stored with its TTL counted from this write.
	Update(ctx context.Context, t *Task) error
	// Watch delivers the current record and then every later version of it
	// until ctx ends or the record turns terminal (the terminal version is
	// delivered, then the channel closes). The channel is closed on ctx end.
	Watch(ctx context.Context, id string) (<-chan *Task, error)
	// Follow is Watch without the first read: it delivers the versions
	// written after it returns, the creation included (the record need not
	// exist yet), until ctx ends or a terminal version was delivered. For a
	// caller that knows the record's id before creating it and wants its
	// outcome: it saves a read and cannot miss a version written between
	// the create and a Watch. A malformed id is ErrNotFound.
	Follow(ctx context.Context, id string) (<-chan *Task, error)
	// List returns up to limit of owner's tasks in creation order, starting
	// after the opaque cursor ("" = from the first), and the cursor of the
	// next page ("" when there is none). Tasks without an owner are never
	// listed. A malformed cursor is ErrBadCursor.
	List(ctx context.Context, owner, cursor string, limit int) ([]*Task, string, error)
	// Scan calls fn with stored records, across all owners, until fn
	// returns false or every record was visited. With active set it visits
	// every non-terminal record and may skip terminal ones; without, it
	// visits every record. Records are read as the scan goes, not as one
	// snapshot: a record written meanwhile may be seen in either version
	// or not at all. Its cost grows with the records stored, so it is for
	// the reaper and operators, never for a request path.
	Scan(ctx context.Context, active bool, fn func(*Task) bool) error
	// Delete removes a terminal record before its TTL ends (an operator's
	// purge), and its blobs when the store keeps Blobs. It refuses an
	// active record with ErrInvalidChange and a missing one with
	// ErrNotFound.
	Delete(ctx context.Context, id string) error
}

// Purgeable is the check every Store.Delete makes on the record it read:
// only a terminal record may be purged before its TTL.
func Purgeable(t *Task) error {
	if !t.Status.Terminal() {
		return fmt.Errorf("%w: %s is %s, not terminal", ErrInvalidChange, t.ID, t.Status)
	}
	return nil
}

// GetPurgeable is how a Store.Delete that reads before it removes starts:
// it reads id from s and returns the record if Purgeable allows its purge.
func GetPurgeable(ctx context.Context, s Store, id string) (*Task, error) {
	t, err := s.Get(ctx, id)
	if err != nil {
		return nil, err
	}
	if err := Purgeable(t); err != nil {
		return nil, err
	}
	return t, nil
}

// WatchRecord is a Store's Watch (current set) or Follow, for the stores to
// share. It refuses a malformed id with ErrNotFound, calls subscribe and
// then, with current, reads the record from s, so no version written after
// that read is missed. On the channel it returns it delivers the record it
// read and then the version read makes of each announcement arriving on
// the subscription's channel, until it has delivered a terminal version,
// ctx ends, done closes, the subscription's channel closes or read returns
// false (the record is gone); then it calls the subscription's stop and
// closes the channel. A nil version from read, or one no newer than the
// last delivered (its revision is last), is skipped.
func WatchRecord[T any](ctx context.Context, s Store, id string, current bool, done <-chan struct{},
	subscribe func(ctx context.Context, id string) (in <-chan T, stop func(), err error),
	read func(ctx context.Context, id string, v T, last uint64) (*Task, bool)) (<-chan *Task, error) {
	if !ValidID(id) {
		return nil, ErrNotFound
	}
	in, stop, err := subscribe(ctx, id)
	if err != nil {
		return nil, err
	}
	var cur *Task
	if current {
		if cur, err = s.Get(ctx, id); err != nil {
			stop()
			return nil, err
		}
	}
	out := make(chan *Task, 1)
	go func() {
		defer close(out)
		defer stop()
		var last uint64
		send := func(t *Task) bool { // false: the relay ends
			last = t.Revision
			select {
			case out <- t:
				return !t.Status.Terminal()
			case <-ctx.Done():
				return false
			case <-done:
				return false
			}
		}
		if cur != nil && !send(cur) {
			return
		}
		for {
			var v T
			var ok bool
			select {
			case <-ctx.Done():
				return
			case <-done:
				return
			case v, ok = <-in:
			}
			if !ok {
				return
			}
			t, more := read(ctx, id, v, last)
			if !more {
				return
			}
			if t != nil && t.Revision > last && !send(t) {
				return
			}
		}
	}()
	return out, nil
}

// Sessions keeps 2025-11-25 protocol sessions, so any api replica can serve
// any session. Sessions expire a fixed time after they were last written.
type Sessions interface {
	// CreateSession stores a new session unless its owner already has max
	// sessions that have neither expired nor been deleted: then it stores
	// nothing and returns ErrSessionLimit. The count holds across every
	// client of the store (api replicas), concurrent creations included.
	// max <= 0, or an empty Owner: no cap.
	CreateSession(ctx context.Context, s *Session, max int) error
	// PutSession writes a session again (its log level, its
	// subscriptions), extending its life.
	PutSession(ctx context.Context, s *Session) error
	Session(ctx context.Context, id string) (*Session, error) // ErrNotFound
	DeleteSession(ctx context.Context, id string) error       // nil if absent
}

// ErrSessionLimit is CreateSession's refusal: the owner has its max sessions.
var ErrSessionLimit = errors.New("taskstate: too many sessions")

// Session is what a 2025-11-25 initialize established.
type Session struct {
	ID                 string          `json:"id"`
	ProtocolVersion    string          `json:"protocolVersion"`
	ClientCapabilities json.RawMessage `json:"clientCapabilities,omitempty"`
	ClientInfo         json.RawMessage `json:"clientInfo,omitempty"`
	Owner              string          `json:"owner,omitempty"`    // authenticated principal, if any
	LogLevel           string          `json:"logLevel,omitempty"` // set by logging/setLevel
	// Subscriptions are the resource URIs resources/subscribe asked
	// notifications/resources/updated for.
	Subscriptions []string  `json:"subscriptions,omitempty"`
	CreatedAt     time.Time `json:"createdAt"`
}

// EncodeSession and DecodeSession are the one serialization every Sessions
// uses. EncodeSession refuses a session whose ID ValidID rejects: no
// reader could ask for it.
func EncodeSession(s *Session) ([]byte, error) {
	if !ValidID(s.ID) {
		return nil, fmt.Errorf("taskstate: session: invalid id %q", s.ID)
	}
	return json.Marshal(s)
}

// DecodeSession reads a session stored by EncodeSession.
func DecodeSession(b []byte) (*Session, error) {
	var s Session
	if err := json.Unmarshal(b, &s); err != nil {
		return nil, fmt.Errorf("taskstate: decode session: %w", err)
	}
	return &s, nil
}

// Catalog keeps the tools, prompts, resources, resource templates and
// completions workers serve. An entry outlives its
// workers: it is kept for the store's retention after its last refresh, or
// until RemoveTool, so a pool scaled to zero keeps its tools listed and
// callable (their tasks queue until a worker returns); ToolInfo.LiveUntil
// tells whether a worker serves it now. Entries are addressed by
// ToolInfo.Key: the name for a tool, "prompt/"+name for a prompt.
type Catalog interface {
	PublishTool(ctx context.Context, t *ToolInfo) error
	Tool(ctx context.Context, key string) (*ToolInfo, error) // ErrNotFound
	Tools(ctx context.Context) ([]*ToolInfo, error)          // sorted by Key
	// RemoveTool deletes an entry (an operator's command): the tool is no
	// longer listed, and calls get the unknown-tool error, until a worker
	// publishes it again. ErrNotFound if there is none.
	RemoveTool(ctx context.Context, key string) error
}

// DefaultToolRetention is how long a catalog entry is kept after its last
// refresh unless a store is told otherwise.
const DefaultToolRetention = 7 * 24 * time.Hour

// AwaitingWorker is the statusMessage of a task created while no worker
// served its tool; the worker that takes the task clears it.
func AwaitingWorker(tool string) string {
	return fmt.Sprintf("no worker is serving %q right now; the task runs when one starts", tool)
}

// Kinds of catalog entries (and of jobs).
const (
	KindTool   = ""       // a tool: tools/list, tools/call
	KindPrompt = "prompt" // a prompt: prompts/list, prompts/get
)

// CatalogKey addresses a catalog entry of kind with name.
func CatalogKey(kind, name string) string {
	if kind == KindTool {
		return name
	}
	return kind + "/" + name
}

// Key is the entry's catalog address.
func (t *ToolInfo) Key() string { return CatalogKey(t.Kind, t.Name) }

// TaskSupport says whether a tool runs as a task.
type TaskSupport string

// The task-support levels of MCP's tool execution.taskSupport.
const (
	TaskForbidden TaskSupport = "forbidden" // always inline; never a task
	TaskOptional  TaskSupport = "optional"  // a task when the client supports tasks
	TaskRequired  TaskSupport = "required"  // refuses clients without task support
)

// ToolInfo is what a worker publishes about one tool.
type ToolInfo struct {
	Kind string `json:"kind,omitempty"` // KindTool, KindPrompt, KindResource, KindTemplate, KindCompletion
	// Name addresses the entry within its kind: a tool's or prompt's name,
	// a resource's URI, a template's URI template, a completion's ref key.
	Name         string          `json:"name"`
	Title        string          `json:"title,omitempty"`
	Description  string          `json:"description,omitempty"`
	InputSchema  json.RawMessage `json:"inputSchema"`
	OutputSchema json.RawMessage `json:"outputSchema,omitempty"`
	Annotations  json.RawMessage `json:"annotations,omitempty"`
	TaskSupport  TaskSupport     `json:"taskSupport"`
	TimeoutMs    int64           `json:"timeoutMs,omitempty"`
	// InputFirst: the call gathers its input inline (MRTR) before it becomes
	// a task, even for clients that support tasks.
	InputFirst bool `json:"inputFirst,omitempty"`
	// Arguments of a prompt (MCP PromptArgument list).
	Arguments json.RawMessage `json:"arguments,omitempty"`
	// InlineWaitMs caps how long the api may wait for a task of this tool
	// to finish before handing out its task handle (adaptive completion):
	// 0 leaves it to the api, negative never waits (a task handle always).
	InlineWaitMs int64 `json:"inlineWaitMs,omitempty"`
	// RateLimit is the tool's rate limit (consumer.Tool.RateLimit, a
	// worker's --tool-rate-limit), published for the api and the console to
	// show; nil: none. The workers enforce it, not the api.
	RateLimit *Rate `json:"rateLimit,omitempty"`
	// ResourceName, MimeType and Size describe a resource or template
	// (its MCP name: Name holds its URI).
	ResourceName string `json:"resourceName,omitempty"`
	MimeType     string `json:"mimeType,omitempty"`
	Size         int64  `json:"size,omitempty"`
	// Pool is the pool of the workers that publish the entry
	// (consumer.Config.Pool, a worker's --pool): a queue with one queue
	// per pool (Asynq) routes the entry's jobs to that pool's queue. When
	// two pools serve one entry (an overlap, a rolling deploy), the last
	// refresh names one of them. "": not known (an entry of an older
	// worker); its jobs go to the route's own queue.
	Pool string `json:"pool,omitempty"`
	// LiveUntil is when the entry's workers' heartbeats run out: while it
	// is in the future some worker serves the tool. Workers refresh it.
	LiveUntil time.Time `json:"liveUntil,omitzero"`
}

// Live reports whether some worker served the tool at now (see LiveUntil).
func (t *ToolInfo) Live(now time.Time) bool { return now.Before(t.LiveUntil) }

// Mutate reads the record, lets decide change it, and writes it back with a
// compare-and-set, re-reading and re-deciding when another writer won the
// race. decide returns ErrSkip to leave the record as it is (Mutate then
// returns the current record and ErrSkip). A change that breaks the status
// machine returns ErrInvalidChange and writes nothing.
func Mutate(ctx context.Context, s Store, id string, now func() time.Time, decide func(*Task) error) (*Task, error) {
	return MutateFrom(ctx, s, nil, id, now, decide)
}

// MutateFrom is Mutate starting from a version of the record the caller
// already holds (nil: read it first), re-reading only when another writer
// got there in between. A worker that tracks the revision it last wrote
// saves a read per write.
func MutateFrom(ctx context.Context, s Store, known *Task, id string, now func() time.Time, decide func(*Task) error) (*Task, error) {
	for {
		cur, fresh := known, known == nil
		known = nil
		if fresh {
			var err error
			if cur, err = s.Get(ctx, id); err != nil {
				return nil, err
			}
		}
		next := cur.Clone()
		if err := decide(next); err != nil {
			if !fresh {
				continue // decided on what the caller held: decide again on the stored version
			}
			return cur, err
		}
		if next.Status != cur.Status && !CanTransition(cur.Status, next.Status) {
			return cur, fmt.Errorf("%w: %s → %s", ErrInvalidChange, cur.Status, next.Status)
		}
		if cur.Status.Terminal() {
			return cur, fmt.Errorf("%w: %s is terminal", ErrInvalidChange, cur.Status)
		}
		next.LastUpdatedAt = now().UTC()
		err := s.Update(ctx, next)
		if errors.Is(err, ErrConflict) {
			continue
		}
		if err != nil {
			return cur, err
		}
		return next, nil
	}
}

// ErrBadCursor is returned by List for a cursor it did not make.
var ErrBadCursor = errors.New("taskstate: invalid cursor")

// ErrSkip tells Mutate to write nothing.
var ErrSkip = errors.New("taskstate: no change")
