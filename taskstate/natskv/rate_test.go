package natskv_test

import (
	"testing"

	"github.com/mcpqueue/mcpqueue/internal/natstest"
	"github.com/mcpqueue/mcpqueue/taskstate"
	"github.com/mcpqueue/mcpqueue/taskstate/natskv"
)

// twin is a second client of st on srv: its own connection, the same
// buckets, as a second worker process has.
func twin(srv *natstest.Server) func(t *testing.T, st taskstate.Store) taskstate.Store {
	return func(t *testing.T, st taskstate.Store) taskstate.Store {
		_, js := srv.Connect(t)
		cfg := natskv.ConfigOf(st.(*natskv.Store))
		s, err := natskv.New(t.Context(), js, &cfg)
		if err != nil {
			t.Fatalf("natskv.New (the twin): %v", err)
		}
		t.Cleanup(func() { _ = s.Close() })
		return s
	}
}
