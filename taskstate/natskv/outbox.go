package natskv

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/mcpqueue/mcpqueue/taskstate"
)

// The outbox (taskstate.Outbox, completion webhooks) keeps one entry per
// pending delivery in the owner bucket, keyed w.<owner hash>.<task id>, so
// that the delivery loop finds them with one stream-info request over the
// subjects under w. and an owner's count is one such request over
// w.<owner hash>. (as the active index does, active.go). A delivered or
// abandoned entry is removed with a subject purge, which leaves no marker.

// outboxKey is the delivery's key in the owner bucket.
func outboxKey(owner, id string) string { return "w." + ownerHash(owner) + "." + id }

// AddDelivery implements taskstate.Outbox.
func (s *Store) AddDelivery(ctx context.Context, d *taskstate.Delivery) error {
	b, err := taskstate.EncodeDelivery(d)
	if err != nil {
		return err
	}
	if _, err := s.owners.Create(ctx, outboxKey(d.Owner, d.TaskID), b); errors.Is(err, jetstream.ErrKeyExists) {
		return taskstate.ErrExists
	} else if err != nil {
		return fmt.Errorf("natskv: outbox: %w", err)
	}
	return nil
}

// PutDelivery implements taskstate.Outbox.
func (s *Store) PutDelivery(ctx context.Context, d *taskstate.Delivery) error {
	b, err := taskstate.EncodeDelivery(d)
	if err != nil {
		return err
	}
	key := outboxKey(d.Owner, d.TaskID)
	e, err := s.owners.Get(ctx, key)
	if errors.Is(err, jetstream.ErrKeyNotFound) || errors.Is(err, jetstream.ErrKeyDeleted) {
		return taskstate.ErrNotFound
	}
	if err != nil {
		return fmt.Errorf("natskv: outbox: %w", err)
	}
	if _, err := s.owners.Update(ctx, key, b, e.Revision()); err != nil {
		return fmt.Errorf("natskv: outbox: %w", err)
	}
	return nil
}

// RemoveDelivery implements taskstate.Outbox: a purge of the task's entry
// whatever its owner hash.
func (s *Store) RemoveDelivery(ctx context.Context, taskID string) error {
	if !taskstate.ValidID(taskID) {
		return nil
	}
	subj := "$KV." + s.cfg.OwnerBucket + ".w.*." + taskID
	if err := s.ownerStream.Purge(ctx, jetstream.WithPurgeSubject(subj)); err != nil {
		return fmt.Errorf("natskv: outbox: %w", err)
	}
	return nil
}

// Deliveries implements taskstate.Outbox.
func (s *Store) Deliveries(ctx context.Context, fn func(*taskstate.Delivery) bool) error {
	entries, err := s.activeEntries(ctx, "w.")
	if err != nil {
		return err
	}
	for _, subj := range entries {
		e, err := s.owners.Get(ctx, strings.TrimPrefix(subj, "$KV."+s.cfg.OwnerBucket+"."))
		if errors.Is(err, jetstream.ErrKeyNotFound) || errors.Is(err, jetstream.ErrKeyDeleted) {
			continue // removed meanwhile
		}
		if err != nil {
			return fmt.Errorf("natskv: outbox: %w", err)
		}
		d, err := taskstate.DecodeDelivery(e.Value())
		if err != nil {
			return err
		}
		if !fn(d) {
			return nil
		}
	}
	return nil
}

// CountDeliveries implements taskstate.Outbox.
func (s *Store) CountDeliveries(ctx context.Context, owner string) (int, error) {
	if owner == "" {
		return 0, nil
	}
	entries, err := s.activeEntries(ctx, "w."+ownerHash(owner)+".")
	if err != nil {
		return 0, err
	}
	return len(entries), nil
}
