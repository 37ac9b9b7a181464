package wiring

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/rs/zerolog"

	"github.com/mcpqueue/mcpqueue/consumer"
)

// WorkerOptions are the flags of a worker process.
type WorkerOptions struct {
	Concurrency int
	Lease       time.Duration
	MaxAttempts int
	Grace       time.Duration
}

// Flags registers the worker flags on fs, defaulting from the environment.
func (w *WorkerOptions) Flags(fs *flag.FlagSet) {
	fs.IntVar(&w.Concurrency, "concurrency", EnvInt("MCPQ_CONCURRENCY", 8), "handlers run at once (env MCPQ_CONCURRENCY)")
	fs.DurationVar(&w.Lease, "lease", EnvDuration("MCPQ_LEASE", 30*time.Second), "job lease; a crashed worker's job is redelivered after it (env MCPQ_LEASE)")
	fs.IntVar(&w.MaxAttempts, "max-attempts", EnvInt("MCPQ_MAX_ATTEMPTS", 3), "runs of a task before it is failed (env MCPQ_MAX_ATTEMPTS)")
	fs.DurationVar(&w.Grace, "shutdown-grace", EnvDuration("MCPQ_SHUTDOWN_GRACE", 25*time.Second), "time running handlers get to finish on SIGTERM (env MCPQ_SHUTDOWN_GRACE)")
}

// NewWorker builds a consumer.Worker on b.
func (w *WorkerOptions) NewWorker(b *Backend, log zerolog.Logger) *consumer.Worker {
	return consumer.New(b.Queue, b.Store, b.Catalog, b.Bus, &consumer.Config{
		Concurrency:   w.Concurrency,
		Lease:         w.Lease,
		MaxAttempts:   w.MaxAttempts,
		ShutdownGrace: w.Grace,
		Logger:        log,
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
	return wo.NewWorker(b, log).Run(ctx, mux)
}
