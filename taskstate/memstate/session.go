package memstate

import (
	"context"
	"fmt"
	"time"

	"github.com/mcpqueue/mcpqueue/taskstate"
)

// CreateSession implements taskstate.Sessions: the owner's live sessions
// are counted under the store's lock.
func (s *Store) CreateSession(ctx context.Context, sess *taskstate.Session, max int) error {
	b, err := taskstate.EncodeSession(sess)
	if err != nil {
		return fmt.Errorf("memstate: create session: %w", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	now := time.Now()
	if max > 0 && sess.Owner != "" {
		n := 0
		for id := range s.sessions {
			if data, ok := s.sessions.get(id, now); ok {
				if other, err := taskstate.DecodeSession(data); err == nil && other.Owner == sess.Owner {
					n++
				}
			}
		}
		if n >= max {
			return fmt.Errorf("%w: owner has %d", taskstate.ErrSessionLimit, n)
		}
	}
	s.sessions.put(sess.ID, b, s.cfg.SessionTTL, now)
	return nil
}

// PutSession implements taskstate.Sessions: the session expires
// Config.SessionTTL after this write.
func (s *Store) PutSession(ctx context.Context, sess *taskstate.Session) error {
	b, err := taskstate.EncodeSession(sess)
	if err != nil {
		return fmt.Errorf("memstate: put session: %w", err)
	}
	s.putEntry(s.sessions, sess.ID, b, s.cfg.SessionTTL)
	return nil
}

// Session implements taskstate.Sessions.
func (s *Store) Session(ctx context.Context, id string) (*taskstate.Session, error) {
	b, ok := s.entry(s.sessions, id)
	if !ok {
		return nil, fmt.Errorf("%w: session %.64q", taskstate.ErrNotFound, id)
	}
	return taskstate.DecodeSession(b)
}

// DeleteSession implements taskstate.Sessions.
func (s *Store) DeleteSession(ctx context.Context, id string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.sessions, id)
	return nil
}
