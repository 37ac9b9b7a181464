package console

import (
	"context"
	"slices"
	"sync"
	"time"

	"github.com/mcpqueue/mcpqueue/taskstate"
)

// attempt is one run of a task as the console saw it start: the version
// whose Attempt count went up was written when the worker took the task.
type attempt struct {
	N      int       `json:"n"`
	Worker string    `json:"worker,omitempty"`
	At     time.Time `json:"at"`
}

// tracker remembers the attempts of the newest tasks it saw start, at most
// limit tasks (the oldest entries go first).
type tracker struct {
	mu    sync.Mutex
	limit int
	runs  map[string][]attempt
	order []string
}

func newTracker(limit int) *tracker {
	return &tracker{limit: limit, runs: map[string][]attempt{}}
}

// follow feeds the tracker from the store's changes until ctx ends,
// subscribing again (after a pause) if the feed cannot start or closes.
func (k *tracker) follow(ctx context.Context, f taskstate.Feed) {
	for ctx.Err() == nil {
		if ch, err := f.Changes(ctx); err == nil {
			for t := range ch {
				if t != nil {
					k.see(t)
				}
			}
		}
		select {
		case <-ctx.Done():
		case <-time.After(2 * time.Second):
		}
	}
}

func (k *tracker) see(t *taskstate.Task) {
	if t.Attempt == 0 {
		return
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	runs, known := k.runs[t.ID]
	if len(runs) > 0 && runs[len(runs)-1].N >= t.Attempt {
		return
	}
	a := attempt{N: t.Attempt, At: t.LastUpdatedAt}
	if t.Lease != nil {
		a.Worker = t.Lease.Worker
	}
	k.runs[t.ID] = append(runs, a)
	if known {
		return
	}
	k.order = append(k.order, t.ID)
	if len(k.order) > k.limit {
		delete(k.runs, k.order[0])
		k.order = k.order[1:]
	}
}

func (k *tracker) attempts(id string) []attempt {
	k.mu.Lock()
	defer k.mu.Unlock()
	return slices.Clone(k.runs[id])
}
