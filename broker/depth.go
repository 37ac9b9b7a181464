package broker

import "context"

// Depth is an optional ability of a Queue, found by type assertion: how
// many jobs wait for a worker (queued and not yet handed out; jobs a worker
// holds or that wait out a retry delay do not count; a push-style broker's
// consumer may take up to its Slots jobs ahead of the worker asking, and
// those no longer count either). A Queue that answers
// is also reachable, so readiness checks use it too.
type Depth interface {
	Depth(ctx context.Context) (int64, error)
}
