package natskv

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"sync"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/mcpqueue/mcpqueue/taskstate"
)

func encodeTool(t *taskstate.ToolInfo) ([]byte, error) {
	if t.Name == "" {
		return nil, fmt.Errorf("natskv: tool without a name")
	}
	return json.Marshal(t)
}

func decodeTool(b []byte) (*taskstate.ToolInfo, error) {
	var t taskstate.ToolInfo
	if err := json.Unmarshal(b, &t); err != nil {
		return nil, fmt.Errorf("natskv: decode tool: %w", err)
	}
	return &t, nil
}

// PublishTool writes (or refreshes) a catalog entry.
func (s *Store) PublishTool(ctx context.Context, t *taskstate.ToolInfo) error {
	b, err := encodeTool(t)
	if err != nil {
		return err
	}
	rev, err := s.tools.Put(ctx, toolKey(t.Key()), b)
	if err != nil {
		return fmt.Errorf("natskv: publish tool %s: %w", t.Name, err)
	}
	info := *t
	s.cached(toolKey(t.Key()), &info, rev)
	return nil
}

// Tool reads one catalog entry (ErrNotFound if absent): taskstate.Catalog.
// A key the cache does not hold is read from the bucket before it is called
// absent: a worker that has just published its tools (another process) may
// be ahead of the cache's watcher, and a call of its tool must not be
// answered "Unknown tool" for that.
func (s *Store) Tool(ctx context.Context, key string) (*taskstate.ToolInfo, error) {
	c, err := s.cat(ctx)
	if err != nil {
		return nil, err
	}
	if t, known := c.lookup(key); known {
		if t == nil {
			return nil, taskstate.ErrNotFound
		}
		return t, nil
	}
	e, err := s.tools.Get(ctx, toolKey(key))
	if errors.Is(err, jetstream.ErrKeyNotFound) || errors.Is(err, jetstream.ErrInvalidKey) {
		return nil, taskstate.ErrNotFound // no key can hold it ("" for one)
	}
	if err != nil {
		return nil, fmt.Errorf("natskv: read tool %s: %w", key, err)
	}
	c.apply(e)
	return c.get(key)
}

// Tools lists the catalog, sorted by key: taskstate.Catalog.
func (s *Store) Tools(ctx context.Context) ([]*taskstate.ToolInfo, error) {
	c, err := s.cat(ctx)
	if err != nil {
		return nil, err
	}
	return c.list(), nil
}

func (s *Store) cat(ctx context.Context) (*catalogCache, error) {
	return started(s, &s.catalog, func() (*catalogCache, error) { return startCatalog(ctx, s.tools, s.closed) })
}

// cached records a write of this Store in its catalog cache, if it has one
// (read your own writes: the cache's watcher may not have seen it yet).
func (s *Store) cached(key string, t *taskstate.ToolInfo, rev uint64) {
	s.mu.Lock()
	c := s.catalog
	s.mu.Unlock()
	if c != nil {
		c.set(key, t, rev)
	}
}

// catalogCache mirrors the tool bucket in memory through a watcher, so
// tools/list and argument validation cost no round trip. PublishTool also
// writes through it, so entries carry the bucket revision and an older
// version (or deletion) never replaces a newer one.
type catalogCache struct {
	mu    sync.RWMutex
	tools map[string]catalogEntry // by toolKey
}

type catalogEntry struct {
	tool *taskstate.ToolInfo // nil: deleted or expired
	rev  uint64
}

func startCatalog(ctx context.Context, kv jetstream.KeyValue, closed <-chan struct{}) (*catalogCache, error) {
	c := &catalogCache{tools: map[string]catalogEntry{}}
	ready := make(chan struct{})
	initial := true
	stop, err := watchKV(kv, closed, func(e jetstream.KeyValueEntry) {
		if e != nil {
			c.apply(e)
		} else if initial {
			initial = false
			close(ready)
		}
	})
	if err != nil {
		return nil, fmt.Errorf("natskv: watch catalog: %w", err)
	}
	select {
	case <-ready:
		return c, nil
	case <-ctx.Done():
		stop()
		return nil, ctx.Err()
	}
}

func (c *catalogCache) apply(e jetstream.KeyValueEntry) {
	var t *taskstate.ToolInfo
	if e.Operation() == jetstream.KeyValuePut {
		var err error
		if t, err = decodeTool(e.Value()); err != nil {
			return
		}
	}
	c.set(e.Key(), t, e.Revision())
}

// set records version rev of key (t nil: gone) unless it already holds a
// newer one.
func (c *catalogCache) set(key string, t *taskstate.ToolInfo, rev uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if cur, ok := c.tools[key]; ok && cur.rev >= rev {
		return
	}
	c.tools[key] = catalogEntry{tool: t, rev: rev}
}

func (c *catalogCache) get(name string) (*taskstate.ToolInfo, error) {
	t, _ := c.lookup(name)
	if t == nil {
		return nil, taskstate.ErrNotFound
	}
	return t, nil
}

// lookup returns a copy of the tool called name (nil if absent) and whether
// the cache has seen its key at all, in one look: a deletion or expiry
// counts as seen, so a removed tool is not read again on every call. One
// look, not two, because the watcher may add the key between them, and
// "absent" from the first with "seen" from the second is a wrong answer.
func (c *catalogCache) lookup(name string) (t *taskstate.ToolInfo, known bool) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	e, known := c.tools[toolKey(name)]
	if e.tool != nil {
		cp := *e.tool
		t = &cp
	}
	return t, known
}

func (c *catalogCache) list() []*taskstate.ToolInfo {
	c.mu.RLock()
	out := make([]*taskstate.ToolInfo, 0, len(c.tools))
	for _, e := range c.tools {
		if e.tool != nil {
			t := *e.tool
			out = append(out, &t)
		}
	}
	c.mu.RUnlock()
	sort.Slice(out, func(i, j int) bool { return out[i].Key() < out[j].Key() })
	return out
}

// toolKey maps a tool name onto the KV key alphabet. Tool names may hold
// characters keys may not (MCP allows A-Z a-z 0-9 _ - .), so anything outside
// [A-Za-z0-9_-] is escaped as =XX.
func toolKey(name string) string {
	b := make([]byte, 0, len(name))
	for i := 0; i < len(name); i++ {
		ch := name[i]
		if ch >= 'A' && ch <= 'Z' || ch >= 'a' && ch <= 'z' || ch >= '0' && ch <= '9' || ch == '_' || ch == '-' {
			b = append(b, ch)
			continue
		}
		b = append(b, '=')
		b = strconv.AppendUint(b, uint64(ch)/16, 16)
		b = strconv.AppendUint(b, uint64(ch)%16, 16)
	}
	return string(b)
}

// RemoveTool deletes a catalog entry.
func (s *Store) RemoveTool(ctx context.Context, key string) error {
	e, err := s.tools.Get(ctx, toolKey(key))
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return fmt.Errorf("natskv: remove tool %s: %w", key, taskstate.ErrNotFound)
	}
	if err != nil {
		return fmt.Errorf("natskv: remove tool %s: %w", key, err)
	}
	if err := s.tools.Delete(ctx, toolKey(key), jetstream.LastRevision(e.Revision())); err != nil {
		return fmt.Errorf("natskv: remove tool %s: %w", key, err)
	}
	s.cached(toolKey(key), nil, e.Revision()+1) // the delete is newer than what was read
	return nil
}
