package redisstate

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/mcpqueue/mcpqueue/internal/redissub"
	"github.com/mcpqueue/mcpqueue/taskstate"
)

// Config names the keys. A nil Config is valid.
type Config struct {
	// Prefix starts every key and channel name, so systems (and tests) can
	// share a Redis. Default "mcpq:".
	Prefix string
	// ToolRetention is how long a catalog entry is kept after its last
	// refresh: a tool whose workers are all gone (a pool scaled to zero)
	// stays listed and callable this long. Default 7 days (DefaultToolRetention).
	ToolRetention time.Duration
	// SessionTTL is a session's lifetime, counted from PutSession. Default 24h.
	SessionTTL time.Duration
}

func (c *Config) withDefaults() Config {
	var out Config
	if c != nil {
		out = *c
	}
	if out.Prefix == "" {
		out.Prefix = "mcpq:"
	}
	if out.ToolRetention <= 0 {
		out.ToolRetention = taskstate.DefaultToolRetention
	}
	if out.SessionTTL <= 0 {
		out.SessionTTL = 24 * time.Hour
	}
	return out
}

// Store is the Redis implementation of taskstate.Store, taskstate.Catalog and
// taskstate.Sessions.
type Store struct {
	rdb redis.UniversalClient
	cfg Config
	sub *redissub.Mux

	create, update, list *redis.Script
	publishTool, tools   *redis.Script
	removeTool           *redis.Script
	toolKeys             []string // data hash, expiry zset, version counter
	closed               chan struct{}
	closeOnce            sync.Once
	catalog              catalogCache
	recon                reconciler
}

var (
	_ taskstate.Store         = (*Store)(nil)
	_ taskstate.Catalog       = (*Store)(nil)
	_ taskstate.Sessions      = (*Store)(nil)
	_ taskstate.ActiveCounter = (*Store)(nil)
	_ taskstate.Leaser        = (*Store)(nil)
	_ taskstate.Outbox        = (*Store)(nil) // completion webhooks: outbox.go
)

// New returns a store on rdb. It does not talk to Redis until used; the
// caller keeps ownership of rdb (Close does not close it).
func New(rdb redis.UniversalClient, cfg *Config) *Store {
	c := cfg.withDefaults()
	// The catalog's keys share a hash tag, so its scripts run on a cluster.
	tk := c.Prefix + "{tools}:"
	return &Store{
		rdb:         rdb,
		cfg:         c,
		sub:         redissub.New(rdb),
		create:      redis.NewScript(createScript),
		update:      redis.NewScript(updateScript),
		list:        redis.NewScript(listScript),
		publishTool: redis.NewScript(publishToolScript),
		tools:       redis.NewScript(toolsScript),
		removeTool:  redis.NewScript(removeToolScript),
		toolKeys:    []string{tk + "data", tk + "exp", tk + "ver"},
		closed:      make(chan struct{}),
		catalog:     catalogCache{ver: -1},
	}
}

// Close ends the store's watches and its pub/sub connection.
func (s *Store) Close() error {
	var err error
	s.closeOnce.Do(func() {
		close(s.closed)
		if e := s.sub.Close(); e != nil {
			err = fmt.Errorf("redisstate: close: %w", e)
		}
		s.stopCatalog() // after the Mux, whose handlers may mark it live
	})
	return err
}

func (s *Store) taskKey(id string) string   { return s.cfg.Prefix + "task:" + id }
func (s *Store) watchChan(id string) string { return s.cfg.Prefix + "watch:" + id }
func (s *Store) activeKey() string          { return s.cfg.Prefix + "active" }

// recordKeys are the keys the create and update scripts write: the record,
// the active index and, for an owned task, its owner's index, retention
// and active sets.
func (s *Store) recordKeys(t *taskstate.Task) []string {
	return append([]string{s.taskKey(t.ID), s.activeKey()}, s.ownerKeys(t.Owner)...)
}

// ttlArg is the retention a write applies: the record's TTL once it is
// terminal, none (0, PERSIST) while it is active or when the TTL is unlimited.
func ttlArg(t *taskstate.Task) int64 {
	if t.Status.Terminal() && t.TTLMs > 0 {
		return t.TTLMs
	}
	return 0
}

