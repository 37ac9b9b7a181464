package gosdk_test

import (
	"context"
	"fmt"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpqueue/mcpqueue/bridge"
	"github.com/mcpqueue/mcpqueue/consumer"
	"github.com/mcpqueue/mcpqueue/gosdk"
)

// An existing go-sdk server's tools join a worker's Mux with their own
// schemas; a consumer.Worker running the Mux (worker.Main does) serves them
// from the queue.
func ExampleServe() {
	server := mcp.NewServer(&mcp.Implementation{Name: "files", Version: "1.0.0"}, nil)
	type args struct {
		Filename string `json:"filename"`
	}
	mcp.AddTool(server, &mcp.Tool{Name: "delete_file", Description: "Deletes a file once the user confirms."},
		func(ctx context.Context, req *mcp.CallToolRequest, in args) (*mcp.CallToolResult, any, error) {
			// In a task this turns it input_required until the client answers.
			r, err := req.Session.Elicit(ctx, &mcp.ElicitParams{Message: "Delete " + in.Filename + "?"})
			if err != nil {
				return nil, nil, err
			}
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: r.Action}}}, nil, nil
		})

	mux := consumer.NewMux()
	relay, err := gosdk.Serve(context.Background(), mux, server, &bridge.Options{Sessions: 2})
	if err != nil {
		panic(err)
	}
	defer relay.Close()
	fmt.Println(relay.Name())
	for _, t := range mux.Tools() {
		fmt.Println(t.Name, string(t.InputSchema))
	}
	// Output:
	// files
	// delete_file {"type":"object","properties":{"filename":{"type":"string"}},"required":["filename"],"additionalProperties":false}
}
