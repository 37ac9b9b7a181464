package worker

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"math"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/rs/zerolog"
	"go.opentelemetry.io/otel"

	"github.com/mcpqueue/mcpqueue/backend"
	"github.com/mcpqueue/mcpqueue/bridge"
	"github.com/mcpqueue/mcpqueue/consumer"
	"github.com/mcpqueue/mcpqueue/internal/cli"
	"github.com/mcpqueue/mcpqueue/internal/slogzero"
	"github.com/mcpqueue/mcpqueue/telemetry"
)

// Options are the settings of a worker process: the consumer.Config of its
// worker (each setting under its one name there) and what the process adds
// around it. The zero value takes the defaults of consumer.Config.
type Options struct {
	consumer.Config
	// Admin is where a worker process (or the api: cmd/api/lifecycle.go)
	// serves /healthz, /readyz and /metrics ("": nowhere for a worker, the
	// public listener for the api).
	Admin string
	// Tools narrows the worker to these of the tools it registers (names;
	// "prompt/<name>" for a prompt); none: all of them. A pool of workers
	// built from one binary can so serve part of its tools, e.g. a GPU pool
	// the one tool that needs a GPU.
	Tools []string
	// MCPStdio, MCPURL and MCPConfig name MCP servers whose tools and
	// prompts the worker relays (--mcp-stdio command lines, --mcp-url
	// Streamable-HTTP endpoints, an --mcp-config file; see package bridge).
	MCPStdio  []string
	MCPURL    []string
	MCPConfig string

	rateLimits []string // --tool-rate-limit, parsed into Config.RateLimits by Check (rate.go)
}

// Flags registers the worker flags on fs, defaulting from the environment
// strictly (each flag names its variable in -h).
func (w *Options) Flags(fs *flag.FlagSet) {
	e := cli.EnvOf(fs)
	e.Int(&w.Concurrency, "concurrency", "MCPQ_CONCURRENCY", 8, "handlers run at once")
	e.Duration(&w.Lease, "lease", "MCPQ_LEASE", 30*time.Second, "job lease of the tools that set none; a crashed worker's job is redelivered after it")
	e.Int(&w.MaxAttempts, "max-attempts", "MCPQ_MAX_ATTEMPTS", 3, "runs of a task before it is failed, for the tools that set none")
	e.Duration(&w.ShutdownGrace, "shutdown-grace", "MCPQ_SHUTDOWN_GRACE", 25*time.Second, "time running handlers get to finish on SIGTERM")
	e.Duration(&w.ParkAfter, "park-after", "MCPQ_PARK_AFTER", 3*time.Second, "how long a task's run waits for its client's answers before it parks: the run ends and frees its slot, the task waits input_required, and the last answer runs the handler again on any worker; negative: never park")
	e.Duration(&w.InputTimeout, "input-timeout", "MCPQ_INPUT_TIMEOUT", 30*time.Minute, "how long a task waits for its client's answers, parked or not, before it fails saying so")
	e.Int(&w.MaxWaitingInput, "max-waiting-input", "MCPQ_MAX_WAITING_INPUT", 100, "tasks one principal may have waiting for input; a task that would park past it fails with an error saying so; negative: no bound")
	e.Float64(&w.TenantShare, "tenant-share", "MCPQ_TENANT_SHARE", 0.75, "share of --concurrency the principals of one tenant (the --auth-tenant-claim of task owners; owners without one form one tenant) may hold at once; past it the worker defers the tenant's next job for a second so other tenants' jobs get the slots; below 1 it leaves other tenants at least one slot; 1: no share")
	e.Float64(&w.PrincipalShare, "principal-share", "MCPQ_PRINCIPAL_SHARE", 0.25, "share of its tenant's slots (--tenant-share) one principal (task owner, with authentication on) may hold at once; past it the worker defers the principal's next job for a second so others' jobs get the slots; below 1 it leaves the tenant's other principals at least one slot; 1: no share")
	e.Int64(&w.MaxResult, "max-result", "MCPQ_MAX_RESULT", consumer.DefaultMaxResult, "largest result of a task in bytes; a larger one fails the task at once, saying so (results over 256 KiB are kept out of the record, in the store's blobs)")
	e.String(&w.Admin, "admin", "MCPQ_ADMIN", "", "address for /healthz, /readyz and /metrics, e.g. 127.0.0.1:9091; empty: none (a worker serves none, the api serves them on --listen); the api then serves /metrics only there")
	e.List(&w.Tools, "tools", "MCPQ_TOOLS", "serve only these of the registered tools, comma-separated (prompt/<name> for a prompt); default all")
	e.String(&w.Pool, "pool", "MCPQ_POOL", "default", "the pool this worker belongs to (letters, digits, _ and -): its tools are published with it, and on Asynq their jobs go to the pool's one queue, <prefix>.pool.<pool>, which the worker takes jobs from")
	w.bridgeFlags(fs, e)
	w.rateFlag(e) // feature: rate limits per tool
}

// RegisterFunc adds a worker's tools (and prompts, resources, completions)
// to mux. ctx ends when the worker stops: what the function starts with it
// (a relay to an MCP server, gosdk.Serve) ends with the worker. An error
// stops the worker before it takes any job.
type RegisterFunc func(ctx context.Context, mux *consumer.Mux) error

// Static is a RegisterFunc of a register function that starts nothing and
// cannot fail (consumer.Handle calls only).
func Static(register func(*consumer.Mux)) RegisterFunc {
	return func(_ context.Context, mux *consumer.Mux) error {
		register(mux)
		return nil
	}
}

