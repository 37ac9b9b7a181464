package broker

import "context"

// Depth is an optional ability of a Queue, found by type assertion: how
// many jobs of each tool wait for a worker and how many workers hold. A
// Queue that answers is also reachable, so readiness checks use it too.
type Depth interface {
	// Depth reports the given tools' figures. A tool no consumer ever
	// served may be missing from the map (its broker-side consumer or
	// queue does not exist yet).
	Depth(ctx context.Context, tools []string) (map[string]ToolDepth, error)
}

// ToolDepth is one tool's backlog: what an autoscaler of the pool that
// serves the tool reads.
type ToolDepth struct {
	// Pending jobs are queued and not handed to a worker yet, including
	// those due again after a retry delay.
	Pending int64
	// InFlight jobs are handed to a worker and not settled yet.
	InFlight int64
}
