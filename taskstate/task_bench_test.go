package taskstate_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/mcpqueue/mcpqueue/taskstate"
)

// benchRecords are the records the task path writes for a no-op tool: as the
// api creates it, as the worker takes it, and as it finishes.
func benchRecords() map[string]*taskstate.Task {
	now := time.Date(2026, 11, 30, 8, 0, 0, 123456789, time.UTC)
	created := &taskstate.Task{
		ID: "AB3DEFGHIJKLMNOPQRSTUVWXYZ", Tool: "noop", Arguments: json.RawMessage(`{}`),
		Era: taskstate.Era20260728, Mode: taskstate.ModeTask, Status: taskstate.Working,
		CreatedAt: now, LastUpdatedAt: now, TTLMs: 3600000, PollIntervalMs: 500,
		Meta: map[string]json.RawMessage{"clientCapabilities": json.RawMessage(`{"elicitation":{},"sampling":{},"extensions":{"io.modelcontextprotocol/tasks":{}}}`)},
	}
	taken := created.Clone()
	taken.Attempt = 1
	taken.Lease = &taskstate.Lease{Worker: "vm-4242", Expires: now.Add(30 * time.Second)}
	taken.LastUpdatedAt = now.Add(time.Millisecond)
	done := taken.Clone()
	done.Lease = nil
	done.Status = taskstate.Completed
	done.Result = json.RawMessage(`{"content":[{"type":"text","text":"ok"}]}`)
	return map[string]*taskstate.Task{"created": created, "taken": taken, "completed": done}
}

// BenchmarkEncode and BenchmarkDecode measure the one record serialization
// every store uses, on the records of a no-op task's life.
func BenchmarkEncode(b *testing.B) {
	for _, name := range []string{"created", "taken", "completed"} {
		t := benchRecords()[name]
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := taskstate.Encode(t); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkDecode(b *testing.B) {
	for _, name := range []string{"created", "taken", "completed"} {
		raw, err := taskstate.Encode(benchRecords()[name])
		if err != nil {
			b.Fatal(err)
		}
		b.Run(name, func(b *testing.B) {
			b.SetBytes(int64(len(raw)))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := taskstate.Decode(raw, 7); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