// Main is the whole main of a worker binary: it parses the flags (and their
// environment variables) from os.Args, connects the backend, runs the tools
// register adds until SIGINT or SIGTERM, drains, and exits: status 1 with the
// reason on standard error when it cannot start or run, 2 for bad flags or
// environment variables or any word that is not a flag, in one line;
// --print-config prints the settings and exits 0.
func Main(name string, register RegisterFunc) {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	var opts cli.Options
	var wo Options
	opts.Flags(fs)
	wo.Flags(fs)
	cli.ParseFlagsOrExit(fs, os.Args[1:])
	if fs.NArg() > 0 { // a typo must not start a worker
		fmt.Fprintf(os.Stderr, "%s: unexpected argument %q: a worker takes flags only (%s -h lists them)\n", name, fs.Arg(0), name)
		os.Exit(2)
	}
	log := opts.Logger(name)
	wo.Logger = log

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := runFlags(ctx, name, &opts, &wo, register); err != nil {
		log.Error().Err(err).Msg("worker failed")
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

// runFlags is Main after the flags: the tools first (a register error
// stops the worker before it connects), then the backend and tracing the
// flags describe.
func runFlags(ctx context.Context, name string, opts *cli.Options, wo *Options, register RegisterFunc) error {
	mux, relays, err := wo.tools(ctx, register)
	if err != nil {
		return err
	}
	defer relays.Close()
	cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	b, err := opts.Connect(cctx, name, wo.Logger)
	cancel()
	if err != nil {
		return err
	}
	defer b.Close()
	tp, flush, err := opts.TracerProvider(ctx, name)
	if err != nil {
		return err
	}
	defer cli.FlushSpans(flush, wo.Logger)
	cli.SetGlobalTracing(tp) // handlers' own spans join the task's trace
	return wo.serve(ctx, b, mux)
}

// Run is Main without flags, signals and connecting: it runs the tools
// register adds on b until ctx ends, drains and returns; the caller
// connected b (natsbackend.Connect, redisbackend.Connect) and closes it.
// opts may be nil. Telemetry the caller set in opts.Telemetry is used as
// it is; without, Run makes the process's own: metrics on opts.Admin,
// spans from the global OpenTelemetry tracer provider.
func Run(ctx context.Context, b *backend.Backend, opts *Options, register RegisterFunc) error {
	if opts == nil {
		opts = &Options{}
	}
	mux, relays, err := opts.tools(ctx, register)
	if err != nil {
		return err
	}
	defer relays.Close()
	return opts.serve(ctx, b, mux)
}

// tools checks the settings and builds the mux: register's tools, the
// relayed MCP servers' (--mcp-stdio, --mcp-config), narrowed to --tools.
func (w *Options) tools(ctx context.Context, register RegisterFunc) (*consumer.Mux, bridge.Relays, error) {
	if err := w.Check(); err != nil {
		return nil, nil, err
	}
	mux := consumer.NewMux()
	if err := register(ctx, mux); err != nil {
		return nil, nil, fmt.Errorf("worker: registering the tools: %w", err)
	}
	relays, err := w.startRelays(ctx, mux, w.log())
	if err != nil {
		return nil, nil, err
	}
	if len(w.Tools) > 0 {
		if mux, err = mux.Only(w.Tools...); err != nil {
			_ = relays.Close()
			return nil, nil, fmt.Errorf("worker: --tools: %w", err)
		}
	}
	return mux, relays, nil
}

// log is the logger of w's settings (Slog when set).
func (w *Options) log() zerolog.Logger { return slogzero.Logger(w.Logger, w.Slog) }

// serve runs mux on b: the worker, its queue gauges and, with Admin, the
// admin endpoints.
func (w *Options) serve(ctx context.Context, b *backend.Backend, mux *consumer.Mux) error {
	cfg := w.Config
	cfg.Logger, cfg.Slog = w.log(), nil
	reg := cli.NewRegistry()
	if cfg.Telemetry == nil {
		cfg.Telemetry = cli.Telemetry(b, reg, otel.GetTracerProvider())
	}
	cfg.Telemetry.WatchQueue(cli.QueueDepth(b), func(context.Context) ([]string, error) {
		keys := []string{} // the tools served now: relayed ones come and go
		for _, t := range mux.Tools() {
			keys = append(keys, t.Key())
		}
		return keys, nil
	})
	wk := consumer.New(*b, &cfg)
	if w.Admin != "" {
		running := telemetry.Check{Name: "worker", Fn: func(context.Context) error {
			select {
			case <-wk.Ready():
				return nil
			default:
				return errors.New("not pulling jobs yet")
			}
		}}
		stop, err := serveAdmin(w.Admin, cli.AdminMux(reg, append(cli.Checks(b), running)...), cfg.Logger)
		if err != nil {
			return err
		}
		defer stop()
	}
	return wk.Run(ctx, mux)
}

// Check refuses settings no worker can run with: a negative (or
// not-a-number) --tenant-share or --principal-share (0 takes the default,
// like every zero option), or a --tool-rate-limit that does not parse (it fills
// in Config.RateLimits). Run calls it; so does a process that builds a
// worker with New.
func (w *Options) Check() error {
	for flag, v := range map[string]float64{"--tenant-share": w.TenantShare, "--principal-share": w.PrincipalShare} {
		if v < 0 || math.IsNaN(v) {
			return fmt.Errorf("worker: %s %v: a share is a fraction of the slots above 0 (e.g. 0.5; 1 or more: no share)", flag, v)
		}
	}
	return w.checkRates() // feature: rate limits per tool
}

// serveAdmin serves h on addr until stop is called.
func serveAdmin(addr string, h http.Handler, log zerolog.Logger) (stop func(), err error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("worker: --admin %s: %w", addr, err)
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	log.Info().Str("url", "http://"+ln.Addr().String()).Msg("admin listening (/healthz, /readyz, /metrics)")
	return func() { _ = srv.Close() }, nil
}
