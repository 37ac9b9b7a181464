package membroker_test

import (
	"testing"
	"time"

	"github.com/mcpqueue/mcpqueue/broker"
	"github.com/mcpqueue/mcpqueue/broker/brokertest"
	"github.com/mcpqueue/mcpqueue/broker/membroker"
)

func TestQueueContract(t *testing.T) {
	t.Parallel()
	features := brokertest.Features{Holder: true, Depth: true, Defer: true, Redeliver: true}
	brokertest.RunQueue(t, features, func(t *testing.T) broker.Queue {
		return membroker.NewQueue(nil)
	}, &brokertest.QueueOptions{Lease: 500 * time.Millisecond})
}

func TestBusContract(t *testing.T) {
	t.Parallel()
	brokertest.RunBus(t, func(t *testing.T) broker.Bus { return membroker.NewBus() })
}
