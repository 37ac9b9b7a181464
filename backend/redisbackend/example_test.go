package redisbackend_test

import (
	"context"
	"log"
	"time"

	"github.com/mcpqueue/mcpqueue/backend/redisbackend"
)

// Connect to a Redis: the Asynq queues, the channels and the keys all
// derive from Prefix, exactly as api --broker asynq derives them. Priorities
// weigh the queues of two tools (every tool has a queue of its own).
func ExampleConnect() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	b, err := redisbackend.Connect(ctx, "my-worker", &redisbackend.Options{
		URL:        "redis://127.0.0.1:6379/0",
		Prefix:     "mcpq",
		Priorities: map[string]int{"render_report": 6, "bulk_export": 1},
	})
	if err != nil {
		log.Fatal(err)
	}
	defer b.Close()
	// b goes to worker.Run or consumer.New, or to mcpfront.New.
}
