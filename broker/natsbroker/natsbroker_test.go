package natsbroker_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

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
	features := brokertest.Features{Holder: true, Depth: true, Defer: true, Redeliver: true, Withdraw: true}
	brokertest.RunQueue(t, features, func(t *testing.T) broker.Queue {
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

func TestBusContract(t *testing.T) {
	t.Parallel()
	srv := natstest.Start(t)
	brokertest.RunBus(t, func(t *testing.T) broker.Bus {
		cfg := &natsbroker.Config{BusPrefix: natstest.Name(t) + ".bus"}
		pc, _ := srv.Connect(t)
		sc, _ := srv.Connect(t)
		return brokertest.SplitBus{Pub: natsbroker.NewBus(pc, cfg), Sub: natsbroker.NewBus(sc, cfg)}
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

func TestNextOnClosedConnection(t *testing.T) {
	t.Parallel()
	srv := natstest.Start(t)
	nc, js := srv.Connect(t)
	name := natstest.Name(t)
	q, err := natsbroker.NewQueue(t.Context(), js, &natsbroker.Config{Stream: name, Subject: name, Memory: true})
	if err != nil {
		t.Fatal(err)
	}
	c, err := q.Consumer(t.Context(), broker.ConsumerOptions{Tools: []broker.ToolRoute{{Tool: "echo"}}})
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

// TestLegacyConsumerReplaced: the one consumer of every tool that versions
// before per-tool routing created overlaps every tool's own consumer, which
// a work-queue stream refuses; the first per-tool consumer replaces it, and
// the jobs queued meanwhile are delivered.
func TestLegacyConsumerReplaced(t *testing.T) {
	t.Parallel()
	srv := natstest.Start(t)
	_, js := srv.Connect(t)
	name := natstest.Name(t)
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	q, err := natsbroker.NewQueue(ctx, js, &natsbroker.Config{Prefix: name, Memory: true})
	if err != nil {
		t.Fatal(err)
	}
	n := q.Names()
	st, err := js.Stream(ctx, n.Stream)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.CreateOrUpdateConsumer(ctx, jetstream.ConsumerConfig{Durable: "workers", AckPolicy: jetstream.AckExplicitPolicy, FilterSubject: n.Subject + ".>"}); err != nil {
		t.Fatal(err)
	}
	if err := q.Enqueue(ctx, &broker.Job{TaskID: "LEGACY0123456789ABCDEFGHIJ", Tool: "echo"}); err != nil {
		t.Fatal(err)
	}
	c, err := q.Consumer(ctx, broker.ConsumerOptions{Tools: []broker.ToolRoute{{Tool: "echo"}}})
	if err != nil {
		t.Fatalf("Consumer with the legacy consumer present: %v", err)
	}
	d, err := c.Next(ctx)
	if err != nil || d.Job().TaskID != "LEGACY0123456789ABCDEFGHIJ" {
		t.Fatalf("Next: %v, %v", d, err)
	}
	if _, err := st.Consumer(ctx, "workers"); !errors.Is(err, jetstream.ErrConsumerNotFound) {
		t.Fatalf("legacy consumer still there: %v", err)
	}
	if _, err := st.Consumer(ctx, natsbroker.ConsumerName("echo")); err != nil {
		t.Fatalf("the tool's consumer %s: %v", natsbroker.ConsumerName("echo"), err)
	}
}

// TestManyToolsFewSlots: with more tools than waiting slots, a job of a tool
// no pull covers is still picked up promptly (the sweep), not after every
// other tool's pull has run out.
func TestManyToolsFewSlots(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	q, routes := manyTools(ctx, t, 20)
	c, err := q.Consumer(ctx, broker.ConsumerOptions{Tools: routes, Slots: 1, Lease: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	var worst time.Duration
	for i := range 10 {
		tool := routes[(i*7)%len(routes)].Tool
		got := make(chan broker.Delivery, 1)
		go func() {
			d, err := c.Next(ctx)
			if err != nil {
				t.Error(err)
			}
			got <- d
		}()
		// Let the Next settle into a pull before the job arrives.
		time.Sleep(300 * time.Millisecond)
		sent := time.Now()
		if err := q.Enqueue(ctx, &broker.Job{TaskID: fmt.Sprintf("MANYTOOLS%017d", i), Tool: tool}); err != nil {
			t.Fatal(err)
		}
		d := <-got
		if d == nil || d.Job().Tool != tool {
			t.Fatalf("round %d: got %v, want a job of %s", i, d, tool)
		}
		worst = max(worst, time.Since(sent))
		_ = d.Ack(ctx)
	}
	t.Logf("worst pickup over 10 jobs on 20 tools with one slot: %s", worst)
	if worst > 700*time.Millisecond {
		t.Fatalf("worst pickup %s with 20 tools and one slot, want under 700ms (sweeps every 250ms)", worst)
	}
}

// TestIdleToolWhileAnotherIsHot: while one tool keeps the waiting slots'
// pulls, a job of an idle tool is fetched at once (the idle tool's
// subscription wakes the sweeper), not at the next sweep, up to 250ms later
// (about 125ms in the median). The median allows for a round in which the
// sweeper role is passing between slots.
func TestIdleToolWhileAnotherIsHot(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	q, routes := manyTools(ctx, t, 20)
	const slots = 4
	c, err := q.Consumer(ctx, broker.ConsumerOptions{Tools: routes, Slots: slots, Lease: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	out := make(chan broker.Delivery)
	for range slots {
		go func() {
			for {
				d, err := c.Next(ctx)
				if err != nil {
					return
				}
				_ = d.Ack(ctx)
				out <- d
			}
		}()
	}
	hot := routes[0].Tool
	var took []time.Duration
	const rounds = 9
	for i := range rounds {
		if err := q.Enqueue(ctx, &broker.Job{TaskID: fmt.Sprintf("HOT%023d", i), Tool: hot}); err != nil {
			t.Fatal(err)
		}
		if d := <-out; d.Job().Tool != hot {
			t.Fatalf("round %d: got a job of %s, want %s", i, d.Job().Tool, hot)
		}
		// Let the slots settle into pulls on the hot tool.
		time.Sleep(100 * time.Millisecond)
		idle := routes[1+(i*7)%(len(routes)-1)].Tool
		sent := time.Now()
		if err := q.Enqueue(ctx, &broker.Job{TaskID: fmt.Sprintf("IDLE%022d", i), Tool: idle}); err != nil {
			t.Fatal(err)
		}
		if d := <-out; d.Job().Tool != idle {
			t.Fatalf("round %d: got a job of %s, want %s", i, d.Job().Tool, idle)
		}
		took = append(took, time.Since(sent))
	}
	slices.Sort(took)
	t.Logf("pickups of an idle tool's job while another is hot: %v", took)
	if median := took[rounds/2]; median > 50*time.Millisecond {
		t.Fatalf("median pickup %s of an idle tool's job while another is hot, want under 50ms (a sweep every 250ms)", median)
	}
}

// manyTools is a queue of its own on a server of its own, and n routes.
func manyTools(ctx context.Context, t *testing.T, n int) (*natsbroker.Queue, []broker.ToolRoute) {
	t.Helper()
	srv := natstest.Start(t)
	_, js := srv.Connect(t)
	q, err := natsbroker.NewQueue(ctx, js, &natsbroker.Config{Prefix: natstest.Name(t), Memory: true})
	if err != nil {
		t.Fatal(err)
	}
	var routes []broker.ToolRoute
	for i := range n {
		routes = append(routes, broker.ToolRoute{Tool: fmt.Sprintf("tool%02d", i)})
	}
	return q, routes
}
