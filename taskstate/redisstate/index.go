package redisstate

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/mcpqueue/mcpqueue/taskstate"
)

// The owner index lists an owner's tasks (taskstate.Store.List). It is two
// sorted sets under one hash tag per owner, <Prefix>owner:{<owner hash>}:
//
//   - tasks: member task id, score its creation time in unix nanoseconds.
//     Redis orders equal scores by member, so (score, id) is a total order
//     and a cursor is the (score, id) of the last task a page returned.
//   - expiring: the subset of tasks whose record has a retention TTL (it is
//     terminal), scored by when that TTL ends (Redis server time, ms).
//
// The create script adds a task to tasks in the step that stores its record,
// so a stored task is always listed. The update script puts it into expiring
// when the record turns terminal with a TTL (and takes it out again should a
// record ever lose its TTL). An entry is removed only once its record cannot
// exist any more: when its retention has ended (the create and list scripts
// prune those), or when List finds its record gone (evicted, deleted by hand).
// When every entry is expiring, both sets get the expiry of the last one, so
// an owner who never comes back leaves nothing behind; any other entry keeps
// them (PERSIST), as its record does not expire either.

// indexLua holds the helpers the scripts that maintain the index share.
const indexLua = `
local function nowMs()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

local function drop(idx, exp, ids)
  for i = 1, #ids, 500 do
    local j = math.min(i + 499, #ids)
    redis.call('ZREM', idx, unpack(ids, i, j))
    redis.call('ZREM', exp, unpack(ids, i, j))
  end
end

-- prune drops up to n entries whose retention ended before now; it returns
-- how many it dropped.
local function prune(idx, exp, now, n)
  local gone = redis.call('ZRANGEBYSCORE', exp, '-inf', '(' .. string.format('%d', now), 'LIMIT', 0, n)
  drop(idx, exp, gone)
  return #gone
end

-- settle gives both sets the expiry of the last expiring entry when every
-- entry is expiring, and none otherwise.
local function settle(idx, exp)
  local n = redis.call('ZCARD', idx)
  if n == 0 then
    redis.call('DEL', exp)
  elseif n == redis.call('ZCARD', exp) then
    local last = redis.call('ZRANGE', exp, -1, -1, 'WITHSCORES')
    local at = string.format('%d', tonumber(last[2]) + 1)
    redis.call('PEXPIREAT', idx, at)
    redis.call('PEXPIREAT', exp, at)
  else
    redis.call('PERSIST', idx)
    redis.call('PERSIST', exp)
  end
end
`

// listScript: KEYS[1] and KEYS[2] the owner's tasks and expiring sets;
// ARGV[1] record key prefix, ARGV[2] cursor score ("": from the first),
// ARGV[3] cursor task id, ARGV[4] how many tasks to return.
// Returns {id, score, JSON, revision, …} for the tasks that follow the
// cursor and still have a record; entries without one are dropped.
const listScript = indexLua + `
local idx, exp = KEYS[1], KEYS[2]
local dropped = prune(idx, exp, nowMs(), 1000)

-- Redis orders equal scores by comparing members byte by byte; Lua's string
-- comparison follows the server's locale, so compare bytes here.
local function bytesLess(a, b)
  for i = 1, math.min(#a, #b) do
    local x, y = string.byte(a, i), string.byte(b, i)
    if x ~= y then return x < y end
  end
  return #a < #b
end

local pos = 0
if ARGV[2] ~= '' then
  pos = redis.call('ZCOUNT', idx, '-inf', '(' .. ARGV[2])
  for _, m in ipairs(redis.call('ZRANGEBYSCORE', idx, ARGV[2], ARGV[2])) do
    if not bytesLess(ARGV[3], m) then pos = pos + 1 end
  end
end

local want = tonumber(ARGV[4])
local out, dead, n = {}, {}, 0
while n < want do
  local batch = redis.call('ZRANGE', idx, pos, pos + want - 1, 'WITHSCORES')
  if #batch == 0 then break end
  pos = pos + #batch / 2
  for i = 1, #batch, 2 do
    if n == want then break end
    local rec = redis.call('HMGET', ARGV[1] .. batch[i], 'v', 'r')
    if rec[1] and rec[2] then
      n = n + 1
      out[#out + 1] = batch[i]
      out[#out + 1] = batch[i + 1]
      out[#out + 1] = rec[1]
      out[#out + 1] = rec[2]
    else
      dead[#dead + 1] = batch[i]
    end
  end
end
drop(idx, exp, dead)
if dropped + #dead > 0 then settle(idx, exp) end
return out`

