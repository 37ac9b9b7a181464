package memstate

import (
	"context"
	"time"

	"github.com/mcpqueue/mcpqueue/taskstate"
)

var _ taskstate.RateLimiter = (*Store)(nil)

// TakeRate implements taskstate.RateLimiter: each key's next free slot in
// a map, for every client of this Store (one process: unit tests).
func (s *Store) TakeRate(ctx context.Context, key string, r taskstate.Rate) (time.Duration, error) {
	if err := taskstate.CheckRateTake("memstate", key, r); err != nil {
		return 0, err
	}
	now := time.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	next, wait := taskstate.NextSlot(now, s.rates[key], r.Interval())
	s.rates[key] = next
	return wait, nil
}
