package brokertest

import (
	"context"
	"crypto/rand"
	"testing"
	"time"

	"github.com/mcpqueue/mcpqueue/broker"
)

// RunDepth checks a queue's broker.Depth: it counts jobs queued and not yet
// handed out, before and after a consumer takes one. newQueue returns an
// empty queue that no other test sees.
func RunDepth(t *testing.T, newQueue func(t *testing.T) broker.Queue) {
	q := newQueue(t)
	d, ok := q.(broker.Depth)
	if !ok {
		t.Fatalf("%T does not implement broker.Depth", q)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	want := func(n int64, when string) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for {
			got, err := d.Depth(ctx)
			if err == nil && got == n {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: Depth = %d, %v; want %d", when, got, err, n)
			}
			time.Sleep(20 * time.Millisecond) // the broker offers no event for this
		}
	}
	want(0, "empty queue")
	for range 3 {
		if err := q.Enqueue(ctx, &broker.Job{TaskID: rand.Text(), Tool: "depth"}); err != nil {
			t.Fatal(err)
		}
	}
	want(3, "three jobs queued, no consumer yet")
	c, err := q.Consumer(ctx, broker.ConsumerOptions{Lease: longLease, Slots: 1})
	if err != nil {
		t.Fatal(err)
	}
	del, err := c.Next(ctx)
	if err != nil {
		t.Fatal(err)
	}
	want(2, "one job handed out")
	// Once it is acked, a push broker's consumer may already hold the next
	// job for a slot (at most Slots of them), so no exact figure follows.
	if err := del.Ack(ctx); err != nil {
		t.Fatal(err)
	}
}
