package memstate

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/mcpqueue/mcpqueue/taskstate"
)

// watcher carries one record's versions to one Watch or Follow: the newest
// unread version waits in pending, so a writer never blocks on a slow
// reader, which may then skip versions but never goes backwards.
type watcher struct {
	mu      sync.Mutex
	pending *taskstate.Task
	last    uint64        // revision of the version last taken
	wake    chan struct{} // room for one wake-up
}

func (w *watcher) push(t *taskstate.Task) {
	w.mu.Lock()
	if t.Revision > w.last && (w.pending == nil || t.Revision > w.pending.Revision) {
		w.pending = t
	}
	w.mu.Unlock()
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

func (w *watcher) take() *taskstate.Task {
	w.mu.Lock()
	defer w.mu.Unlock()
	t := w.pending
	if t != nil {
		w.pending, w.last = nil, t.Revision
	}
	return t
}

// Watch implements taskstate.Store.
func (s *Store) Watch(ctx context.Context, id string) (<-chan *taskstate.Task, error) {
	return s.watch(ctx, id, true)
}

// Follow implements taskstate.Store.
func (s *Store) Follow(ctx context.Context, id string) (<-chan *taskstate.Task, error) {
	return s.watch(ctx, id, false)
}

func (s *Store) watch(ctx context.Context, id string, current bool) (<-chan *taskstate.Task, error) {
	if !taskstate.ValidID(id) {
		return nil, fmt.Errorf("%w: %.64q", taskstate.ErrNotFound, id)
	}
	w := &watcher{wake: make(chan struct{}, 1)}
	s.mu.Lock()
	if current {
		r, ok := s.lookupLocked(id, time.Now())
		if !ok {
			s.mu.Unlock()
			return nil, fmt.Errorf("%w: %s", taskstate.ErrNotFound, id)
		}
		w.push(r.task())
	}
	if s.watchers[id] == nil {
		s.watchers[id] = map[*watcher]bool{}
	}
	s.watchers[id][w] = true
	s.mu.Unlock()

	out := make(chan *taskstate.Task)
	go func() {
		defer close(out)
		defer s.unwatch(id, w)
		for {
			select {
			case <-ctx.Done():
				return
			case <-w.wake:
			}
			t := w.take()
			if t == nil || ctx.Err() != nil {
				continue
			}
			select {
			case out <- t:
			case <-ctx.Done():
				return
			}
			if t.Status.Terminal() {
				return
			}
		}
	}()
	return out, nil
}

func (s *Store) unwatch(id string, w *watcher) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.watchers[id], w)
	if len(s.watchers[id]) == 0 {
		delete(s.watchers, id)
	}
}

// Changes implements taskstate.Feed.
func (s *Store) Changes(ctx context.Context) (<-chan *taskstate.Task, error) {
	q := taskstate.NewFeedQueue()
	s.mu.Lock()
	s.feeds[q] = true
	s.mu.Unlock()
	out := make(chan *taskstate.Task)
	go func() {
		q.Deliver(ctx, nil, out)
		s.mu.Lock()
		delete(s.feeds, q)
		s.mu.Unlock()
	}()
	return out, nil
}
