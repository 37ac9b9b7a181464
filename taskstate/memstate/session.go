package memstate

import (
	"context"
	"fmt"

	"github.com/mcpqueue/mcpqueue/taskstate"
)

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
