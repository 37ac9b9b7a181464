package brokertest

import (
	"testing"
	"time"

	"github.com/mcpqueue/mcpqueue/broker"
)

// depth (Features.Depth) checks a queue's broker.Depth: per tool, the jobs
// queued and not yet handed out, and those handed out and not settled.
func (s *queueSuite) depth(t *testing.T, e *queueEnv) {
	q, ctx := e.q, e.ctx
	d := q.(broker.Depth)
	tools := []string{"depth.a", "depth_b"}
	want := func(w map[string]broker.ToolDepth, when string) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for {
			got, err := d.Depth(ctx, tools)
			same := err == nil
			for _, tool := range tools {
				same = same && got[tool] == w[tool]
			}
			if same {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: Depth = %v, %v; want %v", when, got, err, w)
			}
			time.Sleep(20 * time.Millisecond) // the broker offers no event for this
		}
	}
	// One slot: the consumer takes at most one job from the broker.
	c, err := q.Consumer(ctx, broker.ConsumerOptions{Tools: routes(tools...), Lease: longLease, Slots: 1})
	if err != nil {
		t.Fatal(err)
	}
	want(map[string]broker.ToolDepth{}, "no jobs")
	for i := range 5 {
		if err := q.Enqueue(ctx, &broker.Job{TaskID: taskID(), Tool: tools[i%2]}); err != nil {
			t.Fatal(err)
		}
	}
	del, err := c.Next(ctx)
	if err != nil {
		t.Fatal(err)
	}
	w := map[string]broker.ToolDepth{"depth.a": {Pending: 3}, "depth_b": {Pending: 2}}
	x := w[del.Job().Tool]
	x.Pending--
	x.InFlight++
	w[del.Job().Tool] = x
	want(w, "five jobs queued, one handed out")
	// Once it is acked, a push broker's consumer may already hold the next
	// job for a slot (at most Slots of them), so no exact figure follows.
	if err := del.Ack(ctx); err != nil {
		t.Fatal(err)
	}
}
