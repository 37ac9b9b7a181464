package redisstate_test

import (
	"testing"

	"github.com/mcpqueue/mcpqueue/internal/redistest"
	"github.com/mcpqueue/mcpqueue/taskstate"
	"github.com/mcpqueue/mcpqueue/taskstate/redisstate"
)

// twin is a second client of st: its own connection, the same key prefix,
// as a second worker process has.
func twin(t *testing.T, st taskstate.Store) taskstate.Store {
	s := redisstate.New(redistest.Client(t), &redisstate.Config{Prefix: redisstate.Prefix(st.(*redisstate.Store))})
	t.Cleanup(func() { _ = s.Close() })
	return s
}
