package redisstate

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/mcpqueue/mcpqueue/taskstate"
)

// The active index is a set, <Prefix>active, of the ids of active records.
// The api's reaper scans active records every few seconds, while finished
// records are retained for their TTL (an hour by default): walking every
// record key would cost Redis work in proportion to the tasks of the last
// hour, most of them long finished, on every reap. The set holds only the
// active ones.
//
// The create and update scripts add a task to the set when they write an
// active version and remove it when they write a terminal one, in the same
// step as the record; the delete script removes it too. A plain set is
// enough: active Scan needs membership and SSCAN, not an order.
//
// Two things can still make the set wrong, and active Scan repairs both:
//
//   - A member whose record is gone (deleted by hand, evicted) or terminal
//     (finished by an older version, whose scripts do not know the set):
//     the script that reads a batch drops members whose record is missing
//     or has a TTL, and Scan drops the few terminal ones without a TTL
//     (unlimited retention) it decodes.
//   - An active record that is not a member: one written by an older
//     version during a rolling upgrade, or restored by hand. Scan cannot
//     find these through the set, so the first active Scan of a Store
//     first walks every record key as a full Scan does and adds the active
//     records it finds. If it found any, an older version writes (or
//     wrote) here, and every later active Scan goes on with a sweep of the
//     keys, one SCAN step (scanBatch keys) per Scan, adding those it finds,
//     until a whole sweep finds none. Otherwise active Scans read the
//     index alone, at a cost that does not grow with the retained history
//     (a full walk every 10 minutes, as before, cost 5–15 s of Redis work
//     with a million retained records). The older replicas' own reapers,
//     which still walk every key, cover the records they write while they
//     run; an api that starts walks every key again.

// activeLua holds the helper the create and update scripts share.
const activeLua = `
-- markActive keeps id in the active index exactly while its record is
-- active ('1').
local function markActive(set, id, active)
  if active == '1' then
    redis.call('SADD', set, id)
  else
    redis.call('SREM', set, id)
  end
end
`

// activeArg is the scripts' active flag for the version t.
func activeArg(t *taskstate.Task) string { return luaFlag(!t.Status.Terminal()) }

// luaFlag is how the scripts take a boolean argument.
func luaFlag(b bool) string {
	if b {
		return "1"
	}
	return "0"
}

// activeReadScript: KEYS[1] the active index; ARGV[1] record key prefix,
// ARGV[2…] task ids. Returns {id, JSON, revision, …} for the ids whose
// record exists without a TTL (only terminal records have one), and drops
// the others from the index.
var activeRead = redis.NewScript(`
local out, gone = {}, {}
for i = 2, #ARGV do
  local id = ARGV[i]
  local k = ARGV[1] .. id
  local v
  if redis.call('PTTL', k) == -1 then v = redis.call('HMGET', k, 'v', 'r') end
  if v and v[1] and v[2] then
    out[#out+1] = id
    out[#out+1] = v[1]
    out[#out+1] = v[2]
  else
    gone[#gone+1] = id
  end
end
if #gone > 0 then redis.call('SREM', KEYS[1], unpack(gone)) end
return out`)

// markScript: KEYS[1] the active index; ARGV[1] record key prefix, ARGV[2]
// "1" to add, "0" to remove, ARGV[3…] task id and revision pairs. It marks
// only ids whose record still has the revision Scan read: a newer version's
// writer has marked it already, or it was an older version, which the next
// reconciliation or active Scan sees. Returns how many it changed.
var markScript = redis.NewScript(`
local n = 0
for i = 3, #ARGV, 2 do
  if redis.call('HGET', ARGV[1] .. ARGV[i], 'r') == ARGV[i+1] then
    if ARGV[2] == '1' then
      n = n + redis.call('SADD', KEYS[1], ARGV[i])
    else
      n = n + redis.call('SREM', KEYS[1], ARGV[i])
    end
  end
end
return n`)

