package natsbroker_test

import (
	"context"
	"testing"
	"time"

	"github.com/mcpqueue/mcpqueue/broker"
	"github.com/mcpqueue/mcpqueue/broker/brokertest"
	"github.com/mcpqueue/mcpqueue/broker/natsbroker"
	"github.com/mcpqueue/mcpqueue/internal/natstest"
)

func TestQueueContract(t *testing.T) {
	t.Parallel()
	srv := natstest.Start(t)
	brokertest.RunQueue(t, func(t *testing.T) broker.Queue {
		_, js := srv.Connect(t)
		name := natstest.Name(t)
		ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
		defer cancel()
		q, err := natsbroker.NewQueue(ctx, js, &natsbroker.Config{
			Stream:  name + "_JOBS",
			Subject: name + ".jobs",
		})
		if err != nil {
			t.Fatalf("NewQueue: %v", err)
		}
		return q
	})
}

// splitBus publishes on one connection and subscribes on another, as an api
// replica and a worker do, so "subscribe then publish" crosses connections.
type splitBus struct{ pub, sub *natsbroker.Bus }

func (b splitBus) Publish(ctx context.Context, topic broker.Topic, taskID string, data []byte) error {
	return b.pub.Publish(ctx, topic, taskID, data)
}

func (b splitBus) Subscribe(ctx context.Context, topic broker.Topic, taskID string, fn func(string, []byte)) (broker.Subscription, error) {
	return b.sub.Subscribe(ctx, topic, taskID, fn)
}

func TestBusContract(t *testing.T) {
	t.Parallel()
	srv := natstest.Start(t)
	brokertest.RunBus(t, func(t *testing.T) broker.Bus {
		cfg := &natsbroker.Config{BusPrefix: natstest.Name(t) + ".bus"}
		pc, _ := srv.Connect(t)
		sc, _ := srv.Connect(t)
		return splitBus{pub: natsbroker.NewBus(pc, cfg), sub: natsbroker.NewBus(sc, cfg)}
	})
}

// The same suite over a single connection: what an all-in-one process does.
func TestBusContractOneConnection(t *testing.T) {
	t.Parallel()
	srv := natstest.Start(t)
	brokertest.RunBus(t, func(t *testing.T) broker.Bus {
		nc, _ := srv.Connect(t)
		return natsbroker.NewBus(nc, &natsbroker.Config{BusPrefix: natstest.Name(t) + ".bus"})
	})
}
