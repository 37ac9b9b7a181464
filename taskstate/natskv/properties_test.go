package natskv_test

import (
	"testing"

	"github.com/mcpqueue/mcpqueue/internal/natstest"
	"github.com/mcpqueue/mcpqueue/taskstate/statetest"
)

// One embedded server; every generated sequence gets its own buckets.
func TestStatusMachine(t *testing.T) {
	t.Parallel()
	statetest.StatusMachine(t, newStore(natstest.Start(t), false))
}
