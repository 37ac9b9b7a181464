// Command gosdk-worker serves an existing go-sdk MCP server's tools on the
// queue: the server is built as it would be for a stdio or HTTP transport,
// and gosdk.Serve registers its tools in the worker. Its delete_file tool
// asks the user to confirm (req.Session.Elicit): as a task, it goes
// input_required until the client answers with tasks/update.
//
//	go run ./examples/gosdk-worker --nats nats://127.0.0.1:4250
package main

import (
	"context"
	"fmt"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpqueue/mcpqueue/bridge"
	"github.com/mcpqueue/mcpqueue/consumer"
	"github.com/mcpqueue/mcpqueue/gosdk"
	"github.com/mcpqueue/mcpqueue/worker"
)

// DeleteArgs are delete_file's arguments.
type DeleteArgs struct {
	Filename string `json:"filename" jsonschema:"the file to delete"`
}

// Deleted is delete_file's structured result.
type Deleted struct {
	Deleted string `json:"deleted"`
}

// newServer is the go-sdk server, unchanged from how it runs elsewhere.
func newServer() *mcp.Server {
	s := mcp.NewServer(&mcp.Implementation{Name: "files", Version: "1.0.0"}, nil)
	mcp.AddTool(s, &mcp.Tool{Name: "delete_file", Title: "Delete a file",
		Description: "Deletes a file once the user confirms.", Annotations: &mcp.ToolAnnotations{DestructiveHint: ptr(true)}},
		deleteFile)
	return s
}

func deleteFile(ctx context.Context, req *mcp.CallToolRequest, in DeleteArgs) (*mcp.CallToolResult, Deleted, error) {
	_ = req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{
		ProgressToken: req.Params.GetProgressToken(), Progress: 0, Total: 1, Message: "asking to confirm"})
	r, err := req.Session.Elicit(ctx, &mcp.ElicitParams{
		Message: fmt.Sprintf("Delete %s?", in.Filename),
		RequestedSchema: map[string]any{"type": "object", "required": []string{"confirm"},
			"properties": map[string]any{"confirm": map[string]any{"type": "boolean", "description": "delete it"}}},
	})
	if err != nil {
		return nil, Deleted{}, err
	}
	if r.Action != "accept" || r.Content["confirm"] != true {
		return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: "Kept " + in.Filename}}}, Deleted{}, nil
	}
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "Deleted " + in.Filename}}}, Deleted{Deleted: in.Filename}, nil
}

func ptr[T any](v T) *T { return &v }

func main() {
	worker.Main("gosdk-worker", func(ctx context.Context, mux *consumer.Mux) error {
		// The relay ends with ctx, when the worker stops.
		_, err := gosdk.Serve(ctx, mux, newServer(), &bridge.Options{Sessions: 4})
		return err
	})
}
