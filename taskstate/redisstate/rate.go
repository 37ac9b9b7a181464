package redisstate

import (
	"context"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/mcpqueue/mcpqueue/taskstate"
)

var _ taskstate.RateLimiter = (*Store)(nil)

// rateScript: KEYS[1] the limit's key, <prefix>rate:<key>; ARGV[1] the
// interval between slots in microseconds. The key holds when its next slot
// is free, in microseconds of Redis's own clock (TIME), so every client
// sees one clock whatever its own says. It takes the slot if that time has
// come (the key then holds now + interval and expires with it) and returns
// 0, else it returns the microseconds left (taskstate.NextSlot).
var rateScript = redis.NewScript(`
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local nxt = tonumber(redis.call('GET', KEYS[1]) or '0')
if now < nxt then return nxt - now end
local iv = tonumber(ARGV[1])
redis.call('SET', KEYS[1], string.format('%d', now + iv), 'PX', math.floor(iv / 1000) + 1)
return 0`)

// TakeRate implements taskstate.RateLimiter with one script call: the
// check and the take are one step on the server, so clients racing for a
// slot cannot both take it.
func (s *Store) TakeRate(ctx context.Context, key string, r taskstate.Rate) (time.Duration, error) {
	if err := taskstate.CheckRateTake("redisstate", key, r); err != nil {
		return 0, err
	}
	iv := max(r.Interval().Microseconds(), 1)
	left, err := rateScript.Run(ctx, s.rdb, []string{s.cfg.Prefix + "rate:" + key}, iv).Int64()
	if err != nil {
		return 0, fmt.Errorf("redisstate: rate limit %s: %w", key, err)
	}
	return time.Duration(left) * time.Microsecond, nil
}
