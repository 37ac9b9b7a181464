// Command mcpserver is a small go-sdk MCP server on stdio whose tool list
// changes while it runs, for the bridge's end-to-end tests: grow adds a
// tool, prune removes one, and go-sdk announces each change with
// notifications/tools/list_changed.
package main

import (
	"context"
	"fmt"
	"os"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

type named struct {
	Name string `json:"name" jsonschema:"the tool's name"`
}

func text(s string) *mcp.CallToolResult {
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: s}}}
}

func main() {
	s := mcp.NewServer(&mcp.Implementation{Name: "changing", Version: "1"}, nil)
	mcp.AddTool(s, &mcp.Tool{Name: "grow", Description: "Adds a tool of the given name."},
		func(ctx context.Context, req *mcp.CallToolRequest, in named) (*mcp.CallToolResult, any, error) {
			mcp.AddTool(s, &mcp.Tool{Name: in.Name, Description: "Grown."},
				func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, any, error) {
					return text("grown " + in.Name), nil, nil
				})
			return text("added " + in.Name), nil, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "prune", Description: "Removes the tool of the given name."},
		func(ctx context.Context, req *mcp.CallToolRequest, in named) (*mcp.CallToolResult, any, error) {
			s.RemoveTools(in.Name)
			return text("removed " + in.Name), nil, nil
		})
	if err := s.Run(context.Background(), &mcp.StdioTransport{}); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
