package brokertest

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/mcpqueue/mcpqueue/broker"
)

// routing: a consumer is handed only jobs of the tools it serves; a job of
// a tool nobody serves waits in the queue, and goes to the first consumer
// of its tool.
func (s *queueSuite) routing(t *testing.T, e *queueEnv) {
	alpha := e.consumer(t, broker.ConsumerOptions{Tools: routes("alpha"), Lease: longLease})
	beta := e.consumer(t, broker.ConsumerOptions{Tools: routes("beta", "beta.two"), Lease: longLease})
	want := map[string]string{} // task id → tool
	var gamma *broker.Job
	for i, tool := range []string{"alpha", "beta", "gamma", "beta.two", "alpha", "beta"} {
		j := e.job()
		j.Tool = tool
		e.enqueue(t, j)
		if tool == "gamma" {
			gamma = j
			continue
		}
		want[j.TaskID] = tool
		_ = i
	}
	take := func(c broker.Consumer, who string, tools ...string) {
		t.Helper()
		n := 0
		for id, tool := range want {
			for _, mine := range tools {
				if tool == mine {
					n++
				}
			}
			_ = id
		}
		for range n {
			d := e.next(t, c, s.opts.Wait)
			tool, ok := want[d.Job().TaskID]
			if !ok || !contains(tools, d.Job().Tool) || tool != d.Job().Tool {
				t.Fatalf("%s (tools %v) was handed %s of tool %q", who, tools, d.Job().TaskID, d.Job().Tool)
			}
			delete(want, d.Job().TaskID)
			ack(t, e.ctx, d)
		}
	}
	take(alpha, "alpha's consumer", "alpha")
	take(beta, "beta's consumer", "beta", "beta.two")
	e.quiet(t, alpha, s.opts.Quiet, "alpha's consumer, with gamma's job queued")
	e.quiet(t, beta, s.opts.Quiet/2, "beta's consumer, with gamma's job queued")

	g := e.consumer(t, broker.ConsumerOptions{Tools: routes("gamma"), Lease: longLease})
	d := e.next(t, g, s.opts.Wait)
	sameJob(t, "gamma's job, once a consumer serves gamma", d.Job(), gamma)
	ack(t, e.ctx, d)
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// toolLeases: a tool's lease is its own. Two pools, one with a short lease
// for its tool and one with a long lease for another: the short one's job
// comes back after its lease, the long one's does not, and a third pool
// starting later with other settings for its own tool changes neither.
func (s *queueSuite) toolLeases(t *testing.T, e *queueEnv) {
	short := e.consumer(t, broker.ConsumerOptions{Tools: []broker.ToolRoute{{Tool: "short", Lease: s.opts.Lease}}})
	long := e.consumer(t, broker.ConsumerOptions{Tools: []broker.ToolRoute{{Tool: "long", Lease: longLease}}})
	js, jl := e.job(), e.job()
	js.Tool, jl.Tool = "short", "long"
	e.enqueue(t, js)
	e.enqueue(t, jl)
	ds := e.next(t, short, s.opts.Wait)
	dl := e.next(t, long, s.opts.Wait)
	sameJob(t, "short's job", ds.Job(), js)
	sameJob(t, "long's job", dl.Job(), jl)
	_ = e.consumer(t, broker.ConsumerOptions{Tools: []broker.ToolRoute{{Tool: "third", Lease: s.opts.Lease / 2, MaxDeliveries: 2}}})
	taken := time.Now()

	// Neither is settled, as if both workers had crashed.
	again := e.next(t, short, s.opts.Lease+s.opts.Wait)
	if held := time.Since(taken); held < s.opts.Lease/2 {
		t.Fatalf("short's job came back after %s, before its %s lease", held, s.opts.Lease)
	}
	sameJob(t, "short's job after its lease", again.Job(), js)
	ack(t, e.ctx, again)
	e.quiet(t, long, s.opts.Quiet, fmt.Sprintf("long's job within its %s lease", longLease))
	ack(t, e.ctx, dl)
}

// toolConcurrency: a tool's MaxConcurrency bounds its deliveries not yet
// settled, while other tools of the same consumer use the other slots.
func (s *queueSuite) toolConcurrency(t *testing.T, e *queueEnv) {
	c := e.consumer(t, broker.ConsumerOptions{
		Tools: []broker.ToolRoute{{Tool: "gpu", MaxConcurrency: 1}, {Tool: "cpu"}},
		Lease: longLease, Slots: 3,
	})
	g1, g2, c1 := e.job(), e.job(), e.job()
	g1.Tool, g2.Tool, c1.Tool = "gpu", "gpu", "cpu"
	for _, j := range []*broker.Job{g1, g2, c1} {
		e.enqueue(t, j)
	}
	first := e.next(t, c, s.opts.Wait)
	second := e.next(t, c, s.opts.Wait)
	var gpu broker.Delivery
	switch {
	case first.Job().Tool == "gpu" && second.Job().Tool == "cpu":
		gpu = first
	case first.Job().Tool == "cpu" && second.Job().Tool == "gpu":
		gpu = second
	default:
		t.Fatalf("first two deliveries: %s and %s, want one gpu and the cpu job", first.Job().Tool, second.Job().Tool)
	}
	e.quiet(t, c, s.opts.Quiet, "a second gpu job while the first is held (MaxConcurrency 1)")
	ack(t, e.ctx, gpu)
	d := e.next(t, c, s.opts.Wait)
	if d.Job().Tool != "gpu" {
		t.Fatalf("after the gpu job was acked: got %s of %s, want the second gpu job", d.Job().TaskID, d.Job().Tool)
	}
	ack(t, e.ctx, d)
}

// consumerOptionsInvalid: a consumer needs tools, each named once, and
// a pool that is a plain name.
func (s *queueSuite) consumerOptionsInvalid(t *testing.T, e *queueEnv) {
	for _, tools := range [][]broker.ToolRoute{
		{},
		{{Tool: ""}},
		{{Tool: "a"}, {Tool: "a"}},
		{{Tool: "a", MaxConcurrency: -1}},
		{{Tool: "a", Lease: -time.Second}},
	} {
		ctx, cancel := context.WithTimeout(e.ctx, s.opts.Wait)
		c, err := e.q.Consumer(ctx, broker.ConsumerOptions{Tools: tools})
		cancel()
		if err == nil {
			t.Errorf("Consumer with tools %+v = %v, want an error", tools, c)
		}
	}
	for _, pool := range []string{"a.b", "gpu pool", "x*"} {
		ctx, cancel := context.WithTimeout(e.ctx, s.opts.Wait)
		c, err := e.q.Consumer(ctx, broker.ConsumerOptions{Tools: routes("echo"), Pool: pool})
		cancel()
		if err == nil {
			t.Errorf("Consumer of pool %q = %v, want an error", pool, c)
		}
	}
}

// deferUnbounded: a job deferred again and again, with no delivery bound,
// comes back after each delay and is not lost.
func (s *queueSuite) deferUnbounded(t *testing.T, e *queueEnv) {
	c := e.consumer(t, broker.ConsumerOptions{Tools: routes("echo"), Lease: longLease, MaxDeliveries: -1})
	j := e.job()
	e.enqueue(t, j)
	for i := range 6 {
		d := e.next(t, c, s.opts.Wait+2*time.Second)
		sameJob(t, fmt.Sprintf("delivery %d", i+1), d.Job(), j)
		if i == 5 {
			ack(t, e.ctx, d)
			break
		}
		var err error
		if s.features.Defer {
			err = d.(broker.Deferrer).Defer(e.ctx, 100*time.Millisecond)
		} else {
			err = d.Retry(e.ctx, 100*time.Millisecond)
		}
		if err != nil {
			t.Fatalf("defer %d: %v", i+1, err)
		}
	}
	e.quiet(t, c, s.opts.Quiet, "after the deferred job was acked")
}
