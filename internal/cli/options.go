// Package cli is what the mcpqueue binaries (cmd/api, cmd/worker and every
// worker.Main) share besides their own flags: the backend flags and their
// environment variables, strictly checked (Env, ParseFlags), the logger,
// tracing and metrics, the admin endpoints, and --version. It connects
// through backend/natsbackend and backend/redisbackend; nothing outside
// this module needs it, and no public function takes or returns its types.
package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/hibiken/asynq"
	"github.com/rs/zerolog"

	"github.com/mcpqueue/mcpqueue/backend"
	"github.com/mcpqueue/mcpqueue/backend/natsbackend"
	"github.com/mcpqueue/mcpqueue/backend/redisbackend"
	"github.com/mcpqueue/mcpqueue/internal/connutil"
	"github.com/mcpqueue/mcpqueue/taskstate"
)

// Options are the flags shared by every binary. NATS and Redis are what
// the connectors take; Connect fills in the settings both share (Prefix,
// ToolRetention, RequireDurable, the logger).
type Options struct {
	Broker string // "nats" or "asynq"
	NATS   natsbackend.Options
	Redis  redisbackend.Options
	// AsynqQueues: see the flag (Redis.Priorities, parsed by Connect).
	// AsynqToolQueues is the removed --asynq-tool-queues, refused when set.
	AsynqQueues, AsynqToolQueues string
	// ToolRetention is how long a catalog entry is kept after its last
	// refresh (a pool at zero keeps its tools this long).
	ToolRetention  time.Duration
	Prefix         string // names streams, buckets and subjects, so systems can share a server
	RequireDurable bool   // refuse a backend that loses tasks on a restart
	LogLevel       string
	LogJSON        bool
	OTelExporter   string // none, stdout or otlp: see TracerProvider
}

// Flags registers the shared flags on fs, defaulting from the environment
// strictly (see Env): call ParseFlags (or CheckFlags after fs.Parse) to have
// a bad variable refuse to start.
func (o *Options) Flags(fs *flag.FlagSet) {
	e := EnvOf(fs)
	e.Choice(&o.Broker, "broker", "MCPQ_BROKER", "nats", "backend for queue, state and bus: nats or asynq", "nats", "asynq", "redis")
	e.String(&o.Redis.URL, "redis", "REDIS_URL", "redis://127.0.0.1:6379/0", "asynq backend: Redis URL: redis://, rediss:// (TLS), or redis+sentinel://[user:password@]host:port[,host:port…]/master[/db] (rediss+sentinel:// for TLS)")
	redisFlags(e, &o.Redis)
	e.Duration(&o.Redis.PollInterval, "asynq-poll", "MCPQ_ASYNQ_POLL", 100*time.Millisecond, "asynq backend: how often an idle worker asks Redis for jobs; the pickup latency at low load")
	e.Duration(&o.Redis.BusyPollInterval, "asynq-busy-poll", "MCPQ_ASYNQ_BUSY_POLL", 2*time.Millisecond, "asynq backend: how often a busy worker (one that took a job within the last second) asks Redis for jobs when its queue is empty; at least --asynq-poll turns this off")
	e.String(&o.AsynqQueues, "asynq-queues", "MCPQ_ASYNQ_QUEUES", "", "asynq backend: priorities of tools' own queues, tool=priority,… (priority 1 unless listed); a pool's queue, where jobs of a tool whose pool is known go, is one list in arrival order")
	e.String(&o.AsynqToolQueues, "asynq-tool-queues", "MCPQ_ASYNQ_TOOL_QUEUES", "", "asynq backend: removed (jobs go to the queue of their tool's pool, --pool of its workers); refused when set")
	e.Duration(&o.ToolRetention, "tool-retention", "MCPQ_TOOL_RETENTION", taskstate.DefaultToolRetention, "how long a tool stays in the catalog after its last worker's last heartbeat: a pool scaled to zero keeps its tools listed and callable (calls queue) this long; api tools rm removes one at once")
	e.String(&o.NATS.URL, "nats", "NATS_URL", "", "nats backend: NATS server URL (nats:// or tls://; several comma-separated)")
	natsAuthFlags(e, &o.NATS.Auth)
	e.String(&o.NATS.DataDir, "data-dir", "MCPQ_DATA_DIR", "data", "the all-in-one api's directory: its embedded NATS's store and key (nats.nk, generated on first start); a process given no NATS credentials joins a NATS on loopback with the key there")
	e.String(&o.Prefix, "prefix", "MCPQ_PREFIX", "mcpq", "name prefix for streams, buckets and subjects")
	e.Choice(&o.LogLevel, "log-level", "MCPQ_LOG_LEVEL", "info", "log level: debug, info, warn, error", "debug", "info", "warn", "error")
	e.Choice(&o.NATS.Storage, "nats-storage", "MCPQ_NATS_STORAGE", "file", "nats backend: storage of the job stream and the KV buckets: file, or memory (a NATS restart loses every task)", "file", "memory")
	e.Int(&o.NATS.Replicas, "nats-replicas", "MCPQ_NATS_REPLICAS", 1, "nats backend: replicas of the job stream and the KV buckets; 3 on a 3-node cluster survives the loss of a node")
	e.Bool(&o.RequireDurable, "require-durable", "MCPQ_REQUIRE_DURABLE", false, "refuse to start on a backend that loses tasks when it restarts: Redis without appendonly yes (or with an evicting maxmemory-policy), NATS with --nats-storage memory")
	e.Bool(&o.LogJSON, "log-json", "MCPQ_LOG_JSON", false, "log JSON lines instead of console text")
	e.Choice(&o.OTelExporter, "otel-exporter", "OTEL_TRACES_EXPORTER", "none", "where trace spans go: none, stdout (console), or otlp (OTLP/HTTP to OTEL_EXPORTER_OTLP_ENDPOINT, default http://localhost:4318)", "none", "stdout", "console", "otlp")
	fs.Var(versionFlag{fs}, "version", "print the version and source revision, and exit")
}

