package memstate

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/mcpqueue/mcpqueue/taskstate"
)

// Recurring schedules (issue #32 item 5): a map by name.

// PutSchedule implements taskstate.Schedules.
func (s *Store) PutSchedule(_ context.Context, sc *taskstate.Schedule) error {
	if err := taskstate.CheckSchedule(sc); err != nil {
		return err
	}
	c := *sc
	s.schedules.Store(sc.Name, &c)
	return nil
}

// DeleteSchedule implements taskstate.Schedules.
func (s *Store) DeleteSchedule(_ context.Context, name string) error {
	if _, ok := s.schedules.LoadAndDelete(name); !ok {
		return fmt.Errorf("memstate: schedule %s: %w", name, taskstate.ErrNotFound)
	}
	return nil
}

// ListSchedules implements taskstate.Schedules.
func (s *Store) ListSchedules(context.Context) ([]*taskstate.Schedule, error) {
	var out []*taskstate.Schedule
	s.schedules.Range(func(_, v any) bool {
		c := *v.(*taskstate.Schedule)
		out = append(out, &c)
		return true
	})
	slices.SortFunc(out, func(a, b *taskstate.Schedule) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}
