package main

import (
	"context"
	"log"
	"log/slog"
	"os"
	"os/signal"

	"github.com/mcpqueue/mcpqueue/backend/natsbackend"
	"github.com/mcpqueue/mcpqueue/worker"
)

// A worker that connects by itself instead of from flags: natsbackend (or
// redisbackend) from values, worker.Run on the Backend, logs to slog. It
// derives every name from Prefix as api does.
func Example_run() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	b, err := natsbackend.Connect(ctx, "word-count", &natsbackend.Options{
		URL:     "nats://127.0.0.1:4250",
		DataDir: "../../data", // next to the all-in-one api: its key
		Prefix:  "mcpq",
	})
	if err != nil {
		log.Fatal(err)
	}
	defer b.Close()
	opts := &worker.Options{}
	opts.Concurrency = 8
	opts.Slog = slog.New(slog.NewJSONHandler(os.Stderr, nil))
	if err := worker.Run(ctx, b, opts, register); err != nil {
		log.Fatal(err)
	}
}
