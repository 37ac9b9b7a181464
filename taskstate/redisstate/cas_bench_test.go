package redisstate_test

import (
	"testing"

	"github.com/mcpqueue/mcpqueue/internal/redistest"
	"github.com/mcpqueue/mcpqueue/taskstate/statetest"
)

// BenchmarkUpdate: one CAS write (a Lua script that checks the revision,
// writes and publishes the change) and one read (statetest.BenchmarkUpdate)
// on the real Redis.
func BenchmarkUpdate(b *testing.B) {
	s, _ := prefixedStore(b, redistest.Client(b))
	statetest.BenchmarkUpdate(b, s)
}
