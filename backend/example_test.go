package backend_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"time"

	"github.com/rs/zerolog"

	"github.com/mcpqueue/mcpqueue/backend"
	"github.com/mcpqueue/mcpqueue/internal/embednats"
	"github.com/mcpqueue/mcpqueue/taskstate"
)

// Connect the seams from an options struct instead of flags: the names of
// the stream, consumers, buckets, queues and subjects all derive from
// Prefix, exactly as api derives them. Here NATS is an embedded server, as
// the all-in-one api runs it (embednats.Start, the api's own, fills in its URL and the
// key it generated in DataDir); a deployment names its own NATS (NATSURL,
// NATSAuth) or Redis (Broker "asynq", RedisURL).
func ExampleOptions_Connect() {
	dir, err := os.MkdirTemp("", "mcpq-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	opts := &backend.Options{Broker: "nats", Prefix: "mcpq", DataDir: dir}
	ns, err := embednats.Start(opts, "127.0.0.1:-1", "", zerolog.Nop())
	if err != nil {
		log.Fatal(err)
	}
	defer ns.Shutdown()

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	b, err := opts.Connect(ctx, "my-worker", zerolog.Nop())
	if err != nil {
		log.Fatal(err)
	}
	defer b.Close()
	// b.Queue, b.Store, b.Catalog and b.Bus go to consumer.New (a worker)
	// or producer.New (a front end). A task record written through one
	// process's Store is what every other process reads.
	id := taskstate.NewID()
	if err := b.Store.Create(ctx, &taskstate.Task{ID: id, Tool: "word_count", Status: taskstate.Working}); err != nil {
		log.Fatal(err)
	}
	t, err := b.Store.Get(ctx, id)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(t.Tool, t.Status)
	// Output: word_count working
}
