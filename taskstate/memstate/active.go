package memstate

import (
	"context"
	"fmt"
	"time"

	"github.com/mcpqueue/mcpqueue/taskstate"
)

// markLocked keeps t's id among its owner's active ids exactly while t is
// active (ownerless tasks are not counted).
func (s *Store) markLocked(t *taskstate.Task) {
	if t.Owner == "" {
		return
	}
	ids := s.active[t.Owner]
	if t.Status.Terminal() {
		delete(ids, t.ID)
		if len(ids) == 0 {
			delete(s.active, t.Owner)
		}
		return
	}
	if ids == nil {
		ids = map[string]bool{}
		s.active[t.Owner] = ids
	}
	ids[t.ID] = true
}

// CountActive implements taskstate.ActiveCounter.
func (s *Store) CountActive(ctx context.Context, owner string, limit int) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := len(s.active[owner])
	if limit > 0 {
		n = min(n, limit)
	}
	return n, nil
}

// lease is a holder's claim on a named lease until expires.
type lease struct {
	holder  string
	expires time.Time
}

// Lease implements taskstate.Leaser.
func (s *Store) Lease(ctx context.Context, name, holder string, ttl time.Duration) (bool, error) {
	if !taskstate.ValidLeaseName(name) || !taskstate.ValidLeaseName(holder) {
		return false, fmt.Errorf("memstate: lease %q for %q: not plain names", name, holder)
	}
	now := time.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	if cur, ok := s.leases[name]; ok && cur.holder != holder && now.Before(cur.expires) {
		return false, nil
	}
	s.leases[name] = lease{holder: holder, expires: now.Add(ttl)}
	return true, nil
}
