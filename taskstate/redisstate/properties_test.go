package redisstate_test

import (
	"testing"

	"github.com/mcpqueue/mcpqueue/internal/redistest"
	"github.com/mcpqueue/mcpqueue/taskstate/statetest"
)

// One store under its own key prefix; every generated sequence gets a task
// of its own.
func TestStatusMachine(t *testing.T) {
	t.Parallel()
	st, _ := newStore(redistest.Client(t))(t)
	statetest.StatusMachine(t, st)
}
