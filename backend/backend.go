// Package backend is the value a process runs on: the job queue, the bus,
// the task store and the tool catalog, connected, and what closing them
// releases. It imports only the seams (broker, taskstate) and the standard
// library, so a package that takes a Backend — consumer.New, mcpfront.New,
// worker.Run — builds no broker client.
//
// Connecting lives in one package per broker: natsbackend (NATS JetStream)
// and redisbackend (Asynq and Redis) each have an Options and a Connect that
// returns a *Backend with every stream, bucket, queue and subject name
// derived from one prefix, the way api derives them. membackend is the
// in-memory one, for unit tests. A Backend built by hand from any seams
// works too.
package backend

import (
	"errors"

	"github.com/mcpqueue/mcpqueue/broker"
	"github.com/mcpqueue/mcpqueue/taskstate"
)

// Backend is the seams of one broker, connected. The consumers of a
// Backend (consumer.New, mcpfront.New) use its seams and never close it;
// whoever connected it calls Close.
type Backend struct {
	Queue   broker.Queue
	Bus     broker.Bus
	Store   taskstate.Store
	Catalog taskstate.Catalog
	// Messaging names the broker in traces; zero: unnamed.
	Messaging Messaging

	closers []func() error
}

// Messaging is what the spans of a task's run say about its broker: the
// OpenTelemetry messaging.system ("nats", "redis") and, for a route
// (broker.Job.Route), the messaging.destination.name its jobs go to.
type Messaging struct {
	System      string
	Destination func(route string) string
}

// OnClose registers f for Close to call. Close calls the functions in
// reverse order of registration, so a connector registers the connection
// first and what runs on it after.
func (b *Backend) OnClose(f func() error) {
	b.closers = append(b.closers, f)
}

// Close releases what the connector registered with OnClose, last first,
// and returns their errors joined. A second Close does nothing; Close on a
// nil Backend neither.
func (b *Backend) Close() error {
	if b == nil {
		return nil
	}
	var errs []error
	for i := len(b.closers) - 1; i >= 0; i-- {
		errs = append(errs, b.closers[i]())
	}
	b.closers = nil
	return errors.Join(errs...)
}
