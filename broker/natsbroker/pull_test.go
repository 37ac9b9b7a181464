package natsbroker_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"

	"github.com/mcpqueue/mcpqueue/broker"
	"github.com/mcpqueue/mcpqueue/broker/natsbroker"
	"github.com/mcpqueue/mcpqueue/internal/natstest"
)

// TestPullsShareOneSubscription: the consumer's pulls go out on one
// long-lived subscription (issue 29), so taking jobs one after another
// adds and removes no subscriptions at the server. A jetstream Fetch per
// pull subscribed and unsubscribed an inbox each time (mutation: one
// insert and one remove per job).
func TestPullsShareOneSubscription(t *testing.T) {
	t.Parallel()
	srv := natstest.Start(t) // its own server: the counts are server-wide
	_, js := srv.Connect(t)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	q, err := natsbroker.NewQueue(ctx, js, &natsbroker.Config{Prefix: natstest.Name(t), Memory: true})
	if err != nil {
		t.Fatal(err)
	}
	c, err := q.Consumer(ctx, broker.ConsumerOptions{Tools: []broker.ToolRoute{{Tool: "echo"}}, Slots: 1})
	if err != nil {
		t.Fatal(err)
	}
	take := func(i int) {
		if err := q.Enqueue(ctx, &broker.Job{TaskID: fmt.Sprintf("PULLSUB%019d", i), Tool: "echo"}); err != nil {
			t.Fatal(err)
		}
		d, err := c.Next(ctx)
		if err != nil {
			t.Fatalf("Next %d: %v", i, err)
		}
		if err := d.Ack(ctx); err != nil {
			t.Fatal(err)
		}
	}
	take(0) // every subscription that lasts is made by now
	before := subStats(t, srv.Server())
	const jobs = 30
	for i := 1; i <= jobs; i++ {
		take(i)
	}
	after := subStats(t, srv.Server())
	ins, rem := after.NumInserts-before.NumInserts, after.NumRemoves-before.NumRemoves
	t.Logf("%d jobs taken: %d subscriptions added, %d removed", jobs, ins, rem)
	if ins > jobs/10 || rem > jobs/10 {
		t.Fatalf("%d jobs taken one at a time added %d and removed %d subscriptions, want about none", jobs, ins, rem)
	}
}

func subStats(t *testing.T, s *server.Server) *server.SublistStats {
	t.Helper()
	sz, err := s.Subsz(&server.SubszOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return sz.SublistStats
}
