package natskv

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/mcpqueue/mcpqueue/taskstate"
)

// The active index holds one empty entry per active task in the owner
// bucket, keyed a.<owner hash>.<task id> (ownerless tasks under the hash of
// ""), so that what is in flight can be found at a cost that grows with
// what is in flight, not with the finished records the task bucket retains
// (an hour of them by default, any number):
//
//   - CountActive (the api's cap on an owner's active tasks) is one stream
//     info request for the subjects under a.<owner hash>.;
//   - an active Scan (the reaper's pass, every few seconds) reads the
//     subjects under a. and then only those records.
//
// Create writes the entry with the owner-index entry, before the record,
// so an active task always has one. The terminal write removes it with a
// subject purge of the stream (which, unlike a KV purge, leaves no marker
// behind to be counted). An entry can outlive its task only when something
// failed between the two writes: CountActive (before a count reaches its
// limit) and active Scan check the records of the entries they find and
// purge those of terminal or missing records — a missing one only once it
// is older than indexGrace, since it may belong to a Create under way.
//
// Records written by a version without the index (before an upgrade) have
// no entry: the first active Scan of a Store also walks every record, as
// Scan without the index does, and indexes the active ones it finds.

// activeKey is t's entry in the active index.
func activeKey(owner, id string) string { return "a." + ownerHash(owner) + "." + id }

// activeSubject is the subject of t's active-index entry.
func (s *Store) activeSubject(owner, id string) string {
	return "$KV." + s.cfg.OwnerBucket + "." + activeKey(owner, id)
}

// publishAll publishes msgs (in parallel) and returns the first error.
func (s *Store) publishAll(ctx context.Context, msgs []*nats.Msg) error {
	if len(msgs) == 1 {
		_, err := s.js.PublishMsg(ctx, msgs[0])
		return err
	}
	return firstErr(s.publishTogether(ctx, msgs, -1))
}

// published is one message's outcome in publishTogether: its stream
// sequence, or the error.
type published struct {
	seq uint64
	err error
}

// firstErr is the first error of acks.
func firstErr(acks []published) error {
	for _, a := range acks {
		if a.err != nil {
			return a.err
		}
	}
	return nil
}

// publishTogether publishes msgs without waiting for one ack before the
// next message and returns each one's outcome; msgs[create] (if in range)
// must be the first message on its subject (a create). Without a deadline
// on ctx the acks are awaited for at most publishWait.
func (s *Store) publishTogether(ctx context.Context, msgs []*nats.Msg, create int) []published {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, publishWait)
		defer cancel()
	}
	out := make([]published, len(msgs))
	futures := make([]jetstream.PubAckFuture, len(msgs))
	for i, m := range msgs {
		var opts []jetstream.PublishOpt
		if i == create {
			opts = append(opts, jetstream.WithExpectLastSequencePerSubject(0))
		}
		futures[i], out[i].err = s.js.PublishMsgAsync(m, opts...)
	}
	for i, f := range futures {
		if f == nil {
			continue
		}
		select {
		case ack := <-f.Ok():
			out[i].seq = ack.Sequence
		case err := <-f.Err():
			out[i].err = err
		case <-ctx.Done():
			out[i].err = ctx.Err()
		}
	}
	return out
}

// publishWait bounds the wait for acks when the caller's ctx has no
// deadline (as JetStream's own synchronous publish does).
const publishWait = 5 * time.Second

// unmarkActive removes the active-index entry subj. A failure only leaves
// an entry that CountActive or the next active Scan drops.
func (s *Store) unmarkActive(ctx context.Context, subj string) error {
	if err := s.ownerStream.Purge(ctx, jetstream.WithPurgeSubject(subj)); err != nil {
		return fmt.Errorf("natskv: active index: %w", err)
	}
	return nil
}

// activeEntries returns the active-index subjects under prefix (a key
// prefix ending in "."), by task id.
func (s *Store) activeEntries(ctx context.Context, prefix string) (map[string]string, error) {
	info, err := s.ownerStream.Info(ctx, jetstream.WithSubjectFilter("$KV."+s.cfg.OwnerBucket+"."+prefix+">"))
	if err != nil {
		return nil, fmt.Errorf("natskv: active index: %w", err)
	}
	out := make(map[string]string, len(info.State.Subjects))
	for subj := range info.State.Subjects {
		id := subj[strings.LastIndexByte(subj, '.')+1:]
		if taskstate.ValidID(id) {
			out[id] = subj
		}
	}
	return out, nil
}

// CountActive implements taskstate.ActiveCounter.
func (s *Store) CountActive(ctx context.Context, owner string, limit int) (int, error) {
	if owner == "" {
		return 0, nil
	}
	entries, err := s.activeEntries(ctx, "a."+ownerHash(owner)+".")
	if err != nil {
		return 0, err
	}
	if limit <= 0 || len(entries) < limit {
		return len(entries), nil
	}
	// At the limit: make sure no stale entry is what refuses the task.
	live := 0
	for id, subj := range entries {
		t, err := s.checkActive(ctx, id, subj)
		if err != nil {
			return 0, err
		}
		if t != nil {
			live++
		}
	}
	return min(live, limit), nil
}

