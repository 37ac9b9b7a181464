package redisbackend

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/rs/zerolog"

	"github.com/mcpqueue/mcpqueue/broker"
	"github.com/mcpqueue/mcpqueue/broker/asynqbroker"
)

// checkRedisDurability warns loudly about settings under which Redis loses
// tasks: an eviction policy that may drop keys, or no append-only file. With
// require (--require-durable) it returns an error instead, also when it
// cannot read the settings (a managed Redis that disables CONFIG).
func checkRedisDurability(ctx context.Context, rdb *redis.Client, log zerolog.Logger, require bool) error {
	get := func(key string) string {
		v, err := rdb.ConfigGet(ctx, key).Result()
		if err != nil {
			return "?"
		}
		if s, ok := v[key]; ok {
			return s
		}
		return "?"
	}
	policy, aof, save, fsync := get("maxmemory-policy"), get("appendonly"), strings.TrimSpace(get("save")), get("appendfsync")
	if require {
		switch {
		case policy == "?" || aof == "?":
			return errors.New("redisbackend: --require-durable: cannot read Redis's appendonly and maxmemory-policy (CONFIG GET refused); make sure Redis runs with appendonly yes and maxmemory-policy noeviction, then start without --require-durable")
		case aof != "yes":
			return fmt.Errorf("redisbackend: --require-durable: Redis has appendonly %s, so a Redis restart loses the tasks and jobs written since the last RDB snapshot (or all of them); set appendonly yes (and appendfsync everysec or always) in redis.conf, or CONFIG SET appendonly yes", aof)
		case policy != "noeviction":
			return fmt.Errorf("redisbackend: --require-durable: Redis has maxmemory-policy %s, so under memory pressure it deletes task records and queued jobs; set maxmemory-policy noeviction", policy)
		}
		log.Info().Str("appendfsync", fsync).Msg("Redis durability: appendonly yes, maxmemory-policy noeviction")
		return nil
	}
	if policy != "noeviction" && policy != "?" {
		log.Warn().Str("maxmemory-policy", policy).
			Msg("REDIS MAY EVICT TASKS: maxmemory-policy is not noeviction; under memory pressure Redis deletes task records and queued jobs. Set maxmemory-policy noeviction.")
	}
	if aof == "no" && save == "" {
		log.Warn().
			Msg("REDIS KEEPS NOTHING ON DISK: appendonly is off and RDB snapshots are disabled; a Redis restart loses every task and job. Enable appendonly yes (appendfsync everysec or always).")
	} else if aof == "no" {
		log.Warn().Str("save", save).
			Msg("Redis persists only by RDB snapshots: a crash loses the tasks written since the last snapshot. Enable appendonly yes for durable tasks.")
	}
	return nil
}

// replicatedQueue is the Asynq queue whose Enqueue returns only once
// every write so far — the task's record and its job included — is on n
// replicas: after the enqueue it runs INCR on a barrier key and WAIT on one
// connection. WAIT waits for that connection's last write, and replication
// is one ordered stream, so the record and job written before the barrier
// are on the replicas when the barrier is. Embedding the concrete queue
// keeps its other abilities (broker.Depth, broker.Holder).
type replicatedQueue struct {
	*asynqbroker.Queue
	rdb     *redis.Client
	n       int
	timeout time.Duration
	key     string
}

var _ broker.Queue = (*replicatedQueue)(nil)

func (q *replicatedQueue) Enqueue(ctx context.Context, job *broker.Job) error {
	if err := q.Queue.Enqueue(ctx, job); err != nil {
		return err
	}
	var wait *redis.Cmd
	_, err := q.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		p.Incr(ctx, q.key)
		wait = p.Do(ctx, "WAIT", q.n, q.timeout.Milliseconds())
		return nil
	})
	if err != nil {
		return fmt.Errorf("redisbackend: --redis-wait-replicas: %w", err)
	}
	if got, _ := wait.Int64(); got < int64(q.n) {
		return fmt.Errorf("redisbackend: --redis-wait-replicas %d: only %d replicas had task %s's writes after %s", q.n, got, job.TaskID, q.timeout)
	}
	return nil
}
