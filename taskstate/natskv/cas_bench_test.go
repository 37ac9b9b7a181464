package natskv_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/mcpqueue/mcpqueue/internal/natstest"
	"github.com/mcpqueue/mcpqueue/taskstate"
	"github.com/mcpqueue/mcpqueue/taskstate/natskv"
)

// BenchmarkUpdate measures one compare-and-set write of a task record (the
// worker's take and finish) and one read, on an embedded NATS with file
// storage, as deployed.
func BenchmarkUpdate(b *testing.B) {
	srv := natstest.Start(b)
	_, js := srv.Connect(b)
	name := natstest.Name(b)
	ctx, cancel := context.WithTimeout(b.Context(), 10*time.Second)
	defer cancel()
	s, err := natskv.New(ctx, js, &natskv.Config{TaskBucket: name + "_tasks", ToolBucket: name + "_tools"})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = s.Close() })
	now := time.Now().UTC()
	t := &taskstate.Task{
		ID: taskstate.NewID(), Tool: "noop", Arguments: json.RawMessage(`{}`), Era: taskstate.Era20260728,
		Mode: taskstate.ModeTask, Status: taskstate.Working, CreatedAt: now, LastUpdatedAt: now, TTLMs: 3600000,
	}
	if err := s.Create(b.Context(), t); err != nil {
		b.Fatal(err)
	}
	b.Run("cas", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			t.Attempt++
			if err := s.Update(b.Context(), t); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("get", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := s.Get(b.Context(), t.ID); err != nil {
				b.Fatal(err)
			}
		}
	})
}
