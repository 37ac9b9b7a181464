package statetest

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/mcpqueue/mcpqueue/taskstate"
)

// BenchmarkUpdate measures, on s, one compare-and-set write of a task
// record (the worker's take and finish) and one read: the store's part of
// every task. Each implementation's BenchmarkUpdate calls it.
func BenchmarkUpdate(b *testing.B, s taskstate.Store) {
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
