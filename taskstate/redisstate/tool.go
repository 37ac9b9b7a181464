package redisstate

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"sync"
	"time"

	"github.com/mcpqueue/mcpqueue/internal/redissub"
	"github.com/mcpqueue/mcpqueue/taskstate"
)

// publishToolScript: KEYS data hash, expiry zset, version; ARGV[1] name,
// ARGV[2] JSON, ARGV[3] TTL ms, ARGV[4] catalog channel. A heartbeat that
// republishes an unchanged tool only moves its expiry and leaves the version
// alone, so readers keep their cache; a new or changed tool bumps the version
// and says so on the channel. Returns 1 if the catalog changed, else 0.
const publishToolScript = `
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local changed = 0
if redis.call('HGET', KEYS[1], ARGV[1]) ~= ARGV[2] then
  redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
  redis.call('PUBLISH', ARGV[4], redis.call('INCR', KEYS[3]))
  changed = 1
end
redis.call('ZADD', KEYS[2], now + tonumber(ARGV[3]), ARGV[1])
return changed`

// toolsScript: KEYS data hash, expiry zset, version; ARGV[1] the version the
// caller has cached ("-1": none), ARGV[2] catalog channel. It drops expired
// tools (bumping the version and saying so on the channel), then returns
// {version, server time ms, earliest expiry ms or ""}, followed by HGETALL
// when the caller's copy is not current. The earliest expiry comes even when
// the version is unchanged: heartbeats move expiries without bumping it.
const toolsScript = `
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local gone = redis.call('ZRANGEBYSCORE', KEYS[2], '-inf', now)
if #gone > 0 then
  for _, name in ipairs(gone) do
    redis.call('HDEL', KEYS[1], name)
  end
  redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', now)
  redis.call('PUBLISH', ARGV[2], redis.call('INCR', KEYS[3]))
end
local ver = redis.call('GET', KEYS[3]) or '0'
local first = redis.call('ZRANGE', KEYS[2], 0, 0, 'WITHSCORES')
local reply = {ver, now, first[2] or ''}
if ver ~= ARGV[1] then reply[4] = redis.call('HGETALL', KEYS[1]) end
return reply`

// removeToolScript: KEYS data hash, expiry zset, version; ARGV[1] name,
// ARGV[2] catalog channel. Returns 1 if the tool was there.
const removeToolScript = `
if redis.call('HDEL', KEYS[1], ARGV[1]) == 0 then return 0 end
redis.call('ZREM', KEYS[2], ARGV[1])
redis.call('PUBLISH', ARGV[2], redis.call('INCR', KEYS[3]))
return 1`

// subscribeRetry is how long catalog reads go to Redis after the
// subscription to catalog changes failed, before one tries again.
const subscribeRetry = time.Second

// catalogCache is the catalog as a Store last read it, and whether it may
// answer without asking Redis again.
//
// It may while it is fresh: the subscription to the catalog channel is live,
// no change was announced there (nor the connection interrupted) since the
// read that filled it began, and no cached tool has reached its expiry. Every
// change to the catalog (a new or changed tool, tools dropped on expiry) is
// announced after it is made, so a fresh cache misses at most a change whose
// message is in flight. Expiry announces nothing until a read drops the tool,
// hence the deadline.
type catalogCache struct {
	mu     sync.Mutex
	ver    int64 // -1: nothing cached
	byName map[string]*taskstate.ToolInfo
	sorted []*taskstate.ToolInfo
	// expires is when the first cached tool expires unless refreshed, on
	// the local clock; zero when none is cached.
	expires time.Time
	fresh   bool
	// gen counts invalidations, so a read that began before one does not
	// make the cache fresh when it completes.
	gen uint64

	sub         *redissub.Sub // nil until subscribed
	subscribing bool
	retryAt     time.Time // no subscribe attempt before then
	live        bool      // sub is receiving messages
	breaks      uint64    // interruptions of the subscription's connection
}

// invalidate marks the cache stale; the next read asks Redis.
func (c *catalogCache) invalidate() {
	c.mu.Lock()
	c.staleLocked()
	c.mu.Unlock()
}

// staleLocked marks the cache stale and ends the freshness of any read in
// flight. c.mu is held.
func (c *catalogCache) staleLocked() {
	c.gen++
	c.fresh = false
}

// setLive records whether the subscription is receiving messages. Either
// way the cache is stale: messages may have been lost.
func (c *catalogCache) setLive(live bool) {
	c.mu.Lock()
	c.live = live
	if !live {
		c.breaks++
	}
	c.staleLocked()
	c.mu.Unlock()
}

func (s *Store) catalogChan() string { return s.cfg.Prefix + "catalog" }

// PublishTool writes (or refreshes) a catalog entry.
func (s *Store) PublishTool(ctx context.Context, t *taskstate.ToolInfo) error {
	if t.Name == "" {
		return fmt.Errorf("redisstate: publish tool: tool without a name")
	}
	b, err := json.Marshal(t)
	if err != nil {
		return fmt.Errorf("redisstate: publish tool %s: %w", t.Name, err)
	}
	changed, err := s.publishTool.Run(ctx, s.rdb, s.toolKeys, t.Key(), b, s.cfg.ToolRetention.Milliseconds(), s.catalogChan()).Int64()
	if err != nil {
		return fmt.Errorf("redisstate: publish tool %s: %w", t.Name, err)
	}
	if changed == 1 {
		// This store's own reads see the change at once, without
		// waiting for its message.
		s.catalog.invalidate()
	}
	return nil
}

