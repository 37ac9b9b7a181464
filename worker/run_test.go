package worker_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/mcpqueue/mcpqueue/backend"
	"github.com/mcpqueue/mcpqueue/consumer"
	"github.com/mcpqueue/mcpqueue/worker"
)

// A register function's error stops Run before it connects (the NATS URL
// here reaches nothing: a Run that tried would fail otherwise, later), and
// register gets Run's ctx.
func TestRunStopsOnRegisterError(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	type key struct{}
	ctx = context.WithValue(ctx, key{}, "run's")
	boom := errors.New("the relay's server did not start")
	start := time.Now()
	err := worker.Run(ctx, "t", &backend.Options{NATSURL: "nats://127.0.0.1:1"}, &worker.Options{},
		func(rctx context.Context, mux *consumer.Mux) error {
			if rctx.Value(key{}) != "run's" {
				t.Error("register did not get Run's ctx")
			}
			return boom
		}, zerolog.Nop())
	if !errors.Is(err, boom) || !strings.Contains(err.Error(), "registering the tools") {
		t.Fatalf("Run = %v; want the register error, saying so", err)
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Fatalf("Run took %s to return the register error: it tried to connect first", took)
	}
}