func natsAuthFlags(e *Env, a *natsbackend.Auth) {
	e.String(&a.Creds, "nats-creds", "MCPQ_NATS_CREDS", "", "nats backend: credentials file (user JWT and nkey seed, as nsc writes it) for a server in operator mode")
	e.String(&a.NKey, "nats-nkey", "MCPQ_NATS_NKEY", "", "nats backend: file holding an nkey seed (SU…) to authenticate with")
	e.String(&a.User, "nats-user", "MCPQ_NATS_USER", "", "nats backend: user name (with --nats-password)")
	e.String(&a.Password, "nats-password", "MCPQ_NATS_PASSWORD", "", "nats backend: password of --nats-user")
	e.String(&a.Token, "nats-token", "MCPQ_NATS_TOKEN", "", "nats backend: authentication token")
	e.String(&a.TLSCA, "nats-tls-ca", "MCPQ_NATS_TLS_CA", "", "nats backend: PEM file of the CA certificates that sign the server's certificate (default: the system's); turns TLS on")
	e.String(&a.TLSCert, "nats-tls-cert", "MCPQ_NATS_TLS_CERT", "", "nats backend: client certificate (PEM) for a server that verifies clients (with --nats-tls-key); turns TLS on")
	e.String(&a.TLSKey, "nats-tls-key", "MCPQ_NATS_TLS_KEY", "", "nats backend: private key (PEM) of --nats-tls-cert")
	e.Secret("nats-password", "nats-token")
}

func redisFlags(e *Env, r *redisbackend.Options) {
	e.List(&r.Sentinels, "redis-sentinels", "MCPQ_REDIS_SENTINELS", "asynq backend: Redis Sentinel addresses, host:port comma-separated; the primary named by --redis-master is found through them (--redis then gives user, password, database and rediss:// TLS, not the address)")
	e.String(&r.Master, "redis-master", "MCPQ_REDIS_MASTER", "", "asynq backend: the Sentinel master name of the primary (with --redis-sentinels)")
	e.String(&r.User, "redis-user", "MCPQ_REDIS_USER", "", "asynq backend: Redis ACL user (overrides the user of --redis)")
	e.String(&r.Password, "redis-password", "MCPQ_REDIS_PASSWORD", "", "asynq backend: Redis password (overrides the password of --redis)")
	e.String(&r.SentinelUser, "redis-sentinel-user", "MCPQ_REDIS_SENTINEL_USER", "", "asynq backend: ACL user for the Sentinels")
	e.String(&r.SentinelPassword, "redis-sentinel-password", "MCPQ_REDIS_SENTINEL_PASSWORD", "", "asynq backend: password of the Sentinels")
	e.String(&r.TLSCA, "redis-tls-ca", "MCPQ_REDIS_TLS_CA", "", "asynq backend: PEM file of the CA certificates that sign Redis's certificate (default: the system's); needs a rediss:// URL")
	e.String(&r.TLSCert, "redis-tls-cert", "MCPQ_REDIS_TLS_CERT", "", "asynq backend: client certificate (PEM) for a Redis with tls-auth-clients (with --redis-tls-key)")
	e.String(&r.TLSKey, "redis-tls-key", "MCPQ_REDIS_TLS_KEY", "", "asynq backend: private key (PEM) of --redis-tls-cert")
	e.Int(&r.WaitReplicas, "redis-wait-replicas", "MCPQ_REDIS_WAIT_REPLICAS", 0, "asynq backend: acknowledge a task only once its writes are on this many replicas (Redis WAIT), so a failover to a replica cannot lose it; 0: do not wait")
	e.Duration(&r.WaitTimeout, "redis-wait-timeout", "MCPQ_REDIS_WAIT_TIMEOUT", time.Second, "asynq backend: how long --redis-wait-replicas waits before the call fails")
	e.Secret("redis-password", "redis-sentinel-password")
}

