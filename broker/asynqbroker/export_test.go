package asynqbroker

import "github.com/mcpqueue/mcpqueue/broker"

// Pace reports whether c's server taking jobs is a busy one and how many
// servers it runs (the one taking jobs and those retired but not yet shut
// down).
func Pace(c broker.Consumer) (busy bool, servers int) {
	cc := c.(*consumer)
	cc.mu.Lock()
	defer cc.mu.Unlock()
	return cc.cur.busy, 1 + len(cc.retired)
}
