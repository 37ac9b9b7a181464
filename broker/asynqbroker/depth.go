package asynqbroker

import (
	"context"
	"fmt"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/mcpqueue/mcpqueue/broker"
)

var _ broker.Depth = (*Queue)(nil)

// depthScanLimit bounds how many jobs of each state (pending, scheduled,
// retry, active) of one pool queue a Depth call reads the route of.
const depthScanLimit = 10000

// poolDepthScript counts a pool queue's jobs by route: KEYS its pending,
// active, scheduled and retry keys; ARGV[1] the prefix of its task keys,
// ARGV[2] the most jobs to read per state. A job's route is its Asynq type,
// the first field of the task's message (protobuf field 1, a string: the
// byte 0x0A, a varint length, the bytes). Returns {route, pending,
// in flight, …}.
const poolDepthScript = `
local by = {}
local function count(ids, slot)
  for _, id in ipairs(ids) do
    local msg = redis.call('HGET', ARGV[1] .. id, 'msg')
    if msg and string.byte(msg, 1) == 10 then
      local len, mul, i = 0, 1, 2
      while true do
        local b = string.byte(msg, i)
        i = i + 1
        if not b then break end
        len = len + (b % 128) * mul
        if b < 128 then break end
        mul = mul * 128
      end
      local route = string.sub(msg, i, i + len - 1)
      local c = by[route]
      if not c then c = {0, 0}; by[route] = c end
      c[slot] = c[slot] + 1
    end
  end
end
local n = tonumber(ARGV[2]) - 1
count(redis.call('LRANGE', KEYS[1], 0, n), 1)
count(redis.call('ZRANGE', KEYS[3], 0, n), 1)
count(redis.call('ZRANGE', KEYS[4], 0, n), 1)
count(redis.call('LRANGE', KEYS[2], 0, n), 2)
local out = {}
for route, c in pairs(by) do
  out[#out + 1] = route
  out[#out + 1] = c[1]
  out[#out + 1] = c[2]
end
return out`

var poolDepth = redis.NewScript(poolDepthScript)

// Depth reads each route's jobs: in its own queue (the inspector's figures)
// and in every pool queue of the prefix (counted by route, reading at most
// depthScanLimit jobs of each state of a queue). Pending counts pending,
// scheduled and retry-waiting jobs, InFlight active ones (a job waiting in a
// consumer's handler for a Next counts as in flight). A route with no job in
// any queue whose own queue never held one is left out. Asynq's Inspector
// takes no context: ctx is checked between queues only.
func (q *Queue) Depth(ctx context.Context, tools []string) (map[string]broker.ToolDepth, error) {
	known, err := q.inspector.Queues()
	if err != nil {
		return nil, fmt.Errorf("asynqbroker: depth: %w", err)
	}
	want := make(map[string]bool, len(tools))
	for _, tool := range tools {
		want[q.QueueName(tool)] = true
	}
	out := make(map[string]broker.ToolDepth, len(tools))
	pools := q.cfg.Prefix + ".pool." // every pool queue's name starts so
	for _, name := range known {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		switch {
		case strings.HasPrefix(name, pools):
			if err := q.poolDepth(ctx, name, want, out); err != nil {
				return nil, err
			}
		case want[name]:
			info, err := q.inspector.GetQueueInfo(name)
			if err != nil {
				return nil, fmt.Errorf("asynqbroker: depth of %s: %w", name, err)
			}
			tool := strings.TrimPrefix(name, q.QueueName(""))
			add(out, tool, int64(info.Pending+info.Scheduled+info.Retry), int64(info.Active))
		}
	}
	return out, nil
}

// poolDepth adds the jobs of the routes of want (own queue names) that
// pool queue holds to out.
func (q *Queue) poolDepth(ctx context.Context, queue string, want map[string]bool, out map[string]broker.ToolDepth) error {
	keys := []string{queueKey(queue, "pending"), queueKey(queue, "active"), queueKey(queue, "scheduled"), queueKey(queue, "retry")}
	res, err := poolDepth.Run(ctx, q.rdb, keys, queueKey(queue, "t:"), depthScanLimit).Slice()
	if err != nil {
		return fmt.Errorf("asynqbroker: depth of %s: %w", queue, err)
	}
	for i := 0; i+2 < len(res); i += 3 {
		route, _ := res[i].(string)
		pending, _ := res[i+1].(int64)
		inflight, _ := res[i+2].(int64)
		if want[q.QueueName(route)] {
			add(out, route, pending, inflight)
		}
	}
	return nil
}

func add(out map[string]broker.ToolDepth, route string, pending, inflight int64) {
	d := out[route]
	d.Pending += pending
	d.InFlight += inflight
	out[route] = d
}
