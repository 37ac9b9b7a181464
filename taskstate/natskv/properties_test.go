package natskv_test

import (
	"testing"

	"github.com/mcpqueue/mcpqueue/internal/natstest"
	"github.com/mcpqueue/mcpqueue/taskstate/statetest"
)

// One embedded server, one store on file buckets; every generated sequence
// gets a task of its own.
func TestStatusMachine(t *testing.T) {
	t.Parallel()
	st, _ := newStore(natstest.Start(t), false)(t)
	statetest.StatusMachine(t, st)
}
