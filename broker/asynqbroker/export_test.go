package asynqbroker

import "github.com/mcpqueue/mcpqueue/broker"

// Pace reports whether the server taking jobs in c's first lane (the shared
// one: the pool's queue and the own queues of the tools without a
// MaxConcurrency) is a busy one and how many servers that lane runs (the one
// taking jobs and those retired but not yet shut down).
func Pace(c broker.Consumer) (busy bool, servers int) {
	l := c.(*consumer).lanes[0]
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.cur.busy, 1 + len(l.retired)
}

// SieveStats is what c's sieve did: dequeue scripts run on Redis on the
// routes' own queues and on the pool's queue, those the sieve answered
// itself, and its pipelined looks at the own queues.
type SieveStats = sieveStats

// Sieve reports what c's sieve did so far.
func Sieve(c broker.Consumer) SieveStats { return c.(*consumer).rdb.counts() }
