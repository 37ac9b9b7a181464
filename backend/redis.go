package backend

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"
	"github.com/rs/zerolog"

	"github.com/mcpqueue/mcpqueue/broker"
	"github.com/mcpqueue/mcpqueue/broker/asynqbroker"
	"github.com/mcpqueue/mcpqueue/taskstate"
	"github.com/mcpqueue/mcpqueue/taskstate/redisstate"
)

// ConnectRedis connects to the Redis of o.RedisURL and o.Redis (a primary
// found through Sentinel, TLS, an ACL user) and sets up the Redis seams:
// Asynq queue, Redis pub/sub bus, Redis records and catalog. Every seam
// uses the one client, so a Sentinel failover moves all of them.
func (o *Options) ConnectRedis(ctx context.Context, name string, log zerolog.Logger) (*Backend, error) {
	target, err := o.redisTarget()
	if err != nil {
		return nil, err
	}
	rdb := target.client(name)
	if err := rdb.Ping(ctx).Err(); err != nil {
		_ = rdb.Close()
		return nil, fmt.Errorf("backend: connect Redis %s: %w%s", target, err, redisHint(err))
	}
	if err := checkRedisDurability(ctx, rdb, log, o.RequireDurable); err != nil {
		_ = rdb.Close()
		return nil, err
	}

	acfg, err := o.asynqConfig()
	if err != nil {
		_ = rdb.Close()
		return nil, err
	}
	st := redisstate.New(rdb, &redisstate.Config{Prefix: o.Prefix + ":", ToolRetention: o.ToolRetention})
	acfg.Pools = catalogPools{st} // a route's jobs go to the queue of the pool that published it
	aq := asynqbroker.NewQueue(rdb, acfg)
	var q broker.Queue = aq
	if n := o.Redis.WaitReplicas; n > 0 {
		q = &replicatedQueue{Queue: aq, rdb: rdb, n: n, timeout: o.Redis.WaitTimeout, key: o.Prefix + ":replication-barrier"}
		log.Info().Int("replicas", n).Dur("timeout", o.Redis.WaitTimeout).Msg("Redis: a task is acknowledged once its writes are on the replicas (WAIT)")
	}
	bus := asynqbroker.NewBus(rdb, acfg)
	log.Info().Stringer("redis", target).Msg("Redis connected")
	b := &Backend{Queue: q, Bus: bus, Store: st, Catalog: st, system: "redis", destination: aq.QueueName}
	b.close = []func(){
		func() { _ = rdb.Close() },
		func() { _ = st.Close() },
		func() { _ = bus.Close() },
		func() { _ = aq.Close() },
	}
	return b, nil
}

// catalogPools is asynqbroker.Pools on the catalog: the pool a route's
// entry names ("" for a route not in the catalog).
type catalogPools struct{ c taskstate.Catalog }

func (p catalogPools) Pool(ctx context.Context, route string) (string, error) {
	t, err := p.c.Tool(ctx, route)
	if errors.Is(err, taskstate.ErrNotFound) {
		return "", nil
	}
	if err != nil {
		return "", err
	}
	return t.Pool, nil
}

// asynqConfig reads --asynq-queues: it weighs the tools' own queues
// (asynqbroker.QueueName; tool=priority).
func (o *Options) asynqConfig() (*asynqbroker.Config, error) {
	c := &asynqbroker.Config{Prefix: o.Prefix, PollInterval: o.AsynqPoll, BusyPollInterval: o.AsynqBusyPoll}
	if o.AsynqToolQueues != "" {
		return nil, errors.New("backend: --asynq-tool-queues (MCPQ_ASYNQ_TOOL_QUEUES) was removed: jobs go to the queue of their tool's pool " +
			"(the workers' --pool), so give a slow tool a pool of its own; weigh tools' own queues with --asynq-queues tool=priority,…")
	}
	for _, p := range SplitList(o.AsynqQueues) {
		k, v, ok := strings.Cut(p, "=")
		k, v = strings.TrimSpace(k), strings.TrimSpace(v)
		if !ok || k == "" || v == "" {
			return nil, fmt.Errorf("backend: --asynq-queues: %q is not tool=priority", p)
		}
		prio, err := strconv.Atoi(v)
		if err != nil || prio < 1 {
			return nil, fmt.Errorf("backend: --asynq-queues: priority of %q must be a positive integer, got %q", k, v)
		}
		if c.Priorities == nil {
			c.Priorities = map[string]int{}
		}
		c.Priorities[k] = prio
	}
	return c, nil
}

// SplitList splits a comma-separated flag value, dropping blanks.
func SplitList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

// AsynqConnOpt is the connection asynqmon needs for the same Redis: its
// clients are made exactly as ConnectRedis makes its own (Sentinel, TLS,
// ACL user included).
func (o *Options) AsynqConnOpt() (asynq.RedisConnOpt, error) {
	t, err := o.redisTarget()
	if err != nil {
		return nil, err
	}
	return asynqConnOpt{t}, nil
}

type asynqConnOpt struct{ t *redisTarget }

func (a asynqConnOpt) MakeRedisClient() any { return a.t.client("asynqmon") }

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
			return errors.New("backend: --require-durable: cannot read Redis's appendonly and maxmemory-policy (CONFIG GET refused); make sure Redis runs with appendonly yes and maxmemory-policy noeviction, then start without --require-durable")
		case aof != "yes":
			return fmt.Errorf("backend: --require-durable: Redis has appendonly %s, so a Redis restart loses the tasks and jobs written since the last RDB snapshot (or all of them); set appendonly yes (and appendfsync everysec or always) in redis.conf, or CONFIG SET appendonly yes", aof)
		case policy != "noeviction":
			return fmt.Errorf("backend: --require-durable: Redis has maxmemory-policy %s, so under memory pressure it deletes task records and queued jobs; set maxmemory-policy noeviction", policy)
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
