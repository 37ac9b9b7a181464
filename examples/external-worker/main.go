// Command external-worker is a worker in a module of its own: it requires
// github.com/mcpqueue/mcpqueue like any user's module would and serves one
// tool, word_count, to every api on the same backend and --prefix.
//
//	go run . --nats nats://127.0.0.1:4250 --data-dir ../../data   # next to the all-in-one api (its key)
//	go run . --broker asynq --redis redis://127.0.0.1:6379/0
package main

import (
	"context"
	"strings"

	"github.com/mcpqueue/mcpqueue/consumer"
	"github.com/mcpqueue/mcpqueue/worker"
)

// CountArgs are the tool's arguments; the input schema is inferred from
// them and enforced by the api before anything is queued.
type CountArgs struct {
	Text string `json:"text" jsonschema:"the text to count the words of"`
}

// Count is the tool's result (structuredContent, with a JSON text copy).
type Count struct {
	Words int `json:"words"`
}

func register(ctx context.Context, mux *consumer.Mux) error {
	consumer.Handle(mux, consumer.Tool{
		Name:        "word_count",
		Description: "Counts the words of a text.",
		TaskSupport: consumer.TaskOptional, // a task when the client supports tasks
	}, func(ctx context.Context, c *consumer.Call[CountArgs]) (Count, error) {
		c.Progress(ctx, 0, 1, "counting")
		return Count{Words: len(strings.Fields(c.Args.Text))}, nil
	})
	return nil
}

func main() { worker.Main("word-count", register) }
