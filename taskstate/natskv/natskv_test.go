package natskv_test

import (
	"context"
	"testing"
	"time"

	"github.com/mcpqueue/mcpqueue/internal/natstest"
	"github.com/mcpqueue/mcpqueue/taskstate"
	"github.com/mcpqueue/mcpqueue/taskstate/natskv"
	"github.com/mcpqueue/mcpqueue/taskstate/statetest"
)

const toolTTL = 2 * time.Second

// newStore returns a store on its own buckets of srv.
func newStore(srv *natstest.Server, memory bool) statetest.NewStoreFunc {
	return func(t *testing.T) (taskstate.Store, taskstate.Catalog) {
		_, js := srv.Connect(t)
		name := natstest.Name(t)
		ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
		defer cancel()
		s, err := natskv.New(ctx, js, &natskv.Config{
			TaskBucket: name + "_tasks",
			ToolBucket: name + "_tools",
			ToolTTL:    toolTTL,
			Memory:     memory,
		})
		if err != nil {
			t.Fatalf("natskv.New: %v", err)
		}
		t.Cleanup(func() { _ = s.Close() })
		return s, s
	}
}

func TestContractFileStorage(t *testing.T) {
	t.Parallel()
	srv := natstest.Start(t)
	statetest.Run(t, newStore(srv, false), &statetest.Options{ToolTTL: toolTTL})
}
