package redisstate

import (
	"context"
	"errors"
	"fmt"

	"github.com/redis/go-redis/v9"

	"github.com/mcpqueue/mcpqueue/taskstate"
)

// Sessions (taskstate.Sessions) are one JSON string each under
// <Prefix>session:<id>, written with an expiry of Config.SessionTTL.

func (s *Store) sessionKey(id string) string { return s.cfg.Prefix + "session:" + id }

// PutSession stores the session: taskstate.Sessions.
func (s *Store) PutSession(ctx context.Context, sess *taskstate.Session) error {
	b, err := taskstate.EncodeSession(sess)
	if err != nil {
		return fmt.Errorf("redisstate: put session: %w", err)
	}
	if err := s.rdb.Set(ctx, s.sessionKey(sess.ID), b, s.cfg.SessionTTL).Err(); err != nil {
		return fmt.Errorf("redisstate: put session: %w", err)
	}
	return nil
}

// Session reads a session (ErrNotFound if absent or expired): taskstate.Sessions.
func (s *Store) Session(ctx context.Context, id string) (*taskstate.Session, error) {
	if !taskstate.ValidID(id) {
		return nil, taskstate.ErrNotFound
	}
	b, err := s.rdb.Get(ctx, s.sessionKey(id)).Bytes()
	if errors.Is(err, redis.Nil) {
		return nil, taskstate.ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("redisstate: session %s: %w", id, err)
	}
	return taskstate.DecodeSession(b)
}

// DeleteSession removes a session (nil if absent): taskstate.Sessions.
func (s *Store) DeleteSession(ctx context.Context, id string) error {
	if !taskstate.ValidID(id) {
		return nil
	}
	if err := s.rdb.Del(ctx, s.sessionKey(id)).Err(); err != nil {
		return fmt.Errorf("redisstate: delete session: %w", err)
	}
	return nil
}
