package redisstate_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/mcpqueue/mcpqueue/internal/redistest"
	"github.com/mcpqueue/mcpqueue/taskstate"
	"github.com/mcpqueue/mcpqueue/taskstate/redisstate"
)

// BenchmarkUpdate measures one compare-and-set write of a task record (the
// worker's take and finish: a Lua script that checks the revision, writes
// and publishes the change) and one read, on the real Redis.
func BenchmarkUpdate(b *testing.B) {
	c := redistest.Client(b)
	prefix := redistest.Name(b) + ":"
	redistest.DeleteKeys(b, c, prefix)
	s := redisstate.New(c, &redisstate.Config{Prefix: prefix})
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
