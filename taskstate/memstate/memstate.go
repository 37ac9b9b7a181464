package memstate

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/mcpqueue/mcpqueue/taskstate"
)

// Config tunes a Store. A nil Config is valid; zero fields take defaults.
type Config struct {
	// ToolRetention is how long a catalog entry is kept after its last
	// refresh. Default taskstate.DefaultToolRetention.
	ToolRetention time.Duration
	// SessionTTL is a session's lifetime. Default 24h.
	SessionTTL time.Duration
}

// Store is an in-memory taskstate.Store, taskstate.Catalog,
// taskstate.Sessions, taskstate.Blobs and taskstate.Feed. Its zero value is
// not usable; call New. It is safe for concurrent use.
type Store struct {
	cfg Config

	mu       sync.Mutex
	rev      uint64 // the store's last revision: every write takes the next
	tasks    map[string]*record
	active   map[string]map[string]bool // by owner: the ids of its active tasks
	leases   map[string]lease
	rates    map[string]time.Time         // rate limits: each key's next free slot (rate.go)
	watchers map[string]map[*watcher]bool // by task id
	feeds    map[*taskstate.FeedQueue]bool
	sessions entries
	tools    entries
	blobs    entries

	schedules sync.Map // name → *taskstate.Schedule: schedules.go (issue #32 item 5)
	outbox    outbox   // completion webhooks' pending deliveries (outbox.go)
}

var (
	_ taskstate.Store    = (*Store)(nil)
	_ taskstate.Catalog  = (*Store)(nil)
	_ taskstate.Sessions = (*Store)(nil)
	_ taskstate.Blobs    = (*Store)(nil)
	_ taskstate.Feed     = (*Store)(nil)

	_ taskstate.ActiveCounter = (*Store)(nil)
	_ taskstate.Leaser        = (*Store)(nil)
	_ taskstate.Outbox        = (*Store)(nil) // completion webhooks
)

// record is one stored task: its encoding (taskstate.Encode), so nothing a
// caller holds aliases it, and what List and expiry need.
type record struct {
	data    []byte
	rev     uint64
	owner   string
	created time.Time
	expires time.Time // zero: never
}

// New returns an empty store.
func New(cfg *Config) *Store {
	var c Config
	if cfg != nil {
		c = *cfg
	}
	if c.ToolRetention <= 0 {
		c.ToolRetention = taskstate.DefaultToolRetention
	}
	if c.SessionTTL <= 0 {
		c.SessionTTL = 24 * time.Hour
	}
	return &Store{
		cfg: c, tasks: map[string]*record{}, active: map[string]map[string]bool{}, leases: map[string]lease{}, rates: map[string]time.Time{},
		watchers: map[string]map[*watcher]bool{},
		feeds:    map[*taskstate.FeedQueue]bool{}, sessions: entries{}, tools: entries{}, blobs: entries{},
	}
}

// lookupLocked returns the live record of id, dropping it if it expired.
func (s *Store) lookupLocked(id string, now time.Time) (*record, bool) {
	r, ok := s.tasks[id]
	if ok && !r.expires.IsZero() && !now.Before(r.expires) {
		delete(s.tasks, id)
		return nil, false
	}
	return r, ok
}

func (r *record) task() *taskstate.Task {
	t, err := taskstate.Decode(r.data, r.rev)
	if err != nil {
		panic(fmt.Sprintf("memstate: a record it encoded does not decode: %v", err)) // cannot happen
	}
	return t
}

// writeLocked stores t as the next revision and tells its watchers and
// the feeds.
func (s *Store) writeLocked(t *taskstate.Task, created time.Time, now time.Time) error {
	b, err := taskstate.Encode(t)
	if err != nil {
		return fmt.Errorf("memstate: encode %s: %w", t.ID, err)
	}
	s.rev++
	r := &record{data: b, rev: s.rev, owner: t.Owner, created: created}
	if t.Status.Terminal() && t.TTL() > 0 {
		r.expires = now.Add(t.TTL()) // retention counts from the terminal write
	}
	s.tasks[t.ID] = r
	s.markLocked(t)
	t.Revision = r.rev
	for w := range s.watchers[t.ID] {
		w.push(r.task())
	}
	for f := range s.feeds {
		f.Push(r.task())
	}
	return nil
}

