package worker_test

import (
	"context"
	"log"
	"log/slog"
	"strings"

	"github.com/mcpqueue/mcpqueue/backend/natsbackend"
	"github.com/mcpqueue/mcpqueue/consumer"
	"github.com/mcpqueue/mcpqueue/worker"
)

type CountArgs struct {
	Text string `json:"text" jsonschema:"the text to count the words of"`
}

type Count struct {
	Words int `json:"words"`
}

// The whole main of a worker binary: it takes the flags and environment of
// cmd/worker (--nats, --broker, --prefix, --concurrency, --tools, …) and
// serves word_count until SIGINT or SIGTERM.
func ExampleMain() {
	worker.Main("word-count", func(ctx context.Context, mux *consumer.Mux) error {
		consumer.Handle(mux, consumer.Tool{Name: "word_count", Description: "Counts the words of a text."},
			func(ctx context.Context, c *consumer.Call[CountArgs]) (Count, error) {
				return Count{Words: len(strings.Fields(c.Args.Text))}, nil
			})
		return nil
	})
}

// A register function that only adds handlers, as a RegisterFunc.
func ExampleStatic() {
	register := func(mux *consumer.Mux) {
		consumer.Handle(mux, consumer.Tool{Name: "word_count"},
			func(ctx context.Context, c *consumer.Call[CountArgs]) (Count, error) {
				return Count{Words: len(strings.Fields(c.Args.Text))}, nil
			})
	}
	worker.Main("word-count", worker.Static(register))
}

// A worker that connects by itself: a Backend from values, then Run, its
// log lines in slog. (redisbackend.Connect is the Redis one.)
func ExampleRun() {
	ctx := context.Background()
	b, err := natsbackend.Connect(ctx, "word-count", &natsbackend.Options{URL: "nats://127.0.0.1:4222", Prefix: "mcpq"})
	if err != nil {
		log.Fatal(err)
	}
	defer b.Close()
	opts := &worker.Options{Tools: []string{"word_count"}}
	opts.Concurrency = 8
	opts.Slog = slog.Default()
	err = worker.Run(ctx, b, opts, worker.Static(func(mux *consumer.Mux) {
		consumer.Handle(mux, consumer.Tool{Name: "word_count"},
			func(ctx context.Context, c *consumer.Call[CountArgs]) (Count, error) {
				return Count{Words: len(strings.Fields(c.Args.Text))}, nil
			})
	}))
	if err != nil {
		log.Fatal(err)
	}
}
