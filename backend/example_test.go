package backend_test

import (
	"context"
	"log"
	"time"

	"github.com/rs/zerolog"

	"github.com/mcpqueue/mcpqueue/backend"
)

// Connect the seams from an options struct instead of flags: the names of
// the stream, consumers, buckets, queues and subjects all derive from
// Prefix, exactly as api derives them.
func ExampleOptions_Connect() {
	opts := &backend.Options{Broker: "nats", NATSURL: "nats://127.0.0.1:4222", Prefix: "mcpq"}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	b, err := opts.Connect(ctx, "my-worker", zerolog.Nop())
	if err != nil {
		log.Fatal(err)
	}
	defer b.Close()
	// b.Queue, b.Store, b.Catalog and b.Bus go to consumer.New (a worker)
	// or producer.New (a front end).
}
