package redisstate

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"sync"

	"github.com/mcpqueue/mcpqueue/taskstate"
)

// publishToolScript: KEYS data hash, expiry zset, version; ARGV[1] name,
// ARGV[2] JSON, ARGV[3] TTL ms. A heartbeat that republishes an unchanged
// tool only moves its expiry and leaves the version alone, so readers keep
// their cache.
const publishToolScript = `
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
if redis.call('HGET', KEYS[1], ARGV[1]) ~= ARGV[2] then
  redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
  redis.call('INCR', KEYS[3])
end
redis.call('ZADD', KEYS[2], now + tonumber(ARGV[3]), ARGV[1])
return 1`

// toolsScript: KEYS data hash, expiry zset, version; ARGV[1] the version the
// caller has cached ("-1": none). It drops expired tools (bumping the
// version), then returns {version} if the caller's copy is current, else
// {version, HGETALL}.
const toolsScript = `
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local gone = redis.call('ZRANGEBYSCORE', KEYS[2], '-inf', now)
if #gone > 0 then
  for _, name in ipairs(gone) do
    redis.call('HDEL', KEYS[1], name)
  end
  redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', now)
  redis.call('INCR', KEYS[3])
end
local ver = redis.call('GET', KEYS[3]) or '0'
if ver == ARGV[1] then return {ver} end
return {ver, redis.call('HGETALL', KEYS[1])}`

// catalogCache is the last catalog version a Store read.
type catalogCache struct {
	mu     sync.Mutex
	ver    int64 // -1: nothing cached
	byName map[string]*taskstate.ToolInfo
	sorted []*taskstate.ToolInfo
}

// PublishTool writes (or refreshes) a catalog entry.
func (s *Store) PublishTool(ctx context.Context, t *taskstate.ToolInfo) error {
	if t.Name == "" {
		return fmt.Errorf("redisstate: publish tool: tool without a name")
	}
	b, err := json.Marshal(t)
	if err != nil {
		return fmt.Errorf("redisstate: publish tool %s: %w", t.Name, err)
	}
	if err := s.publishTool.Run(ctx, s.rdb, s.toolKeys, t.Key(), b, s.cfg.ToolTTL.Milliseconds()).Err(); err != nil {
		return fmt.Errorf("redisstate: publish tool %s: %w", t.Name, err)
	}
	return nil
}

func (s *Store) Tool(ctx context.Context, name string) (*taskstate.ToolInfo, error) {
	byName, _, err := s.readCatalog(ctx)
	if err != nil {
		return nil, err
	}
	t, ok := byName[name]
	if !ok {
		return nil, taskstate.ErrNotFound
	}
	c := *t
	return &c, nil
}

func (s *Store) Tools(ctx context.Context) ([]*taskstate.ToolInfo, error) {
	_, sorted, err := s.readCatalog(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]*taskstate.ToolInfo, len(sorted))
	for i, t := range sorted {
		c := *t
		out[i] = &c
	}
	return out, nil
}

// readCatalog returns the current catalog: from the cache when the version
// in Redis still matches it, else freshly fetched. The maps and slices it
// returns are shared and must not be modified.
func (s *Store) readCatalog(ctx context.Context) (map[string]*taskstate.ToolInfo, []*taskstate.ToolInfo, error) {
	c := &s.catalog
	c.mu.Lock()
	have := c.ver
	c.mu.Unlock()

	res, err := s.tools.Run(ctx, s.rdb, s.toolKeys, strconv.FormatInt(have, 10)).Slice()
	if err != nil {
		return nil, nil, fmt.Errorf("redisstate: read catalog: %w", err)
	}
	if len(res) == 0 {
		return nil, nil, fmt.Errorf("redisstate: read catalog: empty reply")
	}
	ver, err := strconv.ParseInt(fmt.Sprint(res[0]), 10, 64)
	if err != nil {
		return nil, nil, fmt.Errorf("redisstate: read catalog: bad version %v", res[0])
	}
	if len(res) == 1 {
		// Unchanged since have. The cache may meanwhile hold a newer
		// version read by another call, which is as good.
		c.mu.Lock()
		defer c.mu.Unlock()
		return c.byName, c.sorted, nil
	}
	flat, _ := res[1].([]any)
	byName := make(map[string]*taskstate.ToolInfo, len(flat)/2)
	sorted := make([]*taskstate.ToolInfo, 0, len(flat)/2)
	for i := 0; i+1 < len(flat); i += 2 {
		name, _ := flat[i].(string)
		raw, _ := flat[i+1].(string)
		var t taskstate.ToolInfo
		if err := json.Unmarshal([]byte(raw), &t); err != nil || t.Key() != name {
			continue // not a tool this package wrote
		}
		byName[name] = &t
		sorted = append(sorted, &t)
	}
	sort.Slice(sorted, func(i, j int) bool { return sorted[i].Key() < sorted[j].Key() })
	c.mu.Lock()
	c.ver, c.byName, c.sorted = ver, byName, sorted
	c.mu.Unlock()
	return byName, sorted, nil
}
