// Command worker runs the demo tools (internal/demo) off the queue, and
// relays the tools of MCP servers named with --mcp-stdio or --mcp-config.
// Start as many as you like against one NATS or Redis (--broker asynq); each
// pulls one job per free slot.
//
//	go run ./cmd/worker --nats nats://127.0.0.1:4250 --concurrency 8   # beside the all-in-one api (its key: ./data/nats.nk)
package main

import (
	"github.com/mcpqueue/mcpqueue/internal/demo"
	"github.com/mcpqueue/mcpqueue/worker"
)

func main() { worker.Main("worker", worker.Static(demo.Register)) }
