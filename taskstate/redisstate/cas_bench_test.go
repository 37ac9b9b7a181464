package redisstate_test

import (
	"testing"

	"github.com/mcpqueue/mcpqueue/internal/redistest"
	"github.com/mcpqueue/mcpqueue/taskstate/redisstate"
	"github.com/mcpqueue/mcpqueue/taskstate/statetest"
)

// BenchmarkUpdate: one CAS write (a Lua script that checks the revision,
// writes and publishes the change) and one read (statetest.BenchmarkUpdate)
// on the real Redis.
func BenchmarkUpdate(b *testing.B) {
	c := redistest.Client(b)
	prefix := redistest.Name(b) + ":"
	redistest.DeleteKeys(b, c, prefix)
	s := redisstate.New(c, &redisstate.Config{Prefix: prefix})
	b.Cleanup(func() { _ = s.Close() })
	statetest.BenchmarkUpdate(b, s)
}
