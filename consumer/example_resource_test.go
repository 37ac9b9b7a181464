package consumer_test

import (
	"context"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/mcpqueue/mcpqueue/consumer"
)

// A worker serving a fixed resource and a family of resources under a URI
// template with completion of its variable; ResourceUpdated reports that
// the fixed one changed (subscribed 2025-11-25 sessions get
// notifications/resources/updated). The mux publishes one catalog entry
// for each: the api lists them and routes reads and completions to them.
func ExampleHandleResourceTemplate() {
	mux := consumer.NewMux()
	consumer.HandleResource(mux, consumer.ResourceDef{
		URI: "config://app", Name: "app config", MimeType: "application/json",
		Cache: consumer.Cache{TTL: time.Minute}, // clients may keep a read a minute (private to the caller)
	}, func(ctx context.Context, c *consumer.Call[consumer.ResourceRequest]) ([]consumer.ResourceContents, error) {
		return []consumer.ResourceContents{consumer.TextContents(c.Args.URI, "application/json", `{"debug":false}`)}, nil
	})
	consumer.HandleResourceTemplate(mux, consumer.ResourceTemplate{
		URITemplate: "file:///srv/{+path}", Name: "served files",
		Complete: func(ctx context.Context, c *consumer.Call[consumer.CompleteRequest]) (*consumer.Completion, error) {
			entries, _ := os.ReadDir("/srv")
			out := []string{}
			for _, e := range entries {
				if strings.HasPrefix(e.Name(), c.Args.Value) {
					out = append(out, e.Name())
				}
			}
			return &consumer.Completion{Values: out}, nil
		},
	}, func(ctx context.Context, c *consumer.Call[consumer.ResourceRequest]) ([]consumer.ResourceContents, error) {
		b, err := os.ReadFile("/srv/" + c.Args.Vars["path"])
		if err != nil {
			return nil, consumer.ErrResourceNotFound // -32602 with the URI in error.data
		}
		return []consumer.ResourceContents{consumer.BlobContents(c.Args.URI, "application/octet-stream", b)}, nil
	})
	// Once a worker runs the mux, mux.ResourceUpdated(ctx, "config://app")
	// tells the subscribers of the fixed one that it changed.

	// What the worker publishes to the catalog, by kind and name:
	for _, e := range mux.Tools() {
		fmt.Println(e.Kind, e.Name)
	}
	// Output:
	// completion template/file:///srv/{+path}
	// resource config://app
	// template file:///srv/{+path}
}
