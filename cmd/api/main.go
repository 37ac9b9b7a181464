// Command api is the MCP front end. With no flags it runs all-in-one: an
// embedded NATS server (JetStream, file storage under --data-dir) that also
// listens on --nats-listen so separate workers can join, plus an in-process
// worker running the example tools. With --nats it uses that NATS and runs no
// handlers itself.
//
//	go run ./cmd/api                                  # all-in-one on 127.0.0.1:8080
//	go run ./cmd/api --nats nats://nats:4222 --listen :8080
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"

	"github.com/hibiken/asynqmon"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/rs/zerolog"

	"github.com/mcpqueue/mcpqueue/consumer"
	"github.com/mcpqueue/mcpqueue/examples/demo"
	"github.com/mcpqueue/mcpqueue/internal/wiring"
	"github.com/mcpqueue/mcpqueue/mcpfront"
	"github.com/mcpqueue/mcpqueue/producer"
)

type config struct {
	wiring.Options
	worker           wiring.WorkerOptions
	listen           string
	natsListen       string
	dataDir          string
	syncTimeout      time.Duration
	taskTTL          time.Duration
	allowedHosts     string
	allowedOrigins   string
	asynqmon         bool
	asynqmonReadOnly bool
}

func main() {
	var c config
	fs := flag.NewFlagSet("api", flag.ExitOnError)
	c.Options.Flags(fs)
	c.worker.Flags(fs)
	fs.StringVar(&c.listen, "listen", envOr("MCPQ_LISTEN", "127.0.0.1:8080"), "HTTP listen address for /mcp and /healthz (env MCPQ_LISTEN)")
	fs.StringVar(&c.natsListen, "nats-listen", envOr("MCPQ_NATS_LISTEN", "127.0.0.1:4250"), "all-in-one: where the embedded NATS listens for workers (env MCPQ_NATS_LISTEN)")
	fs.StringVar(&c.dataDir, "data-dir", envOr("MCPQ_DATA_DIR", "data"), "all-in-one: embedded NATS storage directory (env MCPQ_DATA_DIR)")
	fs.DurationVar(&c.syncTimeout, "sync-timeout", wiring.EnvDuration("MCPQ_SYNC_TIMEOUT", 2*time.Minute), "how long a call from a client without task support waits for its result (env MCPQ_SYNC_TIMEOUT)")
	fs.DurationVar(&c.taskTTL, "task-ttl", wiring.EnvDuration("MCPQ_TASK_TTL", time.Hour), "how long a finished task is kept (env MCPQ_TASK_TTL)")
	fs.StringVar(&c.allowedHosts, "allowed-hosts", os.Getenv("MCPQ_ALLOWED_HOSTS"), "comma-separated Host names accepted besides loopback (env MCPQ_ALLOWED_HOSTS)")
	fs.StringVar(&c.allowedOrigins, "allowed-origins", os.Getenv("MCPQ_ALLOWED_ORIGINS"), "comma-separated Origins accepted besides loopback (env MCPQ_ALLOWED_ORIGINS)")
	fs.BoolVar(&c.asynqmon, "asynqmon", os.Getenv("MCPQ_ASYNQMON") == "1", "asynq backend: serve the asynqmon queue dashboard at /asynqmon/ (env MCPQ_ASYNQMON=1); it has no auth of its own: only enable it behind your network controls")
	fs.BoolVar(&c.asynqmonReadOnly, "asynqmon-read-only", os.Getenv("MCPQ_ASYNQMON_READ_ONLY") == "1", "asynqmon: view only, no deleting or retrying from the UI (env MCPQ_ASYNQMON_READ_ONLY=1)")
	_ = fs.Parse(os.Args[1:])

	log := c.Logger("api")
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, &c, log); err != nil {
		log.Error().Err(err).Msg("api failed")
		fmt.Fprintln(os.Stderr, "api:", err)
		os.Exit(1)
	}
}

func envOr(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}

func run(ctx context.Context, c *config, log zerolog.Logger) error {
	allInOne := c.NATSURL == "" && (c.Broker == "nats" || c.Broker == "")
	if allInOne {
		ns, url, err := wiring.EmbeddedNATS(c.dataDir, c.natsListen, log)
		if err != nil {
			return err
		}
		defer ns.Shutdown()
		c.NATSURL = url
	}
	cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	b, err := c.Connect(cctx, "api", log)
	cancel()
	if err != nil {
		return err
	}
	defer b.Close()

	var wg sync.WaitGroup
	if allInOne {
		mux := consumer.NewMux()
		demo.Register(mux)
		w := c.worker.NewWorker(b, log.With().Str("service", "worker").Logger())
		wg.Add(1)
		runErr := make(chan error, 1)
		go func() {
			defer wg.Done()
			err := w.Run(ctx, mux)
			if err != nil {
				log.Error().Err(err).Msg("in-process worker stopped")
			}
			runErr <- err
		}()
		// Serve only once the example tools are in the catalog.
		select {
		case <-w.Ready():
		case err := <-runErr:
			return fmt.Errorf("in-process worker: %w", err)
		case <-ctx.Done():
			wg.Wait()
			return nil
		}
	}

	prod := producer.New(b.Store, producer.QueueExecutor{Queue: b.Queue, Bus: b.Bus}, &producer.Config{TTL: c.taskTTL, Logger: log})
	hosts := wiring.SplitList(c.allowedHosts)
	if h, _, err := net.SplitHostPort(c.listen); err == nil && h != "" {
		hosts = append(hosts, h)
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	front := mcpfront.New(prod, b.Store, b.Catalog, b.Bus, &mcpfront.Config{
		Metrics:        reg,
		StateKey:       []byte(os.Getenv("MCPQ_STATE_KEY")),
		AllowedHosts:   hosts,
		AllowedOrigins: wiring.SplitList(c.allowedOrigins),
		SyncTimeout:    c.syncTimeout,
		Logger:         log,
	})
	mux := http.NewServeMux()
	mux.Handle("/mcp", front)
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok\n")) })
	if c.asynqmon {
		if c.Broker != "asynq" {
			return fmt.Errorf("--asynqmon needs --broker asynq")
		}
		opt, err := c.AsynqConnOpt()
		if err != nil {
			return err
		}
		mon := asynqmon.New(asynqmon.Options{RootPath: "/asynqmon", RedisConnOpt: opt, ReadOnly: c.asynqmonReadOnly})
		defer mon.Close()
		mux.Handle("/asynqmon/", mon)
		log.Info().Str("url", "http://"+c.listen+"/asynqmon/").Bool("read_only", c.asynqmonReadOnly).Msg("asynqmon mounted")
	}

	ln, err := net.Listen("tcp", c.listen)
	if err != nil {
		return fmt.Errorf("listen %s: %w", c.listen, err)
	}
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	log.Info().Str("url", "http://"+ln.Addr().String()+"/mcp").Bool("all_in_one", allInOne).Str("broker", c.Broker).Msg("api listening")
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()

	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	log.Info().Msg("shutting down")
	sctx, scancel := context.WithTimeout(context.Background(), c.worker.Grace+5*time.Second)
	defer scancel()
	if err := srv.Shutdown(sctx); err != nil && !errors.Is(err, http.ErrServerClosed) {
		log.Warn().Err(err).Msg("http shutdown")
	}
	wg.Wait()
	return nil
}
