// Package redisbackend connects a process to Redis: Connect returns a
// backend.Backend whose queue is Asynq (asynqbroker: a queue per tool), whose
// bus is Redis pub/sub, and whose task store and tool catalog are Redis keys
// (redisstate), every name derived from Options.Prefix as api derives it.
// Every seam uses one client, so a Sentinel failover moves all of them.
//
// The binaries fill Options from their flags (--redis, --redis-sentinels,
// …, --asynq-poll: docs/configuration.md); the errors name those flags.
package redisbackend

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/rs/zerolog"

	"github.com/mcpqueue/mcpqueue/backend"
	"github.com/mcpqueue/mcpqueue/broker"
	"github.com/mcpqueue/mcpqueue/broker/asynqbroker"
	"github.com/mcpqueue/mcpqueue/internal/slogzero"
	"github.com/mcpqueue/mcpqueue/taskstate"
	"github.com/mcpqueue/mcpqueue/taskstate/redisstate"
)

// Options say how to reach Redis (docs/security.md, "Connecting to a
// secured broker") and how to name and poll what lives there. The zero
// value of each field but URL is a documented default.
type Options struct {
	// URL is redis://, rediss:// (TLS), or
	// redis+sentinel://[user:password@]host:port[,host:port…]/master[/db]
	// (rediss+sentinel:// for TLS).
	URL string
	// Sentinels (host:port) and Master: find the primary named Master
	// through these Sentinels; URL then gives only the user, password,
	// database and TLS (rediss://), not the address. A redis+sentinel://
	// URL says the same in one value.
	Sentinels []string
	Master    string
	// User and Password authenticate to Redis (ACL), overriding the URL's.
	User, Password string
	// SentinelUser and SentinelPassword authenticate to the Sentinels.
	SentinelUser, SentinelPassword string
	// TLS client settings (PEM files), for rediss:// URLs: the CAs that
	// sign Redis's certificate (default the system's), and a client
	// certificate with its key for a Redis with tls-auth-clients.
	TLSCA, TLSCert, TLSKey string
	// WaitReplicas > 0: a task is acknowledged (its job enqueued) only once
	// every write so far is on that many replicas (Redis WAIT), within
	// WaitTimeout; otherwise the enqueue fails and the caller gets an error.
	WaitReplicas int
	WaitTimeout  time.Duration

	// Prefix names every key, queue and channel, so systems can share a
	// Redis. Default "mcpq".
	Prefix string
	// RequireDurable refuses a Redis that loses tasks on a restart (no
	// appendonly yes, or an evicting maxmemory-policy); without it Connect
	// only warns.
	RequireDurable bool
	// ToolRetention is how long a catalog entry is kept after its last
	// refresh. Default taskstate.DefaultToolRetention.
	ToolRetention time.Duration
	// PollInterval and BusyPollInterval: how often idle and busy consumers
	// look for jobs (asynqbroker.Config). Priorities weigh tools' queues
	// (tool → priority, at least 1; others 1).
	PollInterval, BusyPollInterval time.Duration
	Priorities                     map[string]int
	// Logger gets the connection's events (durability warnings); Slog,
	// when set, instead. Default: none.
	Logger zerolog.Logger
	Slog   *slog.Logger
}

// Connect connects to the Redis o names as name (CLIENT SETNAME), checks
// that it answers and how durable it is, and sets up the seams on it.
func Connect(ctx context.Context, name string, o *Options) (*backend.Backend, error) {
	if o == nil {
		o = &Options{}
	}
	log := slogzero.Logger(o.Logger, o.Slog)
	target, err := o.target()
	if err != nil {
		return nil, err
	}
	rdb := target.client(name)
	if err := rdb.Ping(ctx).Err(); err != nil {
		_ = rdb.Close()
		return nil, fmt.Errorf("redisbackend: connect Redis %s: %w%s", target, err, redisHint(err))
	}
	if err := checkRedisDurability(ctx, rdb, log, o.RequireDurable); err != nil {
		_ = rdb.Close()
		return nil, err
	}
	st := redisstate.New(rdb, &redisstate.Config{Prefix: prefix(o) + ":", ToolRetention: o.ToolRetention})
	acfg := &asynqbroker.Config{Prefix: o.Prefix, PollInterval: o.PollInterval, BusyPollInterval: o.BusyPollInterval, Priorities: o.Priorities}
	acfg.Pools = catalogPools{st} // a route's jobs go to the queue of the pool that published it
	aq := asynqbroker.NewQueue(rdb, acfg)
	var q broker.Queue = aq
	if n := o.WaitReplicas; n > 0 {
		q = &replicatedQueue{Queue: aq, rdb: rdb, n: n, timeout: o.WaitTimeout, key: prefix(o) + ":replication-barrier"}
		log.Info().Int("replicas", n).Dur("timeout", o.WaitTimeout).Msg("Redis: a task is acknowledged once its writes are on the replicas (WAIT)")
	}
	bus := asynqbroker.NewBus(rdb, acfg)
	log.Info().Stringer("redis", target).Msg("Redis connected")
	b := &backend.Backend{Queue: q, Bus: bus, Store: st, Catalog: st, Messaging: backend.Messaging{System: "redis", Destination: aq.QueueName}}
	for _, c := range []func() error{rdb.Close, st.Close, bus.Close, aq.Close} {
		b.OnClose(c) // closed last first: rdb last
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

// prefix is o.Prefix or its default.
func prefix(o *Options) string {
	if o.Prefix == "" {
		return "mcpq"
	}
	return o.Prefix
}

// NewClient is a client of the Redis o names, made exactly as Connect makes
// its own (Sentinel, TLS, ACL user included), for tools that want their own
// connection (asynqmon). The caller closes it.
func NewClient(name string, o *Options) (*redis.Client, error) {
	t, err := o.target()
	if err != nil {
		return nil, err
	}
	return t.client(name), nil
}
