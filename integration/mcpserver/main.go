// Command mcpserver is a small go-sdk MCP server on stdio for the bridge's
// end-to-end tests. Its tool list changes while it runs: grow adds a tool,
// prune removes one, and go-sdk announces each change with
// notifications/tools/list_changed. unsafe_step (idempotentHint: false)
// and safe_step (idempotentHint: true) count their runs in a file, for the
// tests of what runs again after a worker dies; count_run counts its runs
// the same way and answers at once.
package main

import (
	"context"
	"fmt"
	"os"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

type named struct {
	Name string `json:"name" jsonschema:"the tool's name"`
}

func text(s string) *mcp.CallToolResult {
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: s}}}
}

type marked struct {
	Marker string `json:"marker" jsonschema:"a file each run appends a line to"`
}

// step appends a line to in.Marker; on the first run (the file had no
// line) it then waits until the call ends, so that its worker can be
// killed mid-run; a later run answers at once, saying which run it is.
func step(ctx context.Context, _ *mcp.CallToolRequest, in marked) (*mcp.CallToolResult, any, error) {
	n, err := appendRun(in.Marker)
	if err != nil {
		return nil, nil, err
	}
	if n == 1 {
		<-ctx.Done()
		return nil, nil, ctx.Err()
	}
	return text(fmt.Sprintf("run %d", n)), nil, nil
}

// appendRun appends a line to marker and returns how many it holds.
func appendRun(marker string) (int, error) {
	f, err := os.OpenFile(marker, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o600)
	if err != nil {
		return 0, err
	}
	_, err = f.WriteString("run\n")
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return 0, err
	}
	b, err := os.ReadFile(marker)
	if err != nil {
		return 0, err
	}
	return strings.Count(string(b), "\n"), nil
}

// count appends a line to in.Marker and answers at once with the run's
// number: a tool whose starts a test counts (scheduled calls).
func count(_ context.Context, _ *mcp.CallToolRequest, in marked) (*mcp.CallToolResult, any, error) {
	n, err := appendRun(in.Marker)
	if err != nil {
		return nil, nil, err
	}
	return text(fmt.Sprintf("run %d", n)), nil, nil
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
	mcp.AddTool(s, &mcp.Tool{Name: "unsafe_step", Description: "Runs a step that must not run twice.",
		Annotations: &mcp.ToolAnnotations{IdempotentHint: false}}, step)
	mcp.AddTool(s, &mcp.Tool{Name: "safe_step", Description: "Runs a step that may run again.",
		Annotations: &mcp.ToolAnnotations{IdempotentHint: true}}, step)
	mcp.AddTool(s, &mcp.Tool{Name: "count_run", Description: "Counts its runs in a file and answers at once.",
		Annotations: &mcp.ToolAnnotations{IdempotentHint: true}}, count)
	if err := s.Run(context.Background(), &mcp.StdioTransport{}); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
