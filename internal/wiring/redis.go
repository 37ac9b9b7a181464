package wiring

import (
	"context"
	"fmt"
	"strings"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"
	"github.com/rs/zerolog"

	"github.com/mcpqueue/mcpqueue/broker/asynqbroker"
	"github.com/mcpqueue/mcpqueue/taskstate/redisstate"
)

// ConnectRedis connects to o.RedisURL and sets up the Redis seams: Asynq
// queue, Redis pub/sub bus, Redis records and catalog.
func (o *Options) ConnectRedis(ctx context.Context, name string, log zerolog.Logger) (*Backend, error) {
	opt, err := redis.ParseURL(o.RedisURL)
	if err != nil {
		return nil, fmt.Errorf("wiring: --redis %q: %w", o.RedisURL, err)
	}
	opt.ClientName = name
	rdb := redis.NewClient(opt)
	if err := rdb.Ping(ctx).Err(); err != nil {
		_ = rdb.Close()
		return nil, fmt.Errorf("wiring: connect Redis %s: %w", o.RedisURL, err)
	}
	checkRedisDurability(ctx, rdb, log)

	q := asynqbroker.NewQueue(rdb, o.asynqConfig())
	bus := asynqbroker.NewBus(rdb, o.asynqConfig())
	st := redisstate.New(rdb, &redisstate.Config{Prefix: o.Prefix + ":"})
	b := &Backend{Queue: q, Bus: bus, Store: st, Catalog: st}
	b.close = []func(){
		func() { _ = rdb.Close() },
		func() { _ = st.Close() },
		func() { _ = bus.Close() },
		func() { _ = q.Close() },
	}
	return b, nil
}

func (o *Options) asynqConfig() *asynqbroker.Config {
	return &asynqbroker.Config{Queue: o.Prefix, BusPrefix: o.Prefix + ":bus", PollInterval: o.AsynqPoll}
}

// AsynqConnOpt is the connection asynqmon needs for the same Redis.
func (o *Options) AsynqConnOpt() (asynq.RedisConnOpt, error) {
	return asynq.ParseRedisURI(o.RedisURL)
}

// checkRedisDurability warns loudly about settings under which Redis loses
// tasks: an eviction policy that may drop keys, or no persistence at all.
func checkRedisDurability(ctx context.Context, rdb *redis.Client, log zerolog.Logger) {
	get := func(key string) string {
		v, err := rdb.ConfigGet(ctx, key).Result()
		if err != nil {
			return "?"
		}
		return v[key]
	}
	if p := get("maxmemory-policy"); p != "noeviction" && p != "?" {
		log.Warn().Str("maxmemory-policy", p).
			Msg("REDIS MAY EVICT TASKS: maxmemory-policy is not noeviction; under memory pressure Redis deletes task records and queued jobs. Set maxmemory-policy noeviction.")
	}
	aof, save := get("appendonly"), strings.TrimSpace(get("save"))
	if aof == "no" && save == "" {
		log.Warn().
			Msg("REDIS KEEPS NOTHING ON DISK: appendonly is off and RDB snapshots are disabled; a Redis restart loses every task and job. Enable appendonly yes (appendfsync everysec or always).")
	} else if aof == "no" {
		log.Warn().Str("save", save).
			Msg("Redis persists only by RDB snapshots: a crash loses the tasks written since the last snapshot. Enable appendonly yes for durable tasks.")
	}
}
