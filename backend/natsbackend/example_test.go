package natsbackend_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"time"

	"github.com/rs/zerolog"

	"github.com/mcpqueue/mcpqueue/backend/natsbackend"
	"github.com/mcpqueue/mcpqueue/internal/embednats"
	"github.com/mcpqueue/mcpqueue/taskstate"
)

// Connect from an Options value: the names of the stream, consumers,
// buckets and subjects all derive from Prefix, exactly as api derives them.
// Here NATS is an embedded server, as the all-in-one api runs it
// (embednats.Start, the api's own, fills in its URL and the key it generated
// in DataDir); a deployment names its own NATS (URL, Auth).
func ExampleConnect() {
	dir, err := os.MkdirTemp("", "mcpq-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	opts := &natsbackend.Options{Prefix: "mcpq", DataDir: dir}
	ns, err := embednats.Start(opts, "127.0.0.1:-1", "", zerolog.Nop())
	if err != nil {
		log.Fatal(err)
	}
	defer ns.Shutdown()

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	b, err := natsbackend.Connect(ctx, "my-worker", opts)
	if err != nil {
		log.Fatal(err)
	}
	defer b.Close()
	// b goes to worker.Run or consumer.New (a worker), or to mcpfront.New
	// with producer.New(b.Store, …) (a front end). A task record written
	// through one process's Store is what every other process reads.
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