// reconciler keeps the state of the index's repair: whether the full walk
// of the first active Scan was done, and where the sweep goes on.
type reconciler struct {
	mu       sync.Mutex
	walked   bool   // the full walk succeeded
	sweeping bool   // it, or the sweep under way, found unindexed records
	found    bool   // the sweep under way found some
	cursor   uint64 // the sweep's SCAN cursor (0: it starts over)
}

// walk reports whether an active Scan walks every key (none has yet), and
// if so counts it as done (a failed one calls retry).
func (r *reconciler) walk() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.walked {
		return false
	}
	r.walked = true
	return true
}

func (r *reconciler) retry() {
	r.mu.Lock()
	r.walked = false
	r.mu.Unlock()
}

// walkedFound records what the full walk found: whether to sweep.
func (r *reconciler) walkedFound(added int) {
	r.mu.Lock()
	r.sweeping, r.found, r.cursor = added > 0, false, 0
	r.mu.Unlock()
}

// step reports whether an active Scan takes a sweep step, and from where.
func (r *reconciler) step() (cursor uint64, ok bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.cursor, r.sweeping
}

// stepped records a sweep step that found added unindexed records and
// ended at cursor: a whole sweep that found none ends the sweeping.
func (r *reconciler) stepped(cursor uint64, added int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.cursor, r.found = cursor, r.found || added > 0
	if cursor == 0 {
		r.sweeping, r.found = r.found, false
	}
}

