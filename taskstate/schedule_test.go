package taskstate_test

import (
	"testing"
	"time"

	"github.com/mcpqueue/mcpqueue/taskstate"
	"github.com/mcpqueue/mcpqueue/vocab"
)

// The record keeps a scheduled call's time under the key the front end
// reads it from, and reads back what it wrote.
func TestNotBefore(t *testing.T) {
	t.Parallel()
	if taskstate.MetaNotBefore != vocab.MetaNotBefore {
		t.Fatalf("taskstate.MetaNotBefore %q, vocab.MetaNotBefore %q: one key", taskstate.MetaNotBefore, vocab.MetaNotBefore)
	}
	at := time.Date(2026, 12, 7, 16, 0, 0, 123456789, time.FixedZone("x", 3600))
	meta := taskstate.SetNotBefore(nil, at)
	if got := taskstate.NotBefore(meta); !got.Equal(at) {
		t.Fatalf("NotBefore(SetNotBefore(%v)) = %v", at, got)
	}
	if got := taskstate.NotBefore(nil); !got.IsZero() {
		t.Fatalf("NotBefore(nil) = %v, want zero", got)
	}
	if msg := taskstate.ScheduledFor(at); msg != "scheduled for 2026-12-07T15:00:00Z" || !taskstate.IsScheduledFor(msg) {
		t.Fatalf("ScheduledFor = %q", msg)
	}
}
