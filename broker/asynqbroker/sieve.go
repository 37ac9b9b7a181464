package asynqbroker

import (
	"context"
	"errors"
	"math"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// sieve is the Redis client of a consumer's Asynq servers. It answers the
// scripts Asynq runs once per queue without a round trip for the routes' own
// queues while it knows they have nothing, so that what a job costs does not
// grow with the number of tools a consumer serves (their jobs are in the
// pool's queue, whose scripts always run):
//
//   - The processor looks for a job by running its dequeue script on each
//     queue in turn (rdb.Dequeue: one EVALSHA per queue until one yields a
//     job). The sieve reads the length of every own queue's pending list in
//     one pipelined call, at most once per fresh, and answers "nothing"
//     itself for a list that was empty then. A list it saw with jobs gets
//     the real script until that script finds the list empty.
//   - The forwarder moves due retries and scheduled jobs back to their
//     queue with one script per queue and set (scheduled, retry) every
//     PollInterval. The sieve reads each set's earliest entry (the pool
//     queue's too) in one pipelined call, at most once per fresh, and
//     answers "moved none" itself for a set with no entry due.
//
// fresh is half the idle poll: a job that lands in an own queue waits at
// most about a poll for the sieve to see it, the price of a route whose
// pool is not known yet (or of a move), while the pool's queue is served at
// Asynq's own pace. Everything else passes through to the client unchanged.
// The sieve knows the scripts by their keys (asynq v0.26: dequeue's are a
// queue's pending, paused, active and lease keys; forward's a scheduled or
// retry set and the pending list); a script it does not recognise is run
// as is, so a change in Asynq costs the round trips again, never a job
// (TestSieveSavesRoundTrips notices).
type sieve struct {
	redis.UniversalClient
	fresh time.Duration

	mu        sync.Mutex
	lookedAt  time.Time
	pending   map[string]int64 // own queue's pending list → jobs seen in it (an upper bound)
	delayedAt time.Time
	due       map[string]float64 // scheduled or retry set → earliest score (unix s; +Inf: empty)
	stats     sieveStats
}

// sieveStats count what a sieve did.
type sieveStats struct {
	Sieved   int64 // dequeue scripts run on an own queue
	Pool     int64 // dequeue scripts run on the pool's queue
	Answered int64 // dequeue scripts answered without a round trip
	Looks    int64 // pipelined reads of the own queues' lengths
}

// newSieve is the sieve of a consumer of the own queues own and the pool
// queues pool.
func newSieve(rdb redis.UniversalClient, own, pool []string, fresh time.Duration) *sieve {
	s := &sieve{UniversalClient: rdb, fresh: fresh, pending: map[string]int64{}, due: map[string]float64{}}
	for _, q := range own {
		s.pending[queueKey(q, "pending")] = 0
	}
	for _, q := range append(own, pool...) {
		s.due[queueKey(q, "scheduled")] = math.Inf(1)
		s.due[queueKey(q, "retry")] = math.Inf(1)
	}
	return s
}

// added notes a job this consumer put on queue itself.
func (s *sieve) added(queue string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if k := queueKey(queue, "pending"); s.sievedLocked(k) {
		s.pending[k]++
	}
}

func (s *sieve) sievedLocked(pendingKey string) bool {
	_, ok := s.pending[pendingKey]
	return ok
}

// queueKey is Asynq's key of a queue's part: asynq:{<queue>}:<part>.
func queueKey(queue, part string) string { return "asynq:{" + queue + "}:" + part }

// EvalSha and Eval are how redis.Script.Run reaches Redis.
func (s *sieve) EvalSha(ctx context.Context, sha string, keys []string, args ...any) *redis.Cmd {
	return s.script(ctx, keys, func() *redis.Cmd { return s.UniversalClient.EvalSha(ctx, sha, keys, args...) })
}

func (s *sieve) Eval(ctx context.Context, script string, keys []string, args ...any) *redis.Cmd {
	return s.script(ctx, keys, func() *redis.Cmd { return s.UniversalClient.Eval(ctx, script, keys, args...) })
}

// script answers a script run on keys itself if it can, else runs it and
// notes what it did.
func (s *sieve) script(ctx context.Context, keys []string, run func() *redis.Cmd) *redis.Cmd {
	if cmd := s.answer(ctx, keys); cmd != nil {
		return cmd
	}
	cmd := run()
	s.ran(keys, cmd)
	return cmd
}

// scriptLocked tells a dequeue (its pending list) or a forward (its set) of
// one of the consumer's queues by its keys; both "" for any other script.
func (s *sieve) scriptLocked(keys []string) (dequeue, forward string) {
	switch {
	case len(keys) == 4 && strings.HasSuffix(keys[0], "}:pending") && strings.HasSuffix(keys[1], "}:paused") &&
		strings.HasSuffix(keys[2], "}:active") && strings.HasSuffix(keys[3], "}:lease"):
		return keys[0], ""
	case len(keys) == 2 && strings.HasSuffix(keys[1], "}:pending") &&
		(strings.HasSuffix(keys[0], "}:scheduled") || strings.HasSuffix(keys[0], "}:retry")):
		if _, ok := s.due[keys[0]]; ok {
			return "", keys[0]
		}
	}
	return "", ""
}

// answer is the script's result when the sieve knows it (nil: run it).
func (s *sieve) answer(ctx context.Context, keys []string) *redis.Cmd {
	s.mu.Lock()
	defer s.mu.Unlock()
	dequeue, forward := s.scriptLocked(keys)
	switch {
	case dequeue != "" && s.sievedLocked(dequeue):
		if s.pending[dequeue] == 0 && time.Since(s.lookedAt) >= s.fresh {
			s.lookLocked(ctx)
		}
		if s.pending[dequeue] > 0 {
			return nil
		}
		s.stats.Answered++
		cmd := redis.NewCmd(ctx)
		cmd.SetErr(redis.Nil) // what the script says of an empty list
		return cmd
	case forward != "":
		if time.Since(s.delayedAt) >= s.fresh {
			s.lookDelayedLocked(ctx)
		}
		if s.due[forward] <= float64(time.Now().Unix()) {
			return nil
		}
		cmd := redis.NewCmd(ctx)
		cmd.SetVal(int64(0)) // tasks moved
		return cmd
	}
	return nil
}

// ran notes what a dequeue script found, and the jobs a forward script
// moved to a pending list.
func (s *sieve) ran(keys []string, cmd *redis.Cmd) {
	s.mu.Lock()
	defer s.mu.Unlock()
	dequeue, forward := s.scriptLocked(keys)
	sieved := dequeue != "" && s.sievedLocked(dequeue)
	switch {
	case sieved:
		s.stats.Sieved++
	case dequeue != "":
		s.stats.Pool++
	}
	switch err := cmd.Err(); {
	case sieved && errors.Is(err, redis.Nil):
		s.pending[dequeue] = 0
	case sieved && err == nil && s.pending[dequeue] > 0:
		s.pending[dequeue]--
	case forward != "" && err == nil && s.sievedLocked(keys[1]):
		if n, ok := cmd.Val().(int64); ok && n > 0 {
			s.pending[keys[1]] += n
		}
	}
}

// lookLocked reads the length of every pending list. On an error every
// list counts as having jobs, so the scripts run as without the sieve.
func (s *sieve) lookLocked(ctx context.Context) {
	keys, cmds, err := pipelined(ctx, s.UniversalClient, s.pending, func(p redis.Pipeliner, k string) *redis.IntCmd {
		return p.LLen(ctx, k)
	})
	s.lookedAt = time.Now()
	s.stats.Looks++
	for i, k := range keys {
		n, cerr := cmds[i].Result()
		if err != nil || cerr != nil {
			n = 1
		}
		s.pending[k] = n
	}
}

// lookDelayedLocked reads the earliest entry of every scheduled and retry
// set. On an error every set counts as due.
func (s *sieve) lookDelayedLocked(ctx context.Context) {
	keys, cmds, err := pipelined(ctx, s.UniversalClient, s.due, func(p redis.Pipeliner, k string) *redis.ZSliceCmd {
		return p.ZRangeWithScores(ctx, k, 0, 0)
	})
	s.delayedAt = time.Now()
	for i, k := range keys {
		z, cerr := cmds[i].Result()
		switch {
		case err != nil && !errors.Is(err, redis.Nil) || cerr != nil && !errors.Is(cerr, redis.Nil):
			s.due[k] = math.Inf(-1)
		case len(z) == 0:
			s.due[k] = math.Inf(1)
		default:
			s.due[k] = z[0].Score
		}
	}
}

// pipelined sends one command per key of m, made by cmd, in one pipelined
// call: the keys, the commands in the same order, and the pipeline's error.
func pipelined[V, C any](ctx context.Context, rdb redis.UniversalClient, m map[string]V, cmd func(redis.Pipeliner, string) C) ([]string, []C, error) {
	keys := make([]string, 0, len(m))
	cmds := make([]C, 0, len(m))
	_, err := rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for k := range m {
			keys = append(keys, k)
			cmds = append(cmds, cmd(p, k))
		}
		return nil
	})
	return keys, cmds, err
}

// counts is what the sieve did so far.
func (s *sieve) counts() sieveStats {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.stats
}
