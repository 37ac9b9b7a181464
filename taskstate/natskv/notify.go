package natskv

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/mcpqueue/mcpqueue/taskstate"
)

// Announcements: whoever writes a version of a record (Create, Update)
// announces it right after JetStream acknowledged it, with a core NATS
// message on _mcpq.rec.<task bucket>.<id> carrying the record and its
// revision; Delete announces the record's end. A Watch or Follow subscribes
// to that one subject, so a waiting api gets the versions of the tasks it
// waits for and no others, straight from their writer: no JetStream
// consumer delivers them, and no api hears of the tasks it does not wait
// for (a bucket-wide watcher in every api used to receive every version of
// every task). Nobody subscribed: the server drops the message.
//
// A core message is not durable. One can be missed: its writer died
// between the write and the announcement, a version was written by a
// process of a version without announcements (a rolling upgrade), or, on a
// cluster, the subscription's interest had not reached the writer's server
// yet. So a subscription that has heard nothing for missedAfter reads the
// record itself, and again after twice as long while it still hears
// nothing, up to maxQuiet between reads.

// missedAfter is how long a subscription waits for an announcement before
// it reads the record; maxQuiet bounds the wait between its reads.
const (
	missedAfter = time.Second
	maxQuiet    = 16 * time.Second
)

// revHeader carries the announced version's revision; an empty body with
// it set to "0" announces a deletion.
const revHeader = "Mcpq-Rev"

func (s *Store) announceSubject(id string) string { return "_mcpq.rec." + s.cfg.TaskBucket + "." + id }

// announce publishes version rev (the record's encoding b; nil: deleted) of
// id. Best effort: see above.
func (s *Store) announce(id string, rev uint64, b []byte) {
	m := nats.NewMsg(s.announceSubject(id))
	m.Header.Set(revHeader, strconv.FormatUint(rev, 10))
	m.Data = b
	_ = s.js.Conn().PublishMsg(m)
}

// subscribe hands id's announced versions, newest first, to the channel it
// returns until stop: the subscription of WatchRecord.
func (s *Store) subscribe(ctx context.Context, id string) (in <-chan *taskstate.Task, stop func(), err error) {
	f := &follower{ch: make(chan *taskstate.Task, 1), heard: make(chan struct{}, 1)}
	sub, err := s.js.Conn().Subscribe(s.announceSubject(id), func(m *nats.Msg) {
		rev, err := strconv.ParseUint(m.Header.Get(revHeader), 10, 64)
		if err != nil {
			return
		}
		if len(m.Data) == 0 {
			f.offer(nil)
			return
		}
		if t, err := taskstate.Decode(m.Data, rev); err == nil {
			f.offer(t)
		}
	})
	if err != nil {
		return nil, nil, err
	}
	pctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		s.readWhenQuiet(pctx, id, f)
	}()
	return f.ch, func() {
		_ = sub.Unsubscribe()
		cancel()
		<-done
	}, nil
}

// readWhenQuiet reads id's record for f whenever f has heard nothing for a
// while (missedAfter, doubling up to maxQuiet), until ctx ends or the store
// closes.
func (s *Store) readWhenQuiet(ctx context.Context, id string, f *follower) {
	wait := missedAfter
	quiet := time.NewTimer(wait)
	defer quiet.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-s.closed:
			return
		case <-f.heard:
			wait = missedAfter
		case <-quiet.C:
			wait = min(2*wait, maxQuiet)
			t, err := s.Get(ctx, id)
			switch {
			case err == nil:
				f.offer(t)
			case errors.Is(err, taskstate.ErrNotFound):
				// Not created yet (Follow), or deleted with the
				// announcement missed: the watch waits for its ctx.
			}
		}
		quiet.Reset(wait)
	}
}

// follower is one subscription's hand-over: the channel holds at most one
// version, the newest it was offered.
type follower struct {
	ch    chan *taskstate.Task
	heard chan struct{} // an announcement came: the quiet timer restarts

	mu   sync.Mutex
	last uint64 // the newest revision offered
	gone bool   // the deletion was offered
}

// offer puts t (nil: deleted) in the channel, replacing an older version
// waiting there, unless it is no newer than one offered before.
func (f *follower) offer(t *taskstate.Task) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.gone || t != nil && t.Revision <= f.last {
		return
	}
	if t == nil {
		f.gone = true
	} else {
		f.last = t.Revision
	}
	select {
	case f.heard <- struct{}{}:
	default:
	}
	select {
	case f.ch <- t:
	default: // replace the waiting version with this newer one
		select {
		case <-f.ch:
		default:
		}
		f.ch <- t
	}
}
