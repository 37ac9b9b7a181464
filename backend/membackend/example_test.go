package membackend_test

import (
	"context"
	"fmt"
	"log"

	"github.com/mcpqueue/mcpqueue/backend/membackend"
	"github.com/mcpqueue/mcpqueue/taskstate"
)

// A record written through the Store is what every user of the same
// Backend reads.
func ExampleNew() {
	b := membackend.New()
	defer b.Close()
	ctx := context.Background()
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
