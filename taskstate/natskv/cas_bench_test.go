package natskv_test

import (
	"context"
	"testing"
	"time"

	"github.com/mcpqueue/mcpqueue/internal/natstest"
	"github.com/mcpqueue/mcpqueue/taskstate/natskv"
	"github.com/mcpqueue/mcpqueue/taskstate/statetest"
)

// BenchmarkUpdate: one CAS write and one read (statetest.BenchmarkUpdate)
// on an embedded NATS with file storage, as deployed.
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
	statetest.BenchmarkUpdate(b, s)
}
