package console

import (
	"context"
	"slices"
	"strconv"
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

// maxEvents bounds the timeline kept per task: the first events and the
// newest are kept, those in between dropped (a task asking for input in a
// loop).
const maxEvents = 64

// attempt is one run of a task as the console saw it start: the version
// whose Attempt count went up was written when the worker took the task.
type attempt struct {
	N      int       `json:"n"`
	Worker string    `json:"worker,omitempty"`
	At     time.Time `json:"at"`
}

// What a timeline event says happened (event.What).
const (
	evCreated  = "created"  // the record was created (from the record)
	evTaken    = "taken"    // a worker took it: attempt n
	evRequeued = "requeued" // its job went back on the queue (lost worker, or a parked task resumed)
	evInput    = "input"    // it asked its client for input
	evParked   = "parked"   // the run that asked gave its slot back
	evAnswered = "answered" // the client answered input requests
	evResumed  = "resumed"  // a parked task's answers are in; its job is queued again
	evUnseen   = "unseen"   // attempts ran while the console was not following
	evTerminal = "ended"    // it ended: Status says how
)

// event is one step of a task's life in its timeline: from the record's
// fields, or from a version the console saw on the change feed.
type event struct {
	At      time.Time `json:"at"`
	What    string    `json:"what"`
	Status  string    `json:"status,omitempty"` // the shown status (ended)
	Attempt int       `json:"attempt,omitempty"`
	Worker  string    `json:"worker,omitempty"`
	Detail  string    `json:"detail,omitempty"`
	// Seen: the console saw this on the change feed (else it is read off
	// the record, so its time is the record's own).
	Seen bool `json:"seen"`
}

// ended is a task the console saw end, for the queue view's rates.
type ended struct {
	id, key, owner string
	status         string // shown status
	at             time.Time
}

// history is what the tracker keeps of one task: the fields of the newest
// version it saw that the next version is compared with, and the events it
// derived.
type history struct {
	key, owner string // catalog key (CatalogKey of kind and tool), owner
	rev        uint64
	status     taskstate.Status
	attempt    int
	requeues   int
	parked     bool
	asked      []string // input request keys
	answers    int
	events     []event
}

// tracker remembers the timelines of the newest tasks it saw change, at most
// limit tasks (the oldest entries go first), and the tasks it saw end in the
// last window. It sees them by following the store's change feed while the
// console is in use (use, open); what happened while it was not following is
// unknown.
type tracker struct {
	feed   taskstate.Feed  // nil: nothing to follow
	life   context.Context // following ends with it
	idle   time.Duration
	window time.Duration // how long ended tasks are kept
	now    func() time.Time

	mu    sync.Mutex
	limit int
	tasks map[string]*history
	order []string
	ended []ended // oldest first, at most limit*4

	streams int                // open event streams
	last    time.Time          // the console's last use
	stop    context.CancelFunc // ends the current following; nil when not following
	timer   *time.Timer        // checks for idleness while following
}

func newTracker(life context.Context, feed taskstate.Feed, limit int, idle, window time.Duration) *tracker {
	return &tracker{feed: feed, life: life, idle: idle, window: window, now: time.Now, limit: limit, tasks: map[string]*history{}}
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

// see takes a version of a task from the feed: the events it tells, by
// comparing it with the version seen before (none, for a task first seen
// now). Versions seen again or out of order are ignored.
func (k *tracker) see(t *taskstate.Task) {
	k.mu.Lock()
	defer k.mu.Unlock()
	h, known := k.tasks[t.ID]
	if known && h.rev >= t.Revision {
		return
	}
	if !known {
		if t.Status.Terminal() {
			// First seen ended: the record tells as much as the console
			// knows. Noted for the rates only.
			k.endLocked(t)
			return
		}
		h = &history{key: taskstate.CatalogKey(t.Kind, t.Tool), owner: t.Owner, status: taskstate.Working}
		k.tasks[t.ID] = h
		k.order = append(k.order, t.ID)
		if len(k.order) > k.limit {
			delete(k.tasks, k.order[0])
			k.order = k.order[1:]
		}
	}
	at := t.LastUpdatedAt
	add := func(e event) {
		e.Seen = true
		if e.At.IsZero() {
			e.At = at
		}
		if len(h.events) >= maxEvents {
			h.events = slices.Delete(h.events, maxEvents/2, maxEvents/2+1)
		}
		h.events = append(h.events, e)
	}
	// In the order they happen when one version tells several: answers
	// come in, the parked task resumes and is queued again, a worker takes
	// it, its run asks for input, parks.
	if n := len(t.InputResponses); n > h.answers {
		add(event{What: evAnswered, Detail: plural(n-h.answers, "answer")})
	}
	if t.Parked == nil && h.parked && !t.Status.Terminal() {
		add(event{What: evResumed})
	}
	if t.Requeues > h.requeues && known {
		add(event{What: evRequeued, Detail: "its job went back on the queue"})
	}
	if t.Attempt > h.attempt {
		e := event{What: evTaken, Attempt: t.Attempt}
		if t.Lease != nil {
			e.Worker = t.Lease.Worker
		}
		if t.Status.Terminal() {
			e.Detail = "seen only with its outcome" // a lazy take, or versions coalesced on the feed
		}
		add(e)
	}
	var asked []string
	for key := range t.InputRequests {
		asked = append(asked, key)
	}
	slices.Sort(asked)
	if fresh := newKeys(h.asked, asked); fresh > 0 {
		add(event{What: evInput, Attempt: t.Attempt, Detail: plural(fresh, "input request")})
	}
	if t.Parked != nil && !h.parked {
		add(event{What: evParked, At: t.Parked.Since, Detail: "waits for its client until " + t.Parked.Until.UTC().Format(time.RFC3339)})
	}
	if t.Status.Terminal() && !h.status.Terminal() {
		add(event{What: evTerminal, Status: shown(t), Detail: t.StatusMessage})
		k.endLocked(t)
	}
	h.rev, h.status, h.attempt, h.requeues = t.Revision, t.Status, t.Attempt, t.Requeues
	h.parked, h.asked, h.answers = t.Parked != nil, asked, len(t.InputResponses)
}

// endLocked notes that t ended, dropping ended tasks older than the window.
func (k *tracker) endLocked(t *taskstate.Task) {
	cut := k.now().Add(-k.window)
	i := 0
	for i < len(k.ended) && (k.ended[i].at.Before(cut) || len(k.ended)-i >= 4*k.limit) {
		i++
	}
	k.ended = append(k.ended[i:], ended{id: t.ID, key: taskstate.CatalogKey(t.Kind, t.Tool), owner: t.Owner, status: shown(t), at: t.LastUpdatedAt})
}

// newKeys counts the keys of now (sorted) not in before (sorted).
func newKeys(before, now []string) int {
	n := 0
	for _, key := range now {
		if _, found := slices.BinarySearch(before, key); !found {
			n++
		}
	}
	return n
}

func plural(n int, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return strconv.Itoa(n) + " " + what + "s"
}

// events returns the events of id seen, oldest first: none when it changed
// only while nobody used the console.
func (k *tracker) events(id string) []event {
	k.mu.Lock()
	defer k.mu.Unlock()
	if h := k.tasks[id]; h != nil {
		return slices.Clone(h.events)
	}
	return nil
}

// recent is what the queue view takes from the tracker: the tasks seen
// ending since from, and per catalog key the workers seen taking a task
// since from, of the owners the caller sees.
func (k *tracker) recent(from time.Time, sees func(owner string) bool) (done []ended, workers map[string][]string) {
	k.mu.Lock()
	defer k.mu.Unlock()
	for _, e := range k.ended {
		if !e.at.Before(from) && sees(e.owner) {
			done = append(done, e)
		}
	}
	workers = map[string][]string{}
	for _, h := range k.tasks {
		if !sees(h.owner) {
			continue
		}
		for _, e := range h.events {
			if e.What == evTaken && e.Worker != "" && !e.At.Before(from) && !slices.Contains(workers[h.key], e.Worker) {
				workers[h.key] = append(workers[h.key], e.Worker)
			}
		}
	}
	return done, workers
}