// Logger builds the process logger.
func (o *Options) Logger(service string) zerolog.Logger {
	lvl, err := zerolog.ParseLevel(o.LogLevel)
	if err != nil {
		lvl = zerolog.InfoLevel
	}
	var out io.Writer = os.Stderr
	if !o.LogJSON {
		// Colours only for a person at a terminal: not in a log file, a pipe
		// or a container log, nor with NO_COLOR set (no-color.org).
		color := isTerminal(os.Stderr) && os.Getenv("NO_COLOR") == ""
		out = zerolog.ConsoleWriter{Out: os.Stderr, TimeFormat: time.RFC3339, NoColor: !color}
	}
	return zerolog.New(out).Level(lvl).With().Timestamp().Str("service", service).Logger()
}

// isTerminal reports whether f is a terminal (a character device).
func isTerminal(f *os.File) bool {
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

// IsRedis reports whether --broker names the Redis backend.
func (o *Options) IsRedis() bool { return o.Broker == "asynq" || o.Broker == "redis" }

// Connect connects the backend --broker names, as name.
func (o *Options) Connect(ctx context.Context, name string, log zerolog.Logger) (*backend.Backend, error) {
	switch o.Broker {
	case "nats", "":
		n := o.NATS
		n.Prefix, n.ToolRetention, n.RequireDurable, n.Logger = o.Prefix, o.ToolRetention, o.RequireDurable, log
		return natsbackend.Connect(ctx, name, &n)
	case "asynq", "redis":
		r, err := o.redisOptions()
		if err != nil {
			return nil, err
		}
		r.Logger = log
		return redisbackend.Connect(ctx, name, r)
	}
	return nil, fmt.Errorf("cli: unknown --broker %q (use nats or asynq)", o.Broker)
}

// redisOptions are the Redis options with the shared settings and
// --asynq-queues read: it weighs the tools' own queues
// (asynqbroker.QueueName; tool=priority).
func (o *Options) redisOptions() (*redisbackend.Options, error) {
	r := o.Redis
	r.Prefix, r.ToolRetention, r.RequireDurable = o.Prefix, o.ToolRetention, o.RequireDurable
	if o.AsynqToolQueues != "" {
		return nil, errors.New("cli: --asynq-tool-queues (MCPQ_ASYNQ_TOOL_QUEUES) was removed: jobs go to the queue of their tool's pool " +
			"(the workers' --pool), so give a slow tool a pool of its own; weigh tools' own queues with --asynq-queues tool=priority,…")
	}
	r.Priorities = nil
	for _, p := range SplitList(o.AsynqQueues) {
		k, v, ok := strings.Cut(p, "=")
		k, v = strings.TrimSpace(k), strings.TrimSpace(v)
		if !ok || k == "" || v == "" {
			return nil, fmt.Errorf("cli: --asynq-queues: %q is not tool=priority", p)
		}
		prio, err := strconv.Atoi(v)
		if err != nil || prio < 1 {
			return nil, fmt.Errorf("cli: --asynq-queues: priority of %q must be a positive integer, got %q", k, v)
		}
		if r.Priorities == nil {
			r.Priorities = map[string]int{}
		}
		r.Priorities[k] = prio
	}
	return &r, nil
}

// SplitList splits a comma-separated flag value, dropping blanks.
func SplitList(s string) []string { return connutil.SplitList(s) }

// AsynqConnOpt is the connection asynqmon needs for the same Redis: its
// clients are made exactly as Connect makes its own (Sentinel, TLS, ACL
// user included).
func (o *Options) AsynqConnOpt() (asynq.RedisConnOpt, error) {
	r := o.Redis
	c, err := redisbackend.NewClient("asynqmon", &r)
	if err != nil {
		return nil, err
	}
	_ = c.Close() // only the settings were to be checked
	return asynqConnOpt{&r}, nil
}

type asynqConnOpt struct{ o *redisbackend.Options }

func (a asynqConnOpt) MakeRedisClient() any {
	c, _ := redisbackend.NewClient("asynqmon", a.o) // checked by AsynqConnOpt
	return c
}