// createScript: KEYS[1] record, KEYS[2] the active index, and for an owned
// task KEYS[3], KEYS[4] and KEYS[5] its owner's index, retention and active
// sets; ARGV[1]
// JSON, ARGV[2] TTL ms (0: none), ARGV[3] task id, ARGV[4] creation time
// (unix ns), ARGV[5] change channel, ARGV[6] "1" if the record is active.
// Returns 0 if the key exists, else the new revision (1).
const createScript = indexLua + activeLua + `
if redis.call('EXISTS', KEYS[1]) == 1 then return 0 end
redis.call('HSET', KEYS[1], 'v', ARGV[1], 'r', 1)
local ttl = tonumber(ARGV[2])
if ttl > 0 then redis.call('PEXPIRE', KEYS[1], ttl) end
markActive(KEYS[2], ARGV[3], ARGV[6])
if #KEYS == 5 then
  markActive(KEYS[5], ARGV[3], ARGV[6])
  local now = nowMs()
  prune(KEYS[3], KEYS[4], now, 100)
  redis.call('ZADD', KEYS[3], ARGV[4], ARGV[3])
  if ttl > 0 then
    redis.call('ZADD', KEYS[4], now + ttl, ARGV[3])
  else
    redis.call('ZREM', KEYS[4], ARGV[3])
  end
  settle(KEYS[3], KEYS[4])
end
redis.call('PUBLISH', ARGV[5], '1 ' .. ARGV[1])
return 1`

// updateScript: KEYS[1] record, KEYS[2] the active index, and for an owned
// task KEYS[3], KEYS[4] and KEYS[5] its owner's index, retention and active
// sets; ARGV[1]
// expected revision, ARGV[2] JSON, ARGV[3] TTL ms (0: none), ARGV[4] change
// channel, ARGV[5] task id, ARGV[6] "1" if the new version is active.
// Returns -1 if there is no record, -2 on a revision mismatch, else the new
// revision.
const updateScript = indexLua + activeLua + `
local cur = redis.call('HGET', KEYS[1], 'r')
if not cur then return -1 end
if cur ~= ARGV[1] then return -2 end
local rev = redis.call('HINCRBY', KEYS[1], 'r', 1)
redis.call('HSET', KEYS[1], 'v', ARGV[2])
local ttl = tonumber(ARGV[3])
if ttl > 0 then
  redis.call('PEXPIRE', KEYS[1], ttl)
else
  redis.call('PERSIST', KEYS[1])
end
markActive(KEYS[2], ARGV[5], ARGV[6])
if #KEYS == 5 then
  markActive(KEYS[5], ARGV[5], ARGV[6])
  if ttl > 0 then
    if redis.call('ZSCORE', KEYS[3], ARGV[5]) then
      redis.call('ZADD', KEYS[4], nowMs() + ttl, ARGV[5])
      settle(KEYS[3], KEYS[4])
    end
  elseif redis.call('ZREM', KEYS[4], ARGV[5]) == 1 then
    settle(KEYS[3], KEYS[4])
  end
end
redis.call('PUBLISH', ARGV[4], rev .. ' ' .. ARGV[2])
return rev`

// Create stores a new record (ErrExists if the id is taken): taskstate.Store.
func (s *Store) Create(ctx context.Context, t *taskstate.Task) error {
	if !taskstate.ValidID(t.ID) {
		return fmt.Errorf("redisstate: create: invalid task id %q", t.ID)
	}
	b, err := taskstate.Encode(t)
	if err != nil {
		return err
	}
	n, err := s.create.Run(ctx, s.rdb, s.recordKeys(t),
		b, ttlArg(t), t.ID, t.CreatedAt.UnixNano(), s.watchChan(t.ID), activeArg(t)).Int64()
	if err != nil {
		return fmt.Errorf("redisstate: create %s: %w", t.ID, err)
	}
	if n == 0 {
		return taskstate.ErrExists
	}
	t.Revision = uint64(n)
	return nil
}

