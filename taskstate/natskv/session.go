package natskv

import (
	"context"
	"errors"
	"fmt"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/mcpqueue/mcpqueue/taskstate"
)

// Sessions (taskstate.Sessions) live in their own bucket, whose MaxAge is the
// session lifetime.

// PutSession stores the session: taskstate.Sessions.
func (s *Store) PutSession(ctx context.Context, sess *taskstate.Session) error {
	b, err := taskstate.EncodeSession(sess)
	if err != nil {
		return fmt.Errorf("natskv: put session: %w", err)
	}
	if _, err := s.sessions.Put(ctx, sess.ID, b); err != nil {
		return fmt.Errorf("natskv: put session: %w", err)
	}
	return nil
}

// Session reads a session (ErrNotFound if absent or expired): taskstate.Sessions.
func (s *Store) Session(ctx context.Context, id string) (*taskstate.Session, error) {
	e, err := getByID(ctx, s.sessions, id, "session")
	if err != nil {
		return nil, err
	}
	return taskstate.DecodeSession(e.Value())
}

// DeleteSession removes a session (nil if absent): taskstate.Sessions.
func (s *Store) DeleteSession(ctx context.Context, id string) error {
	if !taskstate.ValidID(id) {
		return nil
	}
	if err := s.sessions.Purge(ctx, id); err != nil && !errors.Is(err, jetstream.ErrKeyNotFound) {
		return fmt.Errorf("natskv: delete session: %w", err)
	}
	return nil
}
