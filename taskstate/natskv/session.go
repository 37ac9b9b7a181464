package natskv

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/mcpqueue/mcpqueue/taskstate"
)

// Sessions (taskstate.Sessions) live in their own bucket, whose MaxAge is the
// session lifetime.

// PutSession stores the session: taskstate.Sessions.
func (s *Store) PutSession(ctx context.Context, sess *taskstate.Session) error {
	if !taskstate.ValidID(sess.ID) {
		return fmt.Errorf("natskv: session: invalid id %q", sess.ID)
	}
	b, err := json.Marshal(sess)
	if err != nil {
		return err
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
	var sess taskstate.Session
	if err := json.Unmarshal(e.Value(), &sess); err != nil {
		return nil, fmt.Errorf("natskv: decode session: %w", err)
	}
	return &sess, nil
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