// checkActive reads the record of the active-index entry subj: the record
// if it is active, else nil, after purging the entry when it is stale (the
// record terminal, or missing and the entry older than indexGrace).
func (s *Store) checkActive(ctx context.Context, id, subj string) (*taskstate.Task, error) {
	t, err := s.Get(ctx, id)
	switch {
	case err == nil && !t.Status.Terminal():
		return t, nil
	case err == nil:
		return nil, s.unmarkActive(ctx, subj)
	case errors.Is(err, taskstate.ErrNotFound):
		e, err := s.owners.Get(ctx, strings.TrimPrefix(subj, "$KV."+s.cfg.OwnerBucket+"."))
		if err != nil || time.Since(e.Created()) < indexGrace {
			return nil, nil // gone already, or a Create may be under way
		}
		return nil, s.unmarkActive(ctx, subj)
	default:
		return nil, err
	}
}

// scanActive is Scan(active): through the active index, after walking
// every record once per Store (see above).
func (s *Store) scanActive(ctx context.Context, fn func(*taskstate.Task) bool) error {
	if err := s.reindex.once(ctx, s.indexActive); err != nil {
		return err
	}
	entries, err := s.activeEntries(ctx, "a.")
	if err != nil {
		return err
	}
	for id, subj := range entries {
		if err := ctx.Err(); err != nil {
			return err
		}
		t, err := s.checkActive(ctx, id, subj)
		if err != nil {
			return err
		}
		if t != nil && !fn(t) {
			return nil
		}
	}
	return nil
}

// indexActive walks every record and writes the index entries of each
// active one (its active-index entry and, when owned, its owner-index
// entry: Create publishes them with the record, so a creator that died
// between the acks may have left either out); an entry that exists is
// written again, which changes nothing.
func (s *Store) indexActive(ctx context.Context) error {
	var msgs []*nats.Msg
	err := s.scanAll(ctx, true, func(t *taskstate.Task) bool {
		msgs = append(msgs, s.newEntries(t)...)
		return true
	})
	if err != nil {
		return err
	}
	for len(msgs) > 0 {
		n := min(len(msgs), scanBatch)
		if err := s.publishAll(ctx, msgs[:n]); err != nil {
			return fmt.Errorf("natskv: active index: %w", err)
		}
		msgs = msgs[n:]
	}
	return nil
}

// onceFlag runs a function until it has succeeded once.
type onceFlag struct {
	mu   sync.Mutex
	done bool
}

func (o *onceFlag) once(ctx context.Context, f func(context.Context) error) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.done {
		return nil
	}
	if err := f(ctx); err != nil {
		return err
	}
	o.done = true
	return nil
}

// Lease implements taskstate.Leaser: the owner bucket's key lease.<name>
// holds the holder, with a per-message TTL of the lease's, so an expired
// lease is simply gone. Taking it is a create; renewing it is a write that
// expects the holder's own revision.
func (s *Store) Lease(ctx context.Context, name, holder string, ttl time.Duration) (bool, error) {
	if !taskstate.ValidLeaseName(name) || !taskstate.ValidLeaseName(holder) {
		return false, fmt.Errorf("natskv: lease %q for %q: not plain names", name, holder)
	}
	key := "lease." + name
	ttl = max(ttl, time.Second) // the smallest TTL JetStream accepts
	e, err := s.owners.Get(ctx, key)
	switch {
	case errors.Is(err, jetstream.ErrKeyNotFound) || errors.Is(err, jetstream.ErrKeyDeleted):
		_, err := s.owners.Create(ctx, key, []byte(holder), jetstream.KeyTTL(ttl))
		if errors.Is(err, jetstream.ErrKeyExists) {
			return false, nil // another holder took it first
		}
		if err != nil {
			return false, fmt.Errorf("natskv: lease %s: %w", name, err)
		}
		return true, nil
	case err != nil:
		return false, fmt.Errorf("natskv: lease %s: %w", name, err)
	case string(e.Value()) != holder:
		return false, nil
	}
	_, err = s.js.PublishMsg(ctx, &nats.Msg{Subject: "$KV." + s.cfg.OwnerBucket + "." + key, Data: []byte(holder)},
		jetstream.WithExpectLastSequencePerSubject(e.Revision()), jetstream.WithMsgTTL(ttl))
	if wrongLastSequence(err) {
		return false, nil // it expired and another holder took it
	}
	if err != nil {
		return false, fmt.Errorf("natskv: lease %s: %w", name, err)
	}
	return true, nil
}