// Get reads the record (ErrNotFound if absent): taskstate.Store.
func (s *Store) Get(ctx context.Context, id string) (*taskstate.Task, error) {
	if !taskstate.ValidID(id) {
		return nil, taskstate.ErrNotFound
	}
	vals, err := s.rdb.HMGet(ctx, s.taskKey(id), "v", "r").Result()
	if err != nil {
		return nil, fmt.Errorf("redisstate: get %s: %w", id, err)
	}
	v, _ := vals[0].(string)
	r, _ := vals[1].(string)
	if vals[0] == nil && vals[1] == nil {
		return nil, taskstate.ErrNotFound
	}
	rev, err := strconv.ParseUint(r, 10, 64)
	if err != nil || v == "" {
		return nil, fmt.Errorf("redisstate: get %s: malformed record (revision %q)", id, r)
	}
	return taskstate.Decode([]byte(v), rev)
}

// Update writes the record if its Revision is still the stored one (ErrConflict otherwise): taskstate.Store.
func (s *Store) Update(ctx context.Context, t *taskstate.Task) error {
	if !taskstate.ValidID(t.ID) {
		return taskstate.ErrNotFound
	}
	b, err := taskstate.Encode(t)
	if err != nil {
		return err
	}
	n, err := s.update.Run(ctx, s.rdb, s.recordKeys(t),
		strconv.FormatUint(t.Revision, 10), b, ttlArg(t), s.watchChan(t.ID), t.ID, activeArg(t)).Int64()
	if err != nil {
		return fmt.Errorf("redisstate: update %s: %w", t.ID, err)
	}
	switch {
	case n == -1:
		return taskstate.ErrNotFound
	case n < 0:
		return taskstate.ErrConflict
	}
	t.Revision = uint64(n)
	return nil
}

// Watch implements taskstate.Store. It subscribes to the record's change
// channel before reading the record, so every version after the one it
// delivers first reaches it; a watcher that falls behind skips to the newest.
func (s *Store) Watch(ctx context.Context, id string) (<-chan *taskstate.Task, error) {
	return taskstate.WatchRecord(ctx, s, id, true, s.closed, s.subscribe, s.readChange)
}

// Follow implements taskstate.Store: the change channel without a read.
func (s *Store) Follow(ctx context.Context, id string) (<-chan *taskstate.Task, error) {
	return taskstate.WatchRecord(ctx, s, id, false, s.closed, s.subscribe, s.readChange)
}

// subscribe subscribes to id's change channel until stop. The inbox holds
// the newest unread notification: "<rev> <JSON>", or "" when the
// subscription was renewed after a reconnection and the record must be read
// again.
func (s *Store) subscribe(ctx context.Context, id string) (in <-chan string, stop func(), err error) {
	inbox := make(chan string, 1)
	push := func(p string) {
		select {
		case inbox <- p:
		default:
			select { // replace the stale one
			case <-inbox:
			default:
			}
			inbox <- p
		}
	}
	sub, err := s.sub.Subscribe(ctx, s.watchChan(id), redissub.Handler{
		Message:      func(_, payload string) { push(payload) },
		Resubscribed: func() { push("") },
	})
	if err != nil {
		return nil, nil, fmt.Errorf("redisstate: watch %s: %w", id, err)
	}
	return inbox, func() { _ = sub.Close() }, nil
}

// readChange reads the version a notification announces; false when the
// record is gone. A record not there yet (followed before its creation) or
// an unreadable notification is skipped.
func (s *Store) readChange(ctx context.Context, id, p string, last uint64) (*taskstate.Task, bool) {
	t, err := s.decodeChange(ctx, id, p)
	if errors.Is(err, taskstate.ErrNotFound) {
		return nil, last == 0
	}
	if err != nil {
		return nil, true
	}
	return t, true
}

// decodeChange turns a change notification into a record; "" re-reads it.
func (s *Store) decodeChange(ctx context.Context, id, p string) (*taskstate.Task, error) {
	if p == "" {
		return s.Get(ctx, id)
	}
	revStr, body, ok := strings.Cut(p, " ")
	if !ok {
		return nil, fmt.Errorf("redisstate: malformed change notification for %s", id)
	}
	rev, err := strconv.ParseUint(revStr, 10, 64)
	if err != nil {
		return nil, fmt.Errorf("redisstate: malformed change notification for %s", id)
	}
	return taskstate.Decode([]byte(body), rev)
}
