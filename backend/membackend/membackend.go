// Package membackend is a backend.Backend in memory (broker/membroker and
// taskstate/memstate), for unit tests: a worker (worker.Run,
// consumer.New) and a front end (mcpfront.New) on one New share its queue,
// bus and store as they would share a broker. Nothing survives the process.
package membackend

import (
	"github.com/mcpqueue/mcpqueue/backend"
	"github.com/mcpqueue/mcpqueue/broker/membroker"
	"github.com/mcpqueue/mcpqueue/taskstate/memstate"
)

// New returns a Backend whose seams are fresh in-memory ones; its Close
// does nothing.
func New() *backend.Backend {
	st := memstate.New(nil)
	return &backend.Backend{
		Queue: membroker.NewQueue(nil), Bus: membroker.NewBus(), Store: st, Catalog: st,
		Messaging: backend.Messaging{System: "memory"},
	}
}
