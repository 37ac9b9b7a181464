// Package backend connects a process to its broker. From flags and
// environment variables (Options.Flags) or an Options value, Options.Connect
// opens NATS or Redis and returns a Backend: the job queue, the bus, the task
// store and the tool catalog that api and workers run on, with every stream,
// bucket, queue and subject name derived from --prefix. It is the one place
// besides tests that names the implementations (natsbroker, natskv,
// asynqbroker, redisstate); cmd/api, cmd/worker, package worker and the
// example workers call it.
package backend

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"

	"github.com/mcpqueue/mcpqueue/broker"
	"github.com/mcpqueue/mcpqueue/broker/natsbroker"
	"github.com/mcpqueue/mcpqueue/taskstate"
	"github.com/mcpqueue/mcpqueue/taskstate/natskv"
)

// Backend is the three seams, connected.
type Backend struct {
	Queue   broker.Queue
	Bus     broker.Bus
	Store   taskstate.Store
	Catalog taskstate.Catalog
	close   []func()
	// The messaging.system of the broker, and where a route's jobs go
	// (messaging.destination.name), for the spans.
	system      string
	destination func(route string) string
}

// Close releases connections in reverse order of opening.
func (b *Backend) Close() {
	for i := len(b.close) - 1; i >= 0; i-- {
		b.close[i]()
	}
}

// Options are the flags shared by every binary.
type Options struct {
	Broker   string // "nats" or "asynq"
	RedisURL string
	NATSURL  string
	// NATSAuth is how to authenticate to NATS and secure the connection;
	// Redis how to reach Redis besides RedisURL (Sentinel, ACL, TLS).
	NATSAuth NATSAuth
	Redis    RedisConn
	// DataDir is where the all-in-one api keeps its embedded NATS (store
	// and key, internal/embednats). A process given no NATS credentials
	// whose NATS URL is on loopback authenticates with the key there, if
	// the file exists.
	DataDir string
	// AsynqPoll is how often idle asynq consumers look for jobs,
	// AsynqBusyPoll how often busy ones do (asynqbroker "Busy and idle").
	AsynqPoll, AsynqBusyPoll time.Duration
	// AsynqQueues: see the flag. AsynqToolQueues is the removed
	// --asynq-tool-queues, refused when set.
	AsynqQueues, AsynqToolQueues string
	// ToolRetention is how long a catalog entry is kept after its last
	// refresh (a pool at zero keeps its tools this long).
	ToolRetention time.Duration
	Prefix        string // names streams, buckets and subjects, so systems can share a server
	LogLevel      string
	LogJSON       bool

	// Durability (docs/durability.md). NATSStorage is "file" or "memory"
	// for the job stream and the KV buckets; NATSReplicas their replica
	// count; RequireDurable refuses to start on a backend that loses tasks
	// on a restart.
	NATSStorage    string
	NATSReplicas   int
	RequireDurable bool
	OTelExporter   string // none, stdout or otlp: see TracerProvider
}

