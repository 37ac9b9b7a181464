package worker

import (
	"context"
	"flag"
	"fmt"
	"os"

	"github.com/rs/zerolog"

	"github.com/mcpqueue/mcpqueue/bridge"
	"github.com/mcpqueue/mcpqueue/consumer"
	"github.com/mcpqueue/mcpqueue/internal/cli"
	"github.com/mcpqueue/mcpqueue/internal/connutil"
)

// bridgeFlags registers --mcp-stdio, --mcp-url and --mcp-config (package
// bridge).
func (w *Options) bridgeFlags(fs *flag.FlagSet, e *cli.Env) {
	w.MCPStdio = append(w.MCPStdio, connutil.Split(os.Getenv("MCPQ_MCP_STDIO"), "\n")...)
	w.MCPURL = append(w.MCPURL, connutil.Split(os.Getenv("MCPQ_MCP_URL"), "\n")...)
	fs.Func("mcp-stdio", "relay the tools and prompts of an MCP server run as a child process speaking stdio: its command line, e.g. 'npx -y @modelcontextprotocol/server-everything' (repeatable; the child's environment is PATH="+bridge.DefaultPath+" only: use --mcp-config to give it more) (env MCPQ_MCP_STDIO, one command line per line)", func(v string) error {
		if _, err := bridge.ParseCommandLine(v); err != nil {
			return err
		}
		w.MCPStdio = append(w.MCPStdio, v)
		return nil
	})
	fs.Func("mcp-url", "relay the tools and prompts of a remote MCP server speaking Streamable HTTP: its endpoint, e.g. https://mcp.example.com/mcp (repeatable; no headers: use --mcp-config for an Authorization header) (env MCPQ_MCP_URL, one URL per line)", func(v string) error {
		if err := bridge.CheckURL(v); err != nil {
			return err
		}
		w.MCPURL = append(w.MCPURL, v)
		return nil
	})
	e.String(&w.MCPConfig, "mcp-config", "MCPQ_MCP_CONFIG", "", `relay the MCP servers of this JSON file: {"mcpServers": {NAME: {"command", "args", "env", "cwd", "prefix", "concurrency", "timeout", "logLevel", "roots"} or {"url", "headers": {"Authorization": "Bearer ${TOKEN}" or "@/path/to/file"}, "protocol", "oauth": {"tokenUrl", "clientId", "clientSecret", "scopes"}, "forwardIdentity", "tools": {TOOL: {"timeout"}}, "prefix", …}}}`)
}

// startRelays starts the MCP servers of --mcp-stdio, --mcp-url and
// --mcp-config and registers their tools in mux.
func (w *Options) startRelays(ctx context.Context, mux *consumer.Mux, log zerolog.Logger) (bridge.Relays, error) {
	var servers []bridge.Server
	for _, line := range w.MCPStdio {
		s, err := bridge.FromCommandLine(line)
		if err != nil {
			return nil, fmt.Errorf("worker: --mcp-stdio: %w", err)
		}
		servers = append(servers, s)
	}
	for _, u := range w.MCPURL {
		s, err := bridge.FromURL(u)
		if err != nil {
			return nil, fmt.Errorf("worker: --mcp-url (or MCPQ_MCP_URL): %w", err)
		}
		servers = append(servers, s)
	}
	if w.MCPConfig != "" {
		more, err := bridge.LoadConfig(w.MCPConfig)
		if err != nil {
			return nil, fmt.Errorf("worker: --mcp-config: %w", err)
		}
		servers = append(servers, more...)
	}
	if len(servers) == 0 {
		return nil, nil
	}
	sessions := w.Concurrency
	if sessions <= 0 {
		sessions = 1
	}
	return bridge.Start(ctx, mux, servers, sessions, log)
}
