package redisstate

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/mcpqueue/mcpqueue/taskstate"
)

// Recurring schedules (issue #32 item 5): one hash, <prefix>schedules,
// name → the schedule's JSON.

func (s *Store) schedulesKey() string { return s.cfg.Prefix + "schedules" }

// PutSchedule implements taskstate.Schedules.
func (s *Store) PutSchedule(ctx context.Context, sc *taskstate.Schedule) error {
	if err := taskstate.CheckSchedule(sc); err != nil {
		return err
	}
	b, err := json.Marshal(sc)
	if err != nil {
		return fmt.Errorf("redisstate: schedule %s: %w", sc.Name, err)
	}
	if err := s.rdb.HSet(ctx, s.schedulesKey(), sc.Name, b).Err(); err != nil {
		return fmt.Errorf("redisstate: schedule %s: %w", sc.Name, err)
	}
	return nil
}

// DeleteSchedule implements taskstate.Schedules.
func (s *Store) DeleteSchedule(ctx context.Context, name string) error {
	n, err := s.rdb.HDel(ctx, s.schedulesKey(), name).Result()
	if err != nil {
		return fmt.Errorf("redisstate: schedule %s: %w", name, err)
	}
	if n == 0 {
		return fmt.Errorf("redisstate: schedule %s: %w", name, taskstate.ErrNotFound)
	}
	return nil
}

// ListSchedules implements taskstate.Schedules.
func (s *Store) ListSchedules(ctx context.Context) ([]*taskstate.Schedule, error) {
	all, err := s.rdb.HGetAll(ctx, s.schedulesKey()).Result()
	if err != nil {
		return nil, fmt.Errorf("redisstate: schedules: %w", err)
	}
	out := make([]*taskstate.Schedule, 0, len(all))
	for name, v := range all {
		var sc taskstate.Schedule
		if err := json.Unmarshal([]byte(v), &sc); err != nil {
			return nil, fmt.Errorf("redisstate: schedule %s: %w", name, err)
		}
		out = append(out, &sc)
	}
	slices.SortFunc(out, func(a, b *taskstate.Schedule) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}
