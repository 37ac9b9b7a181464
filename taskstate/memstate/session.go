package memstate

import (
	"context"
	"fmt"

	"github.com/mcpqueue/mcpqueue/taskstate"
)

// PutSession implements taskstate.Sessions: the session expires
// Config.SessionTTL after this write.
func (s *Store) PutSession(ctx context.Context, sess *taskstate.Session) error {
	if !taskstate.ValidID(sess.ID) {
		return fmt.Errorf("memstate: put session: invalid session id %q", sess.ID)
	}
	return s.putJSON(s.sessions, sess.ID, sess, s.cfg.SessionTTL, "put session")
}

// Session implements taskstate.Sessions.
func (s *Store) Session(ctx context.Context, id string) (*taskstate.Session, error) {
	b, ok := s.entry(s.sessions, id)
	if !ok {
		return nil, fmt.Errorf("%w: session %.64q", taskstate.ErrNotFound, id)
	}
	return decodeJSON[taskstate.Session](b, "session "+id)
}

// DeleteSession implements taskstate.Sessions.
func (s *Store) DeleteSession(ctx context.Context, id string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.sessions, id)
	return nil
}
