package natskv

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/mcpqueue/mcpqueue/taskstate"
)

// The owner index lists an owner's tasks: one empty entry per task, keyed
// <owner hash>.<creation time, 20 digits>.<task id>, so a key listing under
// the owner's hash comes back in creation order. An entry gets the record's
// TTL when the record turns terminal, so both expire together.
//
// Create writes the entry just before the record, so a stored task is always
// listed. An entry can outlive its record only when something failed between
// the two writes (or a duplicate Create wrote one); List skips such entries
// and purges them, but only once they are older than indexGrace, since a
// young entry without a record may belong to a Create still under way.

// indexGrace is how old an entry without a record must be before List purges
// it. It is also how long the purge markers stay.
const indexGrace = time.Minute

// defaultListLimit is the page size List uses for a limit of 0 or less.
const defaultListLimit = 50

func ownerHash(owner string) string {
	h := sha256.Sum256([]byte(owner))
	return hex.EncodeToString(h[:16])
}

func indexKey(t *taskstate.Task) string {
	return fmt.Sprintf("%s.%020d.%s", ownerHash(t.Owner), t.CreatedAt.UnixNano(), t.ID)
}

// validIndexKey reports whether k is an index key under prefix (an owner's
// hash and ".").
func validIndexKey(k, prefix string) bool {
	rest, ok := strings.CutPrefix(k, prefix)
	if !ok || len(rest) < 22 || rest[20] != '.' || !taskstate.ValidID(rest[21:]) {
		return false
	}
	return strings.Trim(rest[:20], "-0123456789") == ""
}

// index writes t's owner-index entry, expiring after ttl (the record's
// retention, at least the 1s JetStream allows) or never (ttl 0).
func (s *Store) index(ctx context.Context, t *taskstate.Task, ttl time.Duration) error {
	if t.Owner == "" {
		return nil
	}
	var opts []jetstream.PublishOpt
	if ttl > 0 {
		opts = append(opts, jetstream.WithMsgTTL(max(ttl, time.Second)))
	}
	if _, err := s.js.PublishMsg(ctx, &nats.Msg{Subject: "$KV." + s.cfg.OwnerBucket + "." + indexKey(t)}, opts...); err != nil {
		return fmt.Errorf("natskv: index %s: %w", t.ID, err)
	}
	return nil
}

// newEntries are a new task's index entries: its owner-index entry (an
// owned task) and, when it is active, its active-index entry.
func (s *Store) newEntries(t *taskstate.Task) []*nats.Msg {
	var msgs []*nats.Msg
	if t.Owner != "" {
		msgs = append(msgs, &nats.Msg{Subject: "$KV." + s.cfg.OwnerBucket + "." + indexKey(t)})
	}
	if !t.Status.Terminal() {
		msgs = append(msgs, &nats.Msg{Subject: s.activeSubject(t.Owner, t.ID)})
	}
	return msgs
}

// indexTerminal updates the entries of a task that has just turned
// terminal, in parallel: its owner-index entry expires with the record, and
// its active-index entry goes. A failure only leaves an entry that List
// drops once the record is gone, or one that CountActive and active Scan
// drop.
func (s *Store) indexTerminal(ctx context.Context, t *taskstate.Task) {
	var wg sync.WaitGroup
	if t.Owner != "" && t.TTLMs > 0 {
		wg.Go(func() { _ = s.index(ctx, t, t.TTL()) })
	}
	_ = s.unmarkActive(ctx, s.activeSubject(t.Owner, t.ID))
	wg.Wait()
}

// List pages through the owner's records: taskstate.Store.
func (s *Store) List(ctx context.Context, owner, cursor string, limit int) ([]*taskstate.Task, string, error) {
	if owner == "" {
		return nil, "", nil
	}
	if limit <= 0 {
		limit = defaultListLimit
	}
	prefix := ownerHash(owner) + "."
	after := ""
	if cursor != "" {
		b, err := base64.RawURLEncoding.DecodeString(cursor)
		if err != nil || !validIndexKey(string(b), prefix) {
			return nil, "", taskstate.ErrBadCursor
		}
		after = string(b)
	}
	lister, err := s.owners.ListKeysFiltered(ctx, prefix+">")
	if err != nil {
		return nil, "", fmt.Errorf("natskv: list: %w", err)
	}
	var keys []string
	for k := range lister.Keys() {
		if k > after {
			keys = append(keys, k)
		}
	}
	if err := ctx.Err(); err != nil {
		return nil, "", err // the lister stopped early
	}
	sort.Strings(keys)
	var out []*taskstate.Task
	for i, k := range keys {
		if len(out) == limit {
			return out, base64.RawURLEncoding.EncodeToString([]byte(keys[i-1])), nil
		}
		id := k[strings.LastIndexByte(k, '.')+1:]
		t, err := s.Get(ctx, id)
		switch {
		case err == nil && indexKey(t) == k:
			out = append(out, t)
		case err == nil:
			// The record is another owner's, or another creation's: the
			// entry came from a duplicate Create.
			s.unindex(ctx, k, 0)
		case errors.Is(err, taskstate.ErrNotFound):
			// The record expired just before its entry, or the entry is
			// left over from a failed Create, or a Create is under way.
			s.unindex(ctx, k, indexGrace)
		default:
			return nil, "", err
		}
	}
	return out, "", nil
}

// unindex purges the entry k if it is at least minAge old. A failure only
// leaves the entry for a later List.
func (s *Store) unindex(ctx context.Context, k string, minAge time.Duration) {
	e, err := s.owners.Get(ctx, k)
	if err != nil || time.Since(e.Created()) < minAge {
		return
	}
	_ = s.owners.Purge(ctx, k, jetstream.LastRevision(e.Revision()), jetstream.PurgeTTL(indexGrace))
}