// List pages hold defaultListLimit tasks for a limit of 0 or less and at most
// maxListLimit, as one script reads a whole page while Redis waits.
const (
	defaultListLimit = 50
	maxListLimit     = 1000
)

func ownerHash(owner string) string {
	h := sha256.Sum256([]byte(owner))
	return hex.EncodeToString(h[:16])
}

// ownerKeys are the owner's tasks, expiring and active sets; none without
// an owner. They share a hash tag (the owner's hash).
func (s *Store) ownerKeys(owner string) []string {
	if owner == "" {
		return nil
	}
	k := s.cfg.Prefix + "owner:{" + ownerHash(owner) + "}:"
	return []string{k + "tasks", k + "expiring", k + "active"}
}

// List pages through the owner's records: taskstate.Store.
func (s *Store) List(ctx context.Context, owner, cursor string, limit int) ([]*taskstate.Task, string, error) {
	if owner == "" {
		return nil, "", nil
	}
	if limit <= 0 {
		limit = defaultListLimit
	}
	limit = min(limit, maxListLimit)
	hash := ownerHash(owner)
	var score, after string
	if cursor != "" {
		var ok bool
		if score, after, ok = decodeCursor(cursor, hash); !ok {
			return nil, "", taskstate.ErrBadCursor
		}
	}
	// One more than a page, to learn whether another page follows.
	res, err := s.list.Run(ctx, s.rdb, s.ownerKeys(owner), s.cfg.Prefix+"task:", score, after, limit+1).Slice()
	if err != nil {
		return nil, "", fmt.Errorf("redisstate: list: %w", err)
	}
	var out []*taskstate.Task
	for i := 0; i+3 < len(res); i += 4 {
		if i/4 == limit {
			return out, encodeCursor(hash, score, after), nil
		}
		id, _ := res[i].(string)
		score, _ = res[i+1].(string)
		after = id
		v, _ := res[i+2].(string)
		r, _ := res[i+3].(string)
		rev, err := strconv.ParseUint(r, 10, 64)
		if err != nil {
			return nil, "", fmt.Errorf("redisstate: list: malformed record %s (revision %q)", id, r)
		}
		t, err := taskstate.Decode([]byte(v), rev)
		if err != nil {
			return nil, "", fmt.Errorf("redisstate: list: record %s: %w", id, err)
		}
		if t.Owner != owner {
			continue // not this owner's task (a raw Update changed its owner)
		}
		out = append(out, t)
	}
	return out, "", nil
}

// A cursor is base64url("<owner hash>:<score>:<task id>"), the score as
// Redis wrote it, so it names the exact position of its task.
func encodeCursor(hash, score, id string) string {
	return base64.RawURLEncoding.EncodeToString([]byte(hash + ":" + score + ":" + id))
}

func decodeCursor(c, hash string) (score, id string, ok bool) {
	b, err := base64.RawURLEncoding.DecodeString(c)
	if err != nil {
		return "", "", false
	}
	parts := strings.Split(string(b), ":")
	if len(parts) != 3 || parts[0] != hash || !taskstate.ValidID(parts[2]) {
		return "", "", false
	}
	// Only what Redis writes for a finite score: digits, '.', '-', '+', 'e'.
	if strings.Trim(parts[1], "0123456789.-+e") != "" {
		return "", "", false
	}
	f, err := strconv.ParseFloat(parts[1], 64)
	if err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
		return "", "", false
	}
	return parts[1], parts[2], true
}
