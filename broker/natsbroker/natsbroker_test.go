package natsbroker_test

import (
	"context"
	"errors"
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
	// A 2s lease keeps the lease tests meaningful on a loaded 2-core CI box,
	// where a 1s lease can run out between two timely extensions.
	brokertest.RunQueueWith(t, func(t *testing.T) broker.Queue {
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
	}, &brokertest.QueueOptions{Lease: 2 * time.Second})
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

// Task ids become subject tokens: anything that is not one plain token is
// refused, so "x.>" or "*" can never widen a subscription.
func TestBusRefusesUnsafeTaskIDs(t *testing.T) {
	t.Parallel()
	srv := natstest.Start(t)
	nc, _ := srv.Connect(t)
	bus := natsbroker.NewBus(nc, &natsbroker.Config{BusPrefix: natstest.Name(t)})
	ctx := t.Context()
	for _, id := range []string{"a.b", "*", ">", "x.>", "a b", "a\r\nb", "tab\there"} {
		if err := bus.Publish(ctx, broker.TopicCancel, id, nil); err == nil {
			t.Errorf("Publish with task id %q succeeded", id)
		}
		sub, err := bus.Subscribe(ctx, broker.TopicCancel, id, func(string, []byte) {})
		if err == nil {
			_ = sub.Close()
			t.Errorf("Subscribe with task id %q succeeded", id)
		}
	}
}

func TestNextOnClosedConnection(t *testing.T) {
	t.Parallel()
	srv := natstest.Start(t)
	nc, js := srv.Connect(t)
	name := natstest.Name(t)
	q, err := natsbroker.NewQueue(t.Context(), js, &natsbroker.Config{Stream: name, Subject: name, Memory: true})
	if err != nil {
		t.Fatal(err)
	}
	c, err := q.Consumer(t.Context(), broker.ConsumerOptions{})
	if err != nil {
		t.Fatal(err)
	}
	nc.Close()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	if d, err := c.Next(ctx); !errors.Is(err, broker.ErrClosed) {
		t.Fatalf("Next on a closed connection = %v, %v; want broker.ErrClosed", d, err)
	}
}
