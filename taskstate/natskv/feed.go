package natskv

import (
	"context"
	"fmt"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/mcpqueue/mcpqueue/taskstate"
)

var _ taskstate.Feed = (*Store)(nil)

// Changes implements taskstate.Feed with a bucket-wide UpdatesOnly watcher of
// its own (an ordered consumer starting at the next message, so it is live
// when WatchAll returns). Deletes and expiries are not changes of a record
// and are skipped.
func (s *Store) Changes(ctx context.Context) (<-chan *taskstate.Task, error) {
	wctx, cancel := context.WithCancel(ctx)
	w, err := s.tasks.WatchAll(wctx, jetstream.UpdatesOnly(), jetstream.IgnoreDeletes())
	if err != nil {
		cancel()
		return nil, fmt.Errorf("natskv: changes: %w", err)
	}
	q := taskstate.NewFeedQueue()
	out := make(chan *taskstate.Task)
	go q.Deliver(wctx, s.closed, out)
	go func() {
		defer cancel()
		defer func() { _ = w.Stop() }()
		for {
			select {
			case <-wctx.Done():
				return
			case <-s.closed:
				return
			case e, ok := <-w.Updates():
				if !ok {
					q.Lost() // the watcher ended: what follows is unknown
					return
				}
				if e == nil || e.Operation() != jetstream.KeyValuePut {
					continue
				}
				if t, err := taskstate.Decode(e.Value(), e.Revision()); err == nil {
					q.Push(t)
				}
			}
		}
	}()
	return out, nil
}
