// Command worker runs the example tools off the queue. Start as many as you
// like against one NATS; each pulls one job per free slot.
//
//	go run ./cmd/worker --nats nats://127.0.0.1:4250 --concurrency 8
package main

import (
	"github.com/mcpqueue/mcpqueue/examples/demo"
	"github.com/mcpqueue/mcpqueue/worker"
)

func main() { worker.Main("worker", demo.Register) }
