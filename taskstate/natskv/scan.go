package natskv

import (
	"bytes"
	"context"
	"errors"
	"fmt"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/mcpqueue/mcpqueue/taskstate"
)

// Scan implements taskstate.Store. A bucket-wide watcher with history off
// delivers the newest value of every key and then a nil marker; the scan
// ends there. Terminal records are decoded too (the status lives inside the
// value), and skipped when only active ones are asked for.
func (s *Store) Scan(ctx context.Context, active bool, fn func(*taskstate.Task) bool) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	w, err := s.tasks.WatchAll(ctx, jetstream.IgnoreDeletes())
	if err != nil {
		return fmt.Errorf("natskv: scan: %w", err)
	}
	defer func() { _ = w.Stop() }()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case e, ok := <-w.Updates():
			if !ok {
				return fmt.Errorf("natskv: scan: watcher stopped")
			}
			if e == nil {
				return nil // every current value was delivered
			}
			if active && !mayBeActive(e.Value()) {
				continue
			}
			t, err := taskstate.Decode(e.Value(), e.Revision())
			if err != nil {
				continue // a record this build cannot read is not the scan's to fail on
			}
			if active && t.Status.Terminal() {
				continue
			}
			if !fn(t) {
				return nil
			}
		}
	}
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
// if the record is still the terminal version it read.
func (s *Store) Delete(ctx context.Context, id string) error {
	t, err := s.Get(ctx, id)
	if err != nil {
		return err
	}
	if err := taskstate.Purgeable(t); err != nil {
		return err
	}
	err = s.tasks.Purge(ctx, id, jetstream.LastRevision(t.Revision))
	var apiErr *jetstream.APIError
	if errors.As(err, &apiErr) && (apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequence ||
		apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequenceConstant) {
		return taskstate.ErrConflict // terminal records do not change: it was deleted meanwhile
	}
	if err != nil {
		return fmt.Errorf("natskv: delete %s: %w", id, err)
	}
	if t.Owner != "" {
		_ = s.owners.Purge(ctx, indexKey(t))
	}
	return nil
}
