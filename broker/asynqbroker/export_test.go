package asynqbroker

import "github.com/mcpqueue/mcpqueue/broker"

// Pace reports whether the server taking jobs in c's first lane (the one of
// the tools without a MaxConcurrency) is a busy one and how many servers
// that lane runs (the one taking jobs and those retired but not yet shut
// down).
func Pace(c broker.Consumer) (busy bool, servers int) {
	l := c.(*consumer).lanes[0]
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.cur.busy, 1 + len(l.retired)
}

// Dequeues reports how many of Asynq's dequeue scripts c's servers ran on
// Redis and how many the sieve answered itself.
func Dequeues(c broker.Consumer) (run, answered int64) { return c.(*consumer).rdb.counts() }
