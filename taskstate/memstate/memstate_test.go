package memstate_test

import (
	"testing"
	"time"

	"github.com/mcpqueue/mcpqueue/taskstate"
	"github.com/mcpqueue/mcpqueue/taskstate/memstate"
	"github.com/mcpqueue/mcpqueue/taskstate/statetest"
)

const (
	toolTTL    = 2 * time.Second
	sessionTTL = 2 * time.Second
)

func newStore(t *testing.T) (taskstate.Store, taskstate.Catalog) {
	s := memstate.New(&memstate.Config{ToolRetention: toolTTL, SessionTTL: sessionTTL})
	return s, s
}

func TestContract(t *testing.T) {
	t.Parallel()
	features := statetest.Features{Sessions: true, Blobs: true, Feed: true, ActiveCount: true, Lease: true, RateLimit: true, Schedules: true, Outbox: true}
	statetest.Run(t, features, newStore, &statetest.Options{ToolRetention: toolTTL, SessionTTL: sessionTTL})
}

func TestStatusMachine(t *testing.T) {
	t.Parallel()
	st, _ := newStore(t)
	statetest.StatusMachine(t, st)
}
