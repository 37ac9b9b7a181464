package worker_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mcpqueue/mcpqueue/backend/membackend"
	"github.com/mcpqueue/mcpqueue/consumer"
	"github.com/mcpqueue/mcpqueue/worker"
)

// A register function's error stops Run before the worker starts (no tool
// reaches the catalog), and register gets Run's ctx.
func TestRunStopsOnRegisterError(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	type key struct{}
	ctx = context.WithValue(ctx, key{}, "run's")
	boom := errors.New("the relay's server did not start")
	b := membackend.New()
	err := worker.Run(ctx, b, nil, func(rctx context.Context, mux *consumer.Mux) error {
		if rctx.Value(key{}) != "run's" {
			t.Error("register did not get Run's ctx")
		}
		consumer.Handle(mux, consumer.Tool{Name: "echo"}, func(ctx context.Context, c *consumer.Call[struct{}]) (struct{}, error) {
			return struct{}{}, nil
		})
		return boom
	})
	if !errors.Is(err, boom) || !strings.Contains(err.Error(), "registering the tools") {
		t.Fatalf("Run = %v; want the register error, saying so", err)
	}
	if tools, err := b.Catalog.Tools(t.Context()); err != nil || len(tools) != 0 {
		t.Fatalf("catalog after a register error: %v, %v; want no tools", tools, err)
	}
}

// syncBuffer is a bytes.Buffer safe for the worker's goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// A worker given a *slog.Logger (Options.Slog, from consumer.Config) logs
// through its handler: the line that says it runs reaches it as a record,
// with its fields.
func TestRunLogsToSlog(t *testing.T) {
	var out syncBuffer
	opts := &worker.Options{}
	opts.Slog = slog.New(slog.NewTextHandler(&out, nil))
	opts.Concurrency = 2
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() {
		done <- worker.Run(ctx, membackend.New(), opts, worker.Static(func(mux *consumer.Mux) {
			consumer.Handle(mux, consumer.Tool{Name: "echo"}, func(ctx context.Context, c *consumer.Call[struct{}]) (struct{}, error) {
				return struct{}{}, nil
			})
		}))
	}()
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(out.String(), `msg="worker running"`) {
		if time.Now().After(deadline) {
			cancel()
			t.Fatalf("no worker line reached the slog handler within 10s; it got:\n%s", out.String())
		}
		time.Sleep(10 * time.Millisecond) // polling the handler's output, with a deadline
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Run = %v", err)
	}
	if got := out.String(); !strings.Contains(got, "level=INFO") || !strings.Contains(got, "concurrency=2") {
		t.Fatalf("slog records %q lack the level or the fields", got)
	}
}
