package worker

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/mcpqueue/mcpqueue/backend/natsbackend"
	"github.com/mcpqueue/mcpqueue/consumer"
	"github.com/mcpqueue/mcpqueue/internal/cli"
)

// Main's register error stops the worker before it connects: the NATS URL
// here reaches nothing, so a worker that tried would fail otherwise, later.
func TestMainRegistersBeforeConnecting(t *testing.T) {
	boom := errors.New("the relay's server did not start")
	start := time.Now()
	opts := &cli.Options{NATS: natsbackend.Options{URL: "nats://127.0.0.1:1"}}
	err := runFlags(t.Context(), "t", opts, &Options{}, func(context.Context, *consumer.Mux) error { return boom })
	if !errors.Is(err, boom) || !strings.Contains(err.Error(), "registering the tools") {
		t.Fatalf("runFlags = %v; want the register error, saying so", err)
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Fatalf("the register error took %s: the worker tried to connect first", took)
	}
}