// Flags registers the shared flags on fs, defaulting from the environment
// strictly (see Env): call ParseFlags (or CheckFlags after fs.Parse) to have
// a bad variable refuse to start.
func (o *Options) Flags(fs *flag.FlagSet) {
	e := EnvOf(fs)
	e.Choice(&o.Broker, "broker", "MCPQ_BROKER", "nats", "backend for queue, state and bus: nats or asynq", "nats", "asynq", "redis")
	e.String(&o.RedisURL, "redis", "REDIS_URL", "redis://127.0.0.1:6379/0", "asynq backend: Redis URL: redis://, rediss:// (TLS), or redis+sentinel://[user:password@]host:port[,host:port…]/master[/db] (rediss+sentinel:// for TLS)")
	o.Redis.flags(e)
	e.Duration(&o.AsynqPoll, "asynq-poll", "MCPQ_ASYNQ_POLL", 100*time.Millisecond, "asynq backend: how often an idle worker asks Redis for jobs; the pickup latency at low load")
	e.Duration(&o.AsynqBusyPoll, "asynq-busy-poll", "MCPQ_ASYNQ_BUSY_POLL", 2*time.Millisecond, "asynq backend: how often a busy worker (one that took a job within the last second) asks Redis for jobs when its queue is empty; at least --asynq-poll turns this off")
	e.String(&o.AsynqQueues, "asynq-queues", "MCPQ_ASYNQ_QUEUES", "", "asynq backend: priorities of tools' own queues, tool=priority,… (priority 1 unless listed); a pool's queue, where jobs of a tool whose pool is known go, is one list in arrival order")
	e.String(&o.AsynqToolQueues, "asynq-tool-queues", "MCPQ_ASYNQ_TOOL_QUEUES", "", "asynq backend: removed (jobs go to the queue of their tool's pool, --pool of its workers); refused when set")
	e.Duration(&o.ToolRetention, "tool-retention", "MCPQ_TOOL_RETENTION", taskstate.DefaultToolRetention, "how long a tool stays in the catalog after its last worker's last heartbeat: a pool scaled to zero keeps its tools listed and callable (calls queue) this long; api tools rm removes one at once")
	e.String(&o.NATSURL, "nats", "NATS_URL", "", "nats backend: NATS server URL (nats:// or tls://; several comma-separated)")
	o.NATSAuth.flags(e)
	e.String(&o.DataDir, "data-dir", "MCPQ_DATA_DIR", "data", "the all-in-one api's directory: its embedded NATS's store and key (nats.nk, generated on first start); a process given no NATS credentials joins a NATS on loopback with the key there")
	e.String(&o.Prefix, "prefix", "MCPQ_PREFIX", "mcpq", "name prefix for streams, buckets and subjects")
	e.Choice(&o.LogLevel, "log-level", "MCPQ_LOG_LEVEL", "info", "log level: debug, info, warn, error", "debug", "info", "warn", "error")
	e.Choice(&o.NATSStorage, "nats-storage", "MCPQ_NATS_STORAGE", "file", "nats backend: storage of the job stream and the KV buckets: file, or memory (a NATS restart loses every task)", "file", "memory")
	e.Int(&o.NATSReplicas, "nats-replicas", "MCPQ_NATS_REPLICAS", 1, "nats backend: replicas of the job stream and the KV buckets; 3 on a 3-node cluster survives the loss of a node")
	e.Bool(&o.RequireDurable, "require-durable", "MCPQ_REQUIRE_DURABLE", false, "refuse to start on a backend that loses tasks when it restarts: Redis without appendonly yes (or with an evicting maxmemory-policy), NATS with --nats-storage memory")
	e.Bool(&o.LogJSON, "log-json", "MCPQ_LOG_JSON", false, "log JSON lines instead of console text")
	e.Choice(&o.OTelExporter, "otel-exporter", "OTEL_TRACES_EXPORTER", "none", "where trace spans go: none, stdout (console), or otlp (OTLP/HTTP to OTEL_EXPORTER_OTLP_ENDPOINT, default http://localhost:4318)", "none", "stdout", "console", "otlp")
	fs.Var(versionFlag{fs}, "version", "print the version and source revision, and exit")
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

// Connect sets up the seams on the chosen backend.
func (o *Options) Connect(ctx context.Context, name string, log zerolog.Logger) (*Backend, error) {
	switch o.Broker {
	case "nats", "":
		return o.ConnectNATS(ctx, name, log)
	case "asynq", "redis":
		return o.ConnectRedis(ctx, name, log)
	}
	return nil, fmt.Errorf("backend: unknown --broker %q (use nats or asynq)", o.Broker)
}

// ConnectNATS connects to url and sets up the NATS seams.
func (o *Options) ConnectNATS(ctx context.Context, name string, log zerolog.Logger) (*Backend, error) {
	if o.NATSURL == "" {
		return nil, errors.New("backend: no NATS URL (use --nats or NATS_URL)")
	}
	memory, err := o.natsDurability()
	if err != nil {
		return nil, err
	}
	nc, err := o.connectNATS(ctx, name, log)
	if err != nil {
		return nil, err
	}
	b := &Backend{close: []func(){func() { drainNATS(nc) }}}
	js, err := jetstream.New(nc)
	if err != nil {
		b.Close()
		return nil, err
	}
	bcfg := o.brokerConfig()
	bcfg.Memory, bcfg.Replicas = memory, o.NATSReplicas
	q, err := natsbroker.NewQueue(ctx, js, bcfg)
	if err != nil {
		b.Close()
		return nil, storageHint(err)
	}
	st, err := natskv.New(ctx, js, &natskv.Config{Prefix: o.Prefix, ToolRetention: o.ToolRetention, Memory: memory, Replicas: o.NATSReplicas})
	if err != nil {
		b.Close()
		return nil, storageHint(err)
	}
	log.Info().Str("storage", o.NATSStorage).Int("replicas", o.NATSReplicas).Msg("NATS job stream and buckets ready")
	b.close = append(b.close, func() { _ = st.Close() })
	b.Queue, b.Bus, b.Store, b.Catalog = q, natsbroker.NewBus(nc, o.brokerConfig()), st, st
	subject := q.Names().Subject
	b.system, b.destination = "nats", func(route string) string { return subject + "." + natsbroker.Token(route) }
	return b, nil
}

func (o *Options) brokerConfig() *natsbroker.Config {
	return &natsbroker.Config{Prefix: o.Prefix}
}
