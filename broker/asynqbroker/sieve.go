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
// two scripts Asynq runs once per queue without a round trip for the queues
// it knows have nothing for them, so that what a job costs does not grow
// with the number of tools a consumer serves:
//
//   - The processor looks for a job by running its dequeue script on each
//     queue in turn (rdb.Dequeue: one EVALSHA per queue until one yields a
//     job). The sieve reads the length of every pending list in one
//     pipelined call, at most once per fresh, and answers "nothing" itself
//     for a queue whose list was empty then. A queue it saw with jobs gets
//     the real script until that script finds the list empty.
//   - The forwarder moves due retries and scheduled jobs back to their
//     queue with one script per queue and set (scheduled, retry) every
//     PollInterval. The sieve reads each set's earliest entry in one
//     pipelined call, at most once per PollInterval/2, and answers "moved
//     none" itself for a set with no entry due.
//
// A job that arrives in a list the sieve saw empty waits at most fresh
// longer than it would have: fresh is half the shortest sleep of Asynq's
// processor between two looks, so each look after a sleep reads the lists
// anew. Everything else passes through to the client unchanged. The sieve
// knows the scripts by their keys (asynq v0.26: dequeue's are a queue's
// pending, paused, active and lease keys; forward's a scheduled or retry
// set and the pending list); a script it does not recognise is run as is,
// so a change in Asynq costs the round trips again, never a job
// (TestSieveSavesRoundTrips notices).
type sieve struct {
	redis.UniversalClient
	fresh, freshDelayed time.Duration

	mu        sync.Mutex
	lookedAt  time.Time
	pending   map[string]int64 // pending list → jobs seen in it (an upper bound)
	delayedAt time.Time
	due       map[string]float64 // scheduled or retry set → earliest score (unix s; +Inf: empty)
	answered  int64              // dequeue scripts answered without a round trip
	dequeues  int64              // dequeue scripts run
}

func newSieve(rdb redis.UniversalClient, queues []string, fresh, freshDelayed time.Duration) *sieve {
	s := &sieve{
		UniversalClient: rdb, fresh: fresh, freshDelayed: freshDelayed,
		pending: map[string]int64{}, due: map[string]float64{},
	}
	for _, q := range queues {
		s.pending[queueKey(q, "pending")] = 0
		s.due[queueKey(q, "scheduled")] = math.Inf(1)
		s.due[queueKey(q, "retry")] = math.Inf(1)
	}
	return s
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
		if _, ok := s.pending[keys[0]]; ok {
			return keys[0], ""
		}
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
	case dequeue != "":
		if s.pending[dequeue] == 0 && time.Since(s.lookedAt) >= s.fresh {
			s.lookLocked(ctx)
		}
		if s.pending[dequeue] > 0 {
			return nil
		}
		s.answered++
		cmd := redis.NewCmd(ctx)
		cmd.SetErr(redis.Nil) // what the script says of an empty list
		return cmd
	case forward != "":
		if time.Since(s.delayedAt) >= s.freshDelayed {
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
	if dequeue != "" {
		s.dequeues++
	}
	switch err := cmd.Err(); {
	case dequeue != "" && errors.Is(err, redis.Nil):
		s.pending[dequeue] = 0
	case dequeue != "" && err == nil && s.pending[dequeue] > 0:
		s.pending[dequeue]--
	case forward != "" && err == nil:
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

// counts are the dequeue scripts run and those answered without a round
// trip.
func (s *sieve) counts() (run, answered int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.dequeues, s.answered
}
