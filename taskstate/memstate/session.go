package memstate

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/mcpqueue/mcpqueue/taskstate"
)

// PutSession implements taskstate.Sessions: the session expires
// Config.SessionTTL after this write.
func (s *Store) PutSession(ctx context.Context, sess *taskstate.Session) error {
	if !taskstate.ValidID(sess.ID) {
		return fmt.Errorf("memstate: put session: invalid session id %q", sess.ID)
	}
	b, err := json.Marshal(sess)
	if err != nil {
		return fmt.Errorf("memstate: put session: %w", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.sessions.put(sess.ID, b, s.cfg.SessionTTL, time.Now())
	return nil
}

// Session implements taskstate.Sessions.
func (s *Store) Session(ctx context.Context, id string) (*taskstate.Session, error) {
	s.mu.Lock()
	b, ok := s.sessions.get(id, time.Now())
	s.mu.Unlock()
	if !ok {
		return nil, fmt.Errorf("%w: session %.64q", taskstate.ErrNotFound, id)
	}
	var sess taskstate.Session
	if err := json.Unmarshal(b, &sess); err != nil {
		return nil, fmt.Errorf("memstate: session %s: %w", id, err)
	}
	return &sess, nil
}

// DeleteSession implements taskstate.Sessions.
func (s *Store) DeleteSession(ctx context.Context, id string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.sessions, id)
	return nil
}
