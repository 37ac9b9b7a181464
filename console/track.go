package console

import (
	"context"
	"slices"
	"sync"
	"time"

	"github.com/mcpqueue/mcpqueue/taskstate"
)

// trackIdle is how long the console keeps following the change feed after
// its last request or the close of its last event stream (Config.TrackIdle).
// Following costs every change of every record decoded in this process, so it
// runs only while someone uses the console, and a little longer, so a page
// reloaded or a detail opened again finds the history it just showed.
const trackIdle = 2 * time.Minute

// attempt is one run of a task as the console saw it start: the version
// whose Attempt count went up was written when the worker took the task.
type attempt struct {
	N      int       `json:"n"`
	Worker string    `json:"worker,omitempty"`
	At     time.Time `json:"at"`
}

// tracker remembers the attempts of the newest tasks it saw start, at most
// limit tasks (the oldest entries go first). It sees them by following the
// store's change feed while the console is in use (use, open); attempts that
// started while it was not following are unknown.
type tracker struct {
	feed taskstate.Feed  // nil: nothing to follow
	life context.Context // following ends with it
	idle time.Duration

	mu    sync.Mutex
	limit int
	runs  map[string][]attempt
	order []string

	streams int                // open event streams
	last    time.Time          // the console's last use
	stop    context.CancelFunc // ends the current following; nil when not following
	timer   *time.Timer        // checks for idleness while following
}

func newTracker(life context.Context, feed taskstate.Feed, limit int, idle time.Duration) *tracker {
	return &tracker{feed: feed, life: life, idle: idle, limit: limit, runs: map[string][]attempt{}}
}

// use notes a console request, and follows the feed if it was not.
func (k *tracker) use() {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.last = time.Now()
	k.startLocked()
}

// open notes an event stream that keeps the tracker following until its
// close function is called.
func (k *tracker) open() (close func()) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.streams++
	k.last = time.Now()
	k.startLocked()
	return func() {
		k.mu.Lock()
		defer k.mu.Unlock()
		k.streams--
		k.last = time.Now()
	}
}

func (k *tracker) startLocked() {
	if k.feed == nil || k.stop != nil || k.life.Err() != nil {
		return
	}
	ctx, cancel := context.WithCancel(k.life)
	k.stop = cancel
	go k.follow(ctx)
	k.timer = time.AfterFunc(k.idle, k.checkIdle)
}

// checkIdle stops following once no stream is open and the last use is
// idle ago; else it looks again when that could be so.
func (k *tracker) checkIdle() {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.stop == nil {
		return
	}
	wait := k.idle - time.Since(k.last)
	if k.streams > 0 {
		wait = k.idle
	}
	if wait > 0 {
		k.timer.Reset(wait)
		return
	}
	k.stop()
	k.stop, k.timer = nil, nil
}

// follow feeds the tracker from the store's changes until ctx ends,
// subscribing again (after a pause) if the feed cannot start or closes.
func (k *tracker) follow(ctx context.Context) {
	for ctx.Err() == nil {
		if ch, err := k.feed.Changes(ctx); err == nil {
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

// attempts returns the attempts of id seen, oldest first: none when it ran
// while nobody used the console, and only the later ones when the console
// came into use between its attempts.
func (k *tracker) attempts(id string) []attempt {
	k.mu.Lock()
	defer k.mu.Unlock()
	return slices.Clone(k.runs[id])
}
