package natskv

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/mcpqueue/mcpqueue/taskstate"
)

// Recurring schedules (issue #32 item 5): the owner bucket's keys
// schedule.<name>, beside the leases (lease.<name>), each the schedule's
// JSON.

const scheduleKeyPrefix = "schedule."

// PutSchedule implements taskstate.Schedules.
func (s *Store) PutSchedule(ctx context.Context, sc *taskstate.Schedule) error {
	if err := taskstate.CheckSchedule(sc); err != nil {
		return err
	}
	b, err := json.Marshal(sc)
	if err != nil {
		return fmt.Errorf("natskv: schedule %s: %w", sc.Name, err)
	}
	if _, err := s.owners.Put(ctx, scheduleKeyPrefix+sc.Name, b); err != nil {
		return fmt.Errorf("natskv: schedule %s: %w", sc.Name, err)
	}
	return nil
}

// DeleteSchedule implements taskstate.Schedules.
func (s *Store) DeleteSchedule(ctx context.Context, name string) error {
	if !taskstate.ValidLeaseName(name) {
		return fmt.Errorf("natskv: schedule %s: %w", name, taskstate.ErrNotFound)
	}
	key := scheduleKeyPrefix + name
	if _, err := s.owners.Get(ctx, key); err != nil {
		if errors.Is(err, jetstream.ErrKeyNotFound) || errors.Is(err, jetstream.ErrKeyDeleted) {
			return fmt.Errorf("natskv: schedule %s: %w", name, taskstate.ErrNotFound)
		}
		return fmt.Errorf("natskv: schedule %s: %w", name, err)
	}
	if err := s.owners.Purge(ctx, key); err != nil {
		return fmt.Errorf("natskv: schedule %s: %w", name, err)
	}
	return nil
}

// ListSchedules implements taskstate.Schedules.
func (s *Store) ListSchedules(ctx context.Context) ([]*taskstate.Schedule, error) {
	keys, err := s.owners.ListKeysFiltered(ctx, scheduleKeyPrefix+"*")
	if err != nil {
		return nil, fmt.Errorf("natskv: schedules: %w", err)
	}
	var out []*taskstate.Schedule
	for key := range keys.Keys() {
		e, err := s.owners.Get(ctx, key)
		if errors.Is(err, jetstream.ErrKeyNotFound) || errors.Is(err, jetstream.ErrKeyDeleted) {
			continue // removed meanwhile
		}
		if err != nil {
			return nil, fmt.Errorf("natskv: schedule %s: %w", key, err)
		}
		var sc taskstate.Schedule
		if err := json.Unmarshal(e.Value(), &sc); err != nil {
			return nil, fmt.Errorf("natskv: schedule %s: %w", key, err)
		}
		out = append(out, &sc)
	}
	slices.SortFunc(out, func(a, b *taskstate.Schedule) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}
