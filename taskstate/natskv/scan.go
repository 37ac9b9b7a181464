package natskv

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/mcpqueue/mcpqueue/taskstate"
)

// Scan implements taskstate.Store: an active scan goes through the active
// index (active.go), a full one reads every record (scanAll).
func (s *Store) Scan(ctx context.Context, active bool, fn func(*taskstate.Task) bool) error {
	if active {
		return s.scanActive(ctx, fn)
	}
	return s.scanAll(ctx, false, fn)
}

// scanAll reads every record. An ordered consumer with deliver-last-per-
// subject reads the newest value of every key, pulled in batches of
// scanBatch, until the consumer has nothing pending. Pulling bounds what the
// client holds: a push watcher over a bucket retaining 100,000 finished
// tasks had the server push them all into the client's buffers at once, and
// the api's resident memory grew with the store. With active set, terminal
// records are skipped undecoded (see mayBeActive).
func (s *Store) scanAll(ctx context.Context, active bool, fn func(*taskstate.Task) bool) error {
	st, err := s.js.Stream(ctx, "KV_"+s.cfg.TaskBucket)
	if err != nil {
		return fmt.Errorf("natskv: scan: %w", err)
	}
	if st.CachedInfo().State.Msgs == 0 {
		return nil
	}
	cons, err := st.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{
		FilterSubjects: []string{s.subj + ">"},
		DeliverPolicy:  jetstream.DeliverLastPerSubjectPolicy,
	})
	if err != nil {
		return fmt.Errorf("natskv: scan: %w", err)
	}
	// One consumer for the whole scan (each Fetch of an ordered consumer
	// would create it anew); Messages pulls scanBatch at a time.
	it, err := cons.Messages(jetstream.PullMaxMessages(scanBatch))
	if err != nil {
		return fmt.Errorf("natskv: scan: %w", err)
	}
	defer it.Stop()
	defer context.AfterFunc(ctx, it.Stop)()
	for {
		m, err := it.Next(jetstream.NextMaxWait(5 * time.Second))
		if err := ctx.Err(); err != nil {
			return err
		}
		if errors.Is(err, nats.ErrTimeout) {
			return nil // what was counted expired or was purged meanwhile
		}
		if err != nil {
			return fmt.Errorf("natskv: scan: %w", err)
		}
		meta, err := m.Metadata()
		if err != nil {
			return fmt.Errorf("natskv: scan: %w", err)
		}
		if !s.scanOne(m, meta.Sequence.Stream, active, fn) {
			return nil
		}
		if meta.NumPending == 0 {
			return nil // every current value was delivered
		}
	}
}

// scanBatch is how many records one pull of a scan asks for.
const scanBatch = 256

// scanOne hands a scanned record to fn unless it is a delete marker or,
// for an active scan, finished; false when fn asks to stop.
func (s *Store) scanOne(m jetstream.Msg, rev uint64, active bool, fn func(*taskstate.Task) bool) bool {
	if op := m.Headers().Get("KV-Operation"); op != "" {
		return true // a delete or purge marker
	}
	v := m.Data()
	if active && !mayBeActive(v) {
		return true
	}
	t, err := taskstate.Decode(v, rev)
	if err != nil {
		return true // a record this build cannot read is not the scan's to fail on
	}
	if active && t.Status.Terminal() {
		return true
	}
	return fn(t)
}

// Status fields of the active statuses as stored records spell them.
var activeStatus = [][]byte{
	[]byte(`"status":"` + string(taskstate.Working) + `"`),
	[]byte(`"status":"` + string(taskstate.InputRequired) + `"`),
}

// mayBeActive is false only for a record that cannot be active: it holds
// neither active status field anywhere. Terminal records, most of what an
// active scan streams past, are skipped without being decoded; a match
// (even inside a result) is decoded and judged by its real status.
func mayBeActive(v []byte) bool {
	for _, s := range activeStatus {
		if bytes.Contains(v, s) {
			return true
		}
	}
	return false
}

// Delete implements taskstate.Store: it purges the key (its history too)
// if the record is still the terminal version it read, and the task's
// blobs.
func (s *Store) Delete(ctx context.Context, id string) error {
	t, err := taskstate.GetPurgeable(ctx, s, id)
	if err != nil {
		return err
	}
	err = s.tasks.Purge(ctx, id, jetstream.LastRevision(t.Revision))
	if wrongLastSequence(err) {
		return taskstate.ErrConflict // terminal records do not change: it was deleted meanwhile
	}
	if err != nil {
		return fmt.Errorf("natskv: delete %s: %w", id, err)
	}
	s.announce(id, 0, nil)
	if t.Owner != "" {
		_ = s.owners.Purge(ctx, indexKey(t))
	}
	_ = s.unmarkActive(ctx, s.activeSubject(t.Owner, id))
	// Its blobs (result, artifacts) go with it.
	return s.DeleteBlobs(ctx, id)
}