// Create implements taskstate.Store.
func (s *Store) Create(ctx context.Context, t *taskstate.Task) error {
	if !taskstate.ValidID(t.ID) {
		return fmt.Errorf("memstate: create: invalid task id %q", t.ID)
	}
	now := time.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.lookupLocked(t.ID, now); ok {
		return fmt.Errorf("%w: %s", taskstate.ErrExists, t.ID)
	}
	return s.writeLocked(t, t.CreatedAt, now)
}

// Get implements taskstate.Store.
func (s *Store) Get(ctx context.Context, id string) (*taskstate.Task, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.lookupLocked(id, time.Now())
	if !ok {
		return nil, fmt.Errorf("%w: %.64q", taskstate.ErrNotFound, id)
	}
	return r.task(), nil
}

// Update implements taskstate.Store.
func (s *Store) Update(ctx context.Context, t *taskstate.Task) error {
	now := time.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.lookupLocked(t.ID, now)
	switch {
	case !ok:
		return fmt.Errorf("%w: %.64q", taskstate.ErrNotFound, t.ID)
	case r.rev != t.Revision:
		return fmt.Errorf("%w: %s is at revision %d, not %d", taskstate.ErrConflict, t.ID, r.rev, t.Revision)
	}
	return s.writeLocked(t, r.created, now)
}

// Delete implements taskstate.Store.
func (s *Store) Delete(ctx context.Context, id string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.lookupLocked(id, time.Now())
	if !ok {
		return fmt.Errorf("%w: %.64q", taskstate.ErrNotFound, id)
	}
	if err := taskstate.Purgeable(r.task()); err != nil {
		return err
	}
	delete(s.tasks, id)
	s.blobs.deletePrefix(id + "/")
	return nil
}

// Scan implements taskstate.Store. It reads the records at once and calls
// fn without holding the store, so fn may write.
func (s *Store) Scan(ctx context.Context, active bool, fn func(*taskstate.Task) bool) error {
	now := time.Now()
	var all []*taskstate.Task
	s.mu.Lock()
	for id := range s.tasks {
		if r, ok := s.lookupLocked(id, now); ok {
			if t := r.task(); !active || !t.Status.Terminal() {
				all = append(all, t)
			}
		}
	}
	s.mu.Unlock()
	for _, t := range all {
		if err := ctx.Err(); err != nil {
			return err
		}
		if !fn(t) {
			return nil
		}
	}
	return nil
}

// entries is a map of encoded values that may expire.
type entries map[string]entry

type entry struct {
	data    []byte
	expires time.Time // zero: never
}

func (m entries) get(key string, now time.Time) ([]byte, bool) {
	e, ok := m[key]
	if ok && !e.expires.IsZero() && !now.Before(e.expires) {
		delete(m, key)
		return nil, false
	}
	return e.data, ok
}

// put stores data under key; ttl > 0 makes it expire that long from now.
func (m entries) put(key string, data []byte, ttl time.Duration, now time.Time) {
	e := entry{data: data}
	if ttl > 0 {
		e.expires = now.Add(ttl)
	}
	m[key] = e
}

// putEntry is put on one of the store's entries, under its lock.
func (s *Store) putEntry(m entries, key string, data []byte, ttl time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	m.put(key, data, ttl, time.Now())
}

// entry is get on one of the store's entries, under its lock.
func (s *Store) entry(m entries, key string) ([]byte, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return m.get(key, time.Now())
}

func (m entries) deletePrefix(prefix string) {
	for k := range m {
		if strings.HasPrefix(k, prefix) {
			delete(m, k)
		}
	}
}