// RemoveTool deletes a catalog entry.
func (s *Store) RemoveTool(ctx context.Context, key string) error {
	n, err := s.removeTool.Run(ctx, s.rdb, s.toolKeys, key, s.catalogChan()).Int64()
	if err != nil {
		return fmt.Errorf("redisstate: remove tool %s: %w", key, err)
	}
	s.catalog.invalidate()
	if n == 0 {
		return fmt.Errorf("redisstate: remove tool %s: %w", key, taskstate.ErrNotFound)
	}
	return nil
}

// Tool reads one catalog entry (ErrNotFound if absent): taskstate.Catalog.
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

// Tools lists the catalog, sorted by key: taskstate.Catalog.
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

// readCatalog returns the current catalog: from memory while the cache is
// fresh, else read from Redis (which purges expired tools, and sends the
// hash only when the version differs from the cached one). The maps and
// slices it returns are shared and must not be modified.
func (s *Store) readCatalog(ctx context.Context) (map[string]*taskstate.ToolInfo, []*taskstate.ToolInfo, error) {
	c := &s.catalog
	c.mu.Lock()
	if c.fresh && (c.expires.IsZero() || time.Now().Before(c.expires)) {
		defer c.mu.Unlock()
		return c.byName, c.sorted, nil
	}
	if c.sub == nil && !c.subscribing && !time.Now().Before(c.retryAt) {
		c.subscribing = true
		breaks := c.breaks
		c.mu.Unlock()
		s.subscribeCatalog(ctx, breaks)
		c.mu.Lock()
	}
	gen, have := c.gen, c.ver
	c.mu.Unlock()

	// The local time before the script runs, so the deadlines derived
	// from the server's clock are never later than the real ones.
	sent := time.Now()
	res, err := s.tools.Run(ctx, s.rdb, s.toolKeys, strconv.FormatInt(have, 10), s.catalogChan()).Slice()
	if err != nil {
		return nil, nil, fmt.Errorf("redisstate: read catalog: %w", err)
	}
	r, err := parseCatalogReply(res)
	if err != nil {
		return nil, nil, err
	}
	expires := time.Time{}
	if r.earliest >= 0 {
		expires = sent.Add(time.Duration(r.earliest-r.now) * time.Millisecond)
	}

	c.mu.Lock()
	defer c.mu.Unlock()
	if r.hash == nil {
		// Unchanged since have. The cache may meanwhile hold another
		// version read by another call, which is as good; only a cache of
		// the version this read saw takes its deadline and freshness.
		if c.ver == r.ver {
			c.expires = expires
			c.fresh = c.live && c.gen == gen
		}
		return c.byName, c.sorted, nil
	}
	byName, sorted := decodeTools(r.hash)
	c.ver, c.byName, c.sorted, c.expires = r.ver, byName, sorted, expires
	c.fresh = c.live && c.gen == gen
	return byName, sorted, nil
}

// subscribeCatalog subscribes the cache to the catalog channel, for the
// caller that set c.subscribing when the connection had seen breaks
// interruptions. A failure leaves reads going to Redis, and the subscription
// is tried again after subscribeRetry.
func (s *Store) subscribeCatalog(ctx context.Context, breaks uint64) {
	c := &s.catalog
	sub, err := s.sub.Subscribe(ctx, s.catalogChan(), redissub.Handler{
		Message:      func(string, string) { c.invalidate() },
		Interrupted:  func() { c.setLive(false) },
		Resubscribed: func() { c.setLive(true) },
	})

	c.mu.Lock()
	defer c.mu.Unlock()
	c.subscribing = false
	if err != nil {
		c.retryAt = time.Now().Add(subscribeRetry)
		return
	}
	c.sub = sub // closed with the Mux
	select {
	case <-s.closed:
		return // Close made the cache stale for good
	default:
	}
	// An interruption since the subscription began leaves it to
	// Resubscribed to say when it is live again.
	if c.breaks == breaks {
		c.live = true
		c.staleLocked()
	}
}

// stopCatalog makes the cache stale for good: once the store is closed no
// message reaches it. Reads after Close go to Redis, as long as the caller
// keeps the client open.
func (s *Store) stopCatalog() {
	c := &s.catalog
	c.mu.Lock()
	c.live = false
	c.staleLocked()
	c.mu.Unlock()
}

// catalogReply is toolsScript's answer.
type catalogReply struct {
	ver, now int64
	earliest int64 // -1: no tools
	hash     []any // nil when the caller's version is current
}

func parseCatalogReply(res []any) (catalogReply, error) {
	if len(res) < 3 {
		return catalogReply{}, fmt.Errorf("redisstate: read catalog: reply of %d elements, want at least 3", len(res))
	}
	var r catalogReply
	var err error
	if r.ver, err = strconv.ParseInt(fmt.Sprint(res[0]), 10, 64); err != nil {
		return r, fmt.Errorf("redisstate: read catalog: bad version %v", res[0])
	}
	now, ok := res[1].(int64)
	if !ok {
		return r, fmt.Errorf("redisstate: read catalog: bad server time %v", res[1])
	}
	r.now, r.earliest = now, -1
	if e, _ := res[2].(string); e != "" {
		score, err := strconv.ParseFloat(e, 64)
		if err != nil {
			return r, fmt.Errorf("redisstate: read catalog: bad expiry %q", e)
		}
		r.earliest = int64(score)
	}
	if len(res) > 3 {
		r.hash, _ = res[3].([]any)
		if r.hash == nil {
			r.hash = []any{} // an empty catalog
		}
	}
	return r, nil
}

// decodeTools turns HGETALL's flat name, JSON list into the catalog.
func decodeTools(flat []any) (map[string]*taskstate.ToolInfo, []*taskstate.ToolInfo) {
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
	return byName, sorted
}
