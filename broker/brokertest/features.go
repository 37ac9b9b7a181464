package brokertest

import (
	"testing"

	"github.com/mcpqueue/mcpqueue/broker"
)

// Features declares which of the optional abilities of the broker seam an
// implementation has. The suite holds the implementation to its
// declaration both ways: a declared ability is tested, and one left out
// must be absent (its type assertion must fail), so a queue that gains or
// loses an ability without saying so fails instead of being skipped.
type Features struct {
	// Holder: the Queue implements broker.Holder (the reaper asks it
	// before it republishes a job).
	Holder bool
	// Depth: the Queue implements broker.Depth (per-tool backlog for
	// autoscalers and readiness).
	Depth bool
	// Defer: deliveries implement broker.Deferrer (a deferred job does
	// not count against MaxDeliveries).
	Defer bool
	// Redeliver: deliveries implement broker.Redeliverer (the broker
	// itself hands a job out again once its lease lapses).
	Redeliver bool
	// Withdraw: the Queue implements broker.Withdrawer (a cancelled
	// task's jobs are taken back).
	Withdraw bool
	// Schedule: the Queue implements broker.Scheduler (it holds a job
	// until its NotBefore, and takes back one not yet due).
	Schedule bool
}

// declared fails unless has (what a type assertion found) is what the
// implementation declared for ability.
func declared(t *testing.T, ability string, want, has bool, v any) {
	t.Helper()
	switch {
	case want && !has:
		t.Fatalf("Features declare %s, but %T does not implement it", ability, v)
	case !want && has:
		t.Fatalf("%T implements %s, which its Features do not declare", v, ability)
	}
}

// declaredFeatures: the queue and its deliveries have exactly the optional
// abilities the Features declare.
func (s *queueSuite) declaredFeatures(t *testing.T, e *queueEnv) {
	f := s.features
	_, holder := e.q.(broker.Holder)
	declared(t, "broker.Holder", f.Holder, holder, e.q)
	_, depth := e.q.(broker.Depth)
	declared(t, "broker.Depth", f.Depth, depth, e.q)
	_, withdrawer := e.q.(broker.Withdrawer)
	declared(t, "broker.Withdrawer", f.Withdraw, withdrawer, e.q)
	_, scheduler := e.q.(broker.Scheduler)
	declared(t, "broker.Scheduler", f.Schedule, scheduler, e.q)

	_, _, d := s.handOut(t, e, longLease)
	_, deferrer := d.(broker.Deferrer)
	declared(t, "broker.Deferrer", f.Defer, deferrer, d)
	_, redeliverer := d.(broker.Redeliverer)
	declared(t, "broker.Redeliverer", f.Redeliver, redeliverer, d)
	ack(t, e.ctx, d)
}
