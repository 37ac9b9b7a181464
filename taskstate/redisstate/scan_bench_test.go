package redisstate_test

import (
	"testing"

	"github.com/mcpqueue/mcpqueue/internal/redistest"
	"github.com/mcpqueue/mcpqueue/taskstate"
	"github.com/mcpqueue/mcpqueue/taskstate/redisstate"
)

// BenchmarkActiveScan: the reaper's active Scan with 20,000 retained
// terminal records and 10 active ones. "index" is the usual Scan, through
// the active index; "reconciling" walks every record key first, as the
// first Scan of a Store does (and as every active Scan did before the
// index).
func BenchmarkActiveScan(b *testing.B) {
	const total, live = 20_000, 10
	s, _ := prefixedStore(b, redistest.Client(b))
	populate(b, s, total, live)
	scan := func(b *testing.B) {
		n := 0
		if err := s.Scan(b.Context(), true, func(*taskstate.Task) bool { n++; return true }); err != nil {
			b.Fatal(err)
		}
		if n != live {
			b.Fatalf("Scan(active) visited %d records, want %d", n, live)
		}
	}
	b.Run("index", func(b *testing.B) {
		for b.Loop() {
			scan(b)
		}
	})
	b.Run("reconciling", func(b *testing.B) {
		for b.Loop() {
			redisstate.ReconcileNext(s)
			scan(b)
		}
	})
}
