package redisstate_test

import (
	"testing"

	"github.com/mcpqueue/mcpqueue/internal/redistest"
	"github.com/mcpqueue/mcpqueue/taskstate/statetest"
)

// Every generated sequence gets its own key prefix.
func TestStatusMachine(t *testing.T) {
	t.Parallel()
	statetest.StatusMachine(t, newStore(redistest.Client(t)))
}
