// Package membroker is an in-memory broker.Queue and broker.Bus for one
// process: jobs, leases and bus messages live in maps of this process and
// are gone when it ends. It passes the contract suite in brokertest like
// the real brokers, so code written against the seam behaves the same on
// it; it exists for unit tests (users' handler tests through
// consumer/consumertest, and this module's fast tests), never for a
// deployment and never instead of natsbroker or asynqbroker in integration
// tests.
//
// What it has of the seam's optional abilities: broker.Holder and
// broker.Depth on the Queue, broker.Deferrer and broker.Redeliverer on its
// deliveries (a delivery whose lease lapses is handed out again, as
// JetStream does).
//
// Names:
//
//	Enqueue      stores the job under its dedupe key; a key seen within
//	             Config.DedupeWindow is not stored again
//	Next         hands out the oldest due job of the consumer's routes
//	Ack, Term    remove the job
//	Retry        makes it due again after the delay, counting the delivery
//	Defer        the same without counting it against MaxDeliveries
//	Extend       restarts the delivery's lease
package membroker
