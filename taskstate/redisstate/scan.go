package redisstate

import (
	"context"
	"fmt"
	"strconv"

	"github.com/redis/go-redis/v9"

	"github.com/mcpqueue/mcpqueue/taskstate"
)

// scanBatch is how many keys one SCAN or SSCAN step asks for.
const scanBatch = 500

// scanReadScript reads the records among KEYS: {key, JSON, revision, …}.
// With ARGV[1] = "1" it skips records with a TTL: only terminal records
// have one, so active scans read no terminal record at all.
const scanReadScript = `
local out = {}
for _, k in ipairs(KEYS) do
  if ARGV[1] ~= '1' or redis.call('PTTL', k) == -1 then
    local v = redis.call('HMGET', k, 'v', 'r')
    if v[1] and v[2] then
      out[#out+1] = k
      out[#out+1] = v[1]
      out[#out+1] = v[2]
    end
  end
end
return out`

var scanRead = redis.NewScript(scanReadScript)

// Scan implements taskstate.Store. An active Scan reads the active index
// (active.go); a full one walks every record key with SCAN.
func (s *Store) Scan(ctx context.Context, active bool, fn func(*taskstate.Task) bool) error {
	if active {
		return s.scanActive(ctx, fn)
	}
	return s.walk(ctx, false, fn)
}

// walk SCANs the record keys, reading each batch in one script call; with
// active set it reads and visits only the active records.
func (s *Store) walk(ctx context.Context, active bool, fn func(*taskstate.Task) bool) error {
	match := s.taskKey("*")
	var cursor uint64
	for {
		keys, next, err := s.rdb.Scan(ctx, cursor, match, scanBatch).Result()
		if err != nil {
			return fmt.Errorf("redisstate: scan: %w", err)
		}
		if len(keys) > 0 {
			vals, err := scanRead.Run(ctx, s.rdb, keys, luaFlag(active)).Slice()
			if err != nil {
				return fmt.Errorf("redisstate: scan: %w", err)
			}
			more := readRows(vals, func(t *taskstate.Task) bool {
				if active && t.Status.Terminal() {
					return true // terminal without a TTL: unlimited retention
				}
				return fn(t)
			})
			if !more {
				return nil
			}
		}
		if next == 0 {
			return nil
		}
		cursor = next
	}
}

// readRows decodes a read script's rows, {key or id, JSON, revision, …},
// and calls fn with each record until it returns false (then readRows
// does). Unreadable rows are skipped.
func readRows(vals []any, fn func(*taskstate.Task) bool) bool {
	for i := 0; i+2 < len(vals); i += 3 {
		v, _ := vals[i+1].(string)
		r, _ := vals[i+2].(string)
		rev, err := strconv.ParseUint(r, 10, 64)
		if err != nil {
			continue
		}
		t, err := taskstate.Decode([]byte(v), rev)
		if err != nil {
			continue
		}
		if !fn(t) {
			return false
		}
	}
	return true
}

// deleteScript: KEYS[1] record, KEYS[2] the active index; ARGV[1] expected
// revision, ARGV[2] task id. Returns 1 if it deleted the record, 0 if the
// revision moved (or the record is gone). The record is terminal, so it is
// normally not in the index; it is when an older version finished it.
var deleteScript = redis.NewScript(`
if redis.call('HGET', KEYS[1], 'r') ~= ARGV[1] then return 0 end
redis.call('DEL', KEYS[1])
redis.call('SREM', KEYS[2], ARGV[2])
return 1`)

// Delete implements taskstate.Store, the task's blobs included. The owner
// index entry goes when List next finds the record gone.
func (s *Store) Delete(ctx context.Context, id string) error {
	t, err := taskstate.GetPurgeable(ctx, s, id)
	if err != nil {
		return err
	}
	n, err := deleteScript.Run(ctx, s.rdb, []string{s.taskKey(id), s.activeKey()},
		strconv.FormatUint(t.Revision, 10), id).Int()
	if err != nil {
		return fmt.Errorf("redisstate: delete %s: %w", id, err)
	}
	if n == 0 {
		return taskstate.ErrConflict
	}
	// Its blobs (result, artifacts) go with it.
	return s.DeleteBlobs(ctx, id)
}