// scanActive is Scan(active): through the index, after walking every key
// (the first time) or one step of the sweep (while it runs).
func (s *Store) scanActive(ctx context.Context, fn func(*taskstate.Task) bool) error {
	if s.recon.walk() {
		if err := s.reconcile(ctx); err != nil {
			s.recon.retry()
			return err
		}
	} else if err := s.sweep(ctx); err != nil {
		return err
	}
	var cursor uint64
	for {
		ids, next, err := s.rdb.SScan(ctx, s.activeKey(), cursor, "", scanBatch).Result()
		if err != nil {
			return fmt.Errorf("redisstate: scan: %w", err)
		}
		if len(ids) > 0 {
			args := make([]any, 0, len(ids)+1)
			args = append(args, s.taskKey(""))
			for _, id := range ids {
				args = append(args, id)
			}
			vals, err := activeRead.Run(ctx, s.rdb, []string{s.activeKey()}, args...).Slice()
			if err != nil {
				return fmt.Errorf("redisstate: scan: %w", err)
			}
			var finished []any // terminal without a TTL: id, revision pairs
			more := readRows(vals, func(t *taskstate.Task) bool {
				if t.Status.Terminal() {
					finished = append(finished, t.ID, strconv.FormatUint(t.Revision, 10))
					return true
				}
				return fn(t)
			})
			if _, err := s.mark(ctx, false, finished); err != nil {
				return err
			}
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

// reconcile walks every record key and adds the active records to the
// index; most are members already, which SADD leaves as they are.
func (s *Store) reconcile(ctx context.Context) error {
	var found []any // id, revision pairs
	err := s.walk(ctx, true, func(t *taskstate.Task) bool {
		found = append(found, t.ID, strconv.FormatUint(t.Revision, 10))
		return true
	})
	if err != nil {
		return err
	}
	added, err := s.mark(ctx, true, found)
	if err != nil {
		return err
	}
	s.recon.walkedFound(added)
	return nil
}

// sweep takes the next SCAN step of the record keys (scanBatch keys) and
// adds the active records among them to the index.
func (s *Store) sweep(ctx context.Context) error {
	cursor, ok := s.recon.step()
	if !ok {
		return nil
	}
	keys, next, err := s.rdb.Scan(ctx, cursor, s.taskKey("*"), scanBatch).Result()
	if err != nil {
		return fmt.Errorf("redisstate: scan: %w", err)
	}
	if len(keys) == 0 {
		s.recon.stepped(next, 0)
		return nil
	}
	vals, err := scanRead.Run(ctx, s.rdb, keys, luaFlag(true)).Slice()
	if err != nil {
		return fmt.Errorf("redisstate: scan: %w", err)
	}
	var found []any // id, revision pairs
	readRows(vals, func(t *taskstate.Task) bool {
		if !t.Status.Terminal() {
			found = append(found, t.ID, strconv.FormatUint(t.Revision, 10))
		}
		return true
	})
	added, err := s.mark(ctx, true, found)
	if err != nil {
		return err
	}
	s.recon.stepped(next, added)
	return nil
}

// mark adds (active) or removes the ids of id, revision pairs, a batch per
// script call, and returns how many it added or removed.
func (s *Store) mark(ctx context.Context, active bool, pairs []any) (int, error) {
	changed := 0
	for len(pairs) > 0 {
		n := min(len(pairs), 2*scanBatch)
		args := append([]any{s.taskKey(""), luaFlag(active)}, pairs[:n]...)
		c, err := markScript.Run(ctx, s.rdb, []string{s.activeKey()}, args...).Int()
		if err != nil {
			return changed, fmt.Errorf("redisstate: scan: active index: %w", err)
		}
		changed += c
		pairs = pairs[n:]
	}
	return changed, nil
}

// Each owner has a set of its own active tasks too, <prefix>owner:{<owner
// hash>}:active, kept by the create and update scripts in the same step as
// the record, so counting an owner's active tasks (the api's cap on them)
// is one SCARD, whatever the owner's history. A member can go stale only
// when an older version's script finished the task (during a rolling
// upgrade); CountActive drops such members before a count reaches its
// limit.

// CountActive implements taskstate.ActiveCounter.
func (s *Store) CountActive(ctx context.Context, owner string, limit int) (int, error) {
	if owner == "" {
		return 0, nil
	}
	key := s.ownerKeys(owner)[2]
	n, err := s.rdb.SCard(ctx, key).Result()
	if err != nil {
		return 0, fmt.Errorf("redisstate: count active: %w", err)
	}
	if limit <= 0 || n < int64(limit) {
		return int(n), nil
	}
	// At the limit: make sure no stale member is what refuses the task.
	ids, err := s.rdb.SMembers(ctx, key).Result()
	if err != nil {
		return 0, fmt.Errorf("redisstate: count active: %w", err)
	}
	stale, err := s.notActive(ctx, ids)
	if err != nil {
		return 0, err
	}
	if len(stale) > 0 {
		_ = s.rdb.SRem(ctx, key, stale...).Err() // a failure leaves them for the next count
	}
	return min(len(ids)-len(stale), limit), nil
}

// notActive returns those of ids whose record is gone or terminal.
func (s *Store) notActive(ctx context.Context, ids []string) ([]any, error) {
	cmds := make([]*redis.SliceCmd, len(ids))
	_, err := s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, id := range ids {
			cmds[i] = p.HMGet(ctx, s.taskKey(id), "v", "r")
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("redisstate: count active: %w", err)
	}
	var out []any
	for i, c := range cmds {
		v, _ := c.Val()[0].(string)
		if t, err := taskstate.Decode([]byte(v), 0); v == "" || err != nil || t.Status.Terminal() {
			out = append(out, ids[i])
		}
	}
	return out, nil
}

// leaseScript: KEYS[1] the lease; ARGV[1] holder, ARGV[2] TTL ms. Takes
// the lease if it is free or holder's, and returns 1; 0 if another holds it.
var leaseScript = redis.NewScript(`
local cur = redis.call('GET', KEYS[1])
if cur and cur ~= ARGV[1] then return 0 end
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
return 1`)

// Lease implements taskstate.Leaser: the key <prefix>lease:<name> holds the
// holder and expires with the lease.
func (s *Store) Lease(ctx context.Context, name, holder string, ttl time.Duration) (bool, error) {
	if !taskstate.ValidLeaseName(name) || !taskstate.ValidLeaseName(holder) {
		return false, fmt.Errorf("redisstate: lease %q for %q: not plain names", name, holder)
	}
	n, err := leaseScript.Run(ctx, s.rdb, []string{s.cfg.Prefix + "lease:" + name}, holder, max(ttl.Milliseconds(), 1)).Int()
	if err != nil {
		return false, fmt.Errorf("redisstate: lease %s: %w", name, err)
	}
	return n == 1, nil
}
