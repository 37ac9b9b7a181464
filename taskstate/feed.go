package taskstate

import (
	"context"
	"sync"
)

// Feed is an optional ability of a Store: one stream of the changes to every
// record, across owners (an operator's console uses it). Both stores in this
// module implement it; check with a type assertion.
type Feed interface {
	// Changes delivers every version of any record written after it
	// returns, creates included, until ctx ends; then the channel closes.
	// Versions of one record arrive in revision order. Writers never wait
	// for a slow consumer: versions of one record that pile up unread
	// coalesce into the newest, and when more than FeedLimit records are
	// pending (or the store lost track, e.g. across a reconnection) they are
	// dropped and a nil arrives instead: re-read what you need with Scan.
	Changes(ctx context.Context) (<-chan *Task, error)
}

// FeedLimit is how many distinct records a feed holds for a consumer that
// does not read before it gives up on them and sends nil.
const FeedLimit = 4096

// FeedQueue carries changes from a store's reader to one feed consumer
// without ever blocking the reader; see Feed for what a slow consumer gets.
// Stores use it to implement Feed.
type FeedQueue struct {
	mu      sync.Mutex
	pending map[string]*Task // newest unread version per record
	order   []string         // pending ids, oldest first
	lost    bool             // a nil is owed to the consumer
	wake    chan struct{}    // has room for one wake-up
}

// NewFeedQueue returns an empty queue.
func NewFeedQueue() *FeedQueue {
	return &FeedQueue{pending: map[string]*Task{}, wake: make(chan struct{}, 1)}
}

// Push queues a version; an older or equal revision of a record already
// pending is ignored. It never blocks.
func (q *FeedQueue) Push(t *Task) {
	q.mu.Lock()
	switch cur, ok := q.pending[t.ID]; {
	case ok && cur.Revision >= t.Revision:
	case ok:
		q.pending[t.ID] = t
	case len(q.order) >= FeedLimit:
		q.dropLocked()
	default:
		q.pending[t.ID] = t
		q.order = append(q.order, t.ID)
	}
	q.mu.Unlock()
	q.signal()
}

// Lost drops what is pending and owes the consumer a nil: changes were missed.
func (q *FeedQueue) Lost() {
	q.mu.Lock()
	q.dropLocked()
	q.mu.Unlock()
	q.signal()
}

func (q *FeedQueue) dropLocked() {
	clear(q.pending)
	q.order = q.order[:0]
	q.lost = true
}

func (q *FeedQueue) signal() {
	select {
	case q.wake <- struct{}{}:
	default:
	}
}

// next takes the oldest pending change (nil for a loss); ok false when empty.
func (q *FeedQueue) next() (t *Task, ok bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.lost {
		q.lost = false
		return nil, true
	}
	if len(q.order) == 0 {
		return nil, false
	}
	id := q.order[0]
	q.order = q.order[1:]
	t = q.pending[id]
	delete(q.pending, id)
	return t, true
}

// Deliver sends the queue's changes on out until ctx ends or stop closes,
// then closes out. Run it on its own goroutine.
func (q *FeedQueue) Deliver(ctx context.Context, stop <-chan struct{}, out chan<- *Task) {
	defer close(out)
	for {
		t, ok := q.next()
		if !ok {
			select {
			case <-q.wake:
				continue
			case <-ctx.Done():
				return
			case <-stop:
				return
			}
		}
		select {
		case out <- t:
		case <-ctx.Done():
			return
		case <-stop:
			return
		}
	}
}
