package mcpfront_test

import (
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/mcpqueue/mcpqueue/consumer"
	"github.com/mcpqueue/mcpqueue/mcpfront"
)

// TestCapabilitiesDeclared: with a worker that registers one tool and no
// resource, prompt or completion, both wires still declare every method
// family the server serves — tools, prompts, resources (task artifacts are
// read with resources/read), logging — and not completions, which nothing
// serves: 2025-11-25 in initialize's result (resources with subscribe),
// 2026-07-28 in server/discover's.
func TestCapabilitiesDeclared(t *testing.T) {
	t.Parallel()
	mux := consumer.NewMux()
	consumer.Handle(mux, consumer.Tool{Name: "echo"}, echoTool)
	sys := startSystem(t, mux, "caps-worker", 1, &mcpfront.Config{Name: "caps", Version: "1", HandleAfter: 15 * time.Second, StateKey: []byte("test-key")})
	e := &env{url: sys.url}

	body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": map[string]any{
		"protocolVersion": "2025-11-25", "capabilities": map[string]any{}, "clientInfo": map[string]any{"name": "t", "version": "1"},
	}})
	r := e.send(t, http.Header{"Content-Type": {"application/json"}, "Accept": {"application/json, text/event-stream"}}, body, sendOpts{})
	var init struct {
		Capabilities map[string]json.RawMessage `json:"capabilities"`
	}
	if err := json.Unmarshal(r.result, &init); err != nil {
		t.Fatalf("initialize: %s", r)
	}
	var discover struct {
		Capabilities map[string]json.RawMessage `json:"capabilities"`
	}
	if err := json.Unmarshal(mustJSON(e.call(t, "server/discover", nil, false)), &discover); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		wire string
		caps map[string]json.RawMessage
		want map[string]string
	}{
		{"2025-11-25 initialize", init.Capabilities, map[string]string{
			"tools": "{}", "prompts": "{}", "resources": `{"subscribe":true}`, "logging": "{}",
			"tasks": `{"cancel":{},"list":{},"requests":{"tools":{"call":{}}}}`,
		}},
		{"2026-07-28 server/discover", discover.Capabilities, map[string]string{
			"tools": "{}", "prompts": "{}", "resources": "{}", "logging": "{}",
			"extensions": `{"io.modelcontextprotocol/tasks":{}}`,
		}},
	} {
		for name, want := range c.want {
			if got := string(c.caps[name]); got != want {
				t.Errorf("%s: capabilities.%s = %s, want %s", c.wire, name, got, want)
			}
		}
		for name := range c.caps {
			if _, ok := c.want[name]; !ok {
				t.Errorf("%s: capabilities.%s declared (%s), which nothing serves here", c.wire, name, c.caps[name])
			}
		}
	}
}
