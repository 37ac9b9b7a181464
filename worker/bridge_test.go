package worker

import (
	"flag"
	"io"
	"slices"
	"strings"
	"testing"

	"github.com/rs/zerolog"

	"github.com/mcpqueue/mcpqueue/consumer"
)

func TestMCPURLFlag(t *testing.T) {
	t.Setenv("MCPQ_MCP_URL", "http://127.0.0.1:1/a\n\n  http://127.0.0.1:1/b  \n")
	w := &Options{}
	fs := flag.NewFlagSet("worker", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	w.Flags(fs)
	if err := fs.Parse([]string{"--mcp-url", "https://mcp.example.com/mcp"}); err != nil {
		t.Fatal(err)
	}
	if want := []string{"http://127.0.0.1:1/a", "http://127.0.0.1:1/b", "https://mcp.example.com/mcp"}; !slices.Equal(w.MCPURL, want) {
		t.Fatalf("MCPURL %q, want %q", w.MCPURL, want)
	}
	for _, bad := range []string{"mcp.example.com", "ftp://x/", ""} {
		fs := flag.NewFlagSet("worker", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		(&Options{}).Flags(fs)
		if err := fs.Parse([]string{"--mcp-url", bad}); err == nil || !strings.Contains(err.Error(), "mcp-url") || !strings.Contains(err.Error(), "http") {
			t.Errorf("--mcp-url %q: %v, want an error naming the flag and what a URL must be", bad, err)
		}
	}
	// A bad URL from the environment is refused when the relays start,
	// naming the flag and its variable.
	w = &Options{MCPURL: []string{"not a url"}}
	_, err := w.startRelays(t.Context(), consumer.NewMux(), zerolog.Nop())
	if err == nil || !strings.Contains(err.Error(), "--mcp-url (or MCPQ_MCP_URL)") {
		t.Fatalf("startRelays with a bad URL: %v", err)
	}
}
