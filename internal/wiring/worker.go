package wiring

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/rs/zerolog"

	"github.com/mcpqueue/mcpqueue/consumer"
	"github.com/mcpqueue/mcpqueue/telemetry"
)

// WorkerOptions are the flags of a worker process.
type WorkerOptions struct {
	Concurrency int
	Lease       time.Duration
	MaxAttempts int
	Grace       time.Duration
	// Admin is where a worker process (or the api: cmd/api/lifecycle.go)
	// serves /healthz, /readyz and /metrics ("": nowhere for a worker, the
	// public listener for the api).
	Admin string
	// Telemetry is handed to the workers NewWorker builds (not a flag).
	Telemetry *telemetry.Telemetry
}

// Flags registers the worker flags on fs, defaulting from the environment.
func (w *WorkerOptions) Flags(fs *flag.FlagSet) {
	fs.IntVar(&w.Concurrency, "concurrency", EnvInt("MCPQ_CONCURRENCY", 8), "handlers run at once (env MCPQ_CONCURRENCY)")
	fs.DurationVar(&w.Lease, "lease", EnvDuration("MCPQ_LEASE", 30*time.Second), "job lease; a crashed worker's job is redelivered after it (env MCPQ_LEASE)")
	fs.IntVar(&w.MaxAttempts, "max-attempts", EnvInt("MCPQ_MAX_ATTEMPTS", 3), "runs of a task before it is failed (env MCPQ_MAX_ATTEMPTS)")
	fs.DurationVar(&w.Grace, "shutdown-grace", EnvDuration("MCPQ_SHUTDOWN_GRACE", 25*time.Second), "time running handlers get to finish on SIGTERM (env MCPQ_SHUTDOWN_GRACE)")
	fs.StringVar(&w.Admin, "admin", os.Getenv("MCPQ_ADMIN"), "address for /healthz, /readyz and /metrics, e.g. 127.0.0.1:9091; empty: none (a worker serves none, the api serves them on --listen); the api then serves /metrics only there (env MCPQ_ADMIN)")
}

// NewWorker builds a consumer.Worker on b.
func (w *WorkerOptions) NewWorker(b *Backend, log zerolog.Logger) *consumer.Worker {
	return consumer.New(b.Queue, b.Store, b.Catalog, b.Bus, &consumer.Config{
		Concurrency:   w.Concurrency,
		Lease:         w.Lease,
		MaxAttempts:   w.MaxAttempts,
		ShutdownGrace: w.Grace,
		Logger:        log,
		Telemetry:     w.Telemetry,
	})
}

// WorkerMain is the whole main of a worker binary: flags, signals, connect,
// run mux until SIGINT/SIGTERM, drain.
func WorkerMain(name string, register func(*consumer.Mux)) {
	fs := flag.NewFlagSet(name, flag.ExitOnError)
	var opts Options
	var wo WorkerOptions
	opts.Flags(fs)
	wo.Flags(fs)
	_ = fs.Parse(os.Args[1:])
	log := opts.Logger(name)

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := runWorker(ctx, name, &opts, &wo, register, log); err != nil {
		log.Error().Err(err).Msg("worker failed")
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

func runWorker(ctx context.Context, name string, opts *Options, wo *WorkerOptions, register func(*consumer.Mux), log zerolog.Logger) error {
	cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	b, err := opts.Connect(cctx, name, log)
	cancel()
	if err != nil {
		return err
	}
	defer b.Close()
	mux := consumer.NewMux()
	register(mux)

	tp, flush, err := opts.TracerProvider(ctx, name)
	if err != nil {
		return err
	}
	defer FlushSpans(flush, log)
	reg := NewRegistry()
	wo.Telemetry = telemetry.New(&telemetry.Config{Registerer: reg, TracerProvider: tp})
	wo.Telemetry.WatchQueue(b.Queue)
	w := wo.NewWorker(b, log)
	if wo.Admin != "" {
		running := telemetry.Check{Name: "worker", Fn: func(context.Context) error {
			select {
			case <-w.Ready():
				return nil
			default:
				return errors.New("not pulling jobs yet")
			}
		}}
		stop, err := serveAdmin(wo.Admin, AdminMux(reg, append(b.Checks(), running)...), log)
		if err != nil {
			return err
		}
		defer stop()
	}
	return w.Run(ctx, mux)
}

// serveAdmin serves h on addr until stop is called.
func serveAdmin(addr string, h http.Handler, log zerolog.Logger) (stop func(), err error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("wiring: --admin %s: %w", addr, err)
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	log.Info().Str("url", "http://"+ln.Addr().String()).Msg("admin listening (/healthz, /readyz, /metrics)")
	return func() { _ = srv.Close() }, nil
}

// FlushSpans sends the spans still buffered, within a bound.
func FlushSpans(flush func(context.Context) error, log zerolog.Logger) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := flush(ctx); err != nil {
		log.Warn().Err(err).Msg("flushing trace spans")
	}
}
