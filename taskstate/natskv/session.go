package natskv

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/mcpqueue/mcpqueue/taskstate"
)

// Sessions (taskstate.Sessions) live in their own bucket, whose MaxAge is the
// session lifetime. An owner's sessions are counted in the same bucket,
// under owners.<hash of the owner> (a key no session id can be): a JSON
// object of session id → expiry (Unix ms), changed by compare-and-set, so
// concurrent creations on several replicas cannot pass the cap together. It
// is written whenever one of its sessions is, so the bucket's MaxAge keeps
// it as long as its last session.

func ownerSessionsKey(owner string) string { return "owners." + ownerHash(owner) }

// CreateSession stores a new session within its owner's cap: taskstate.Sessions.
// The session is counted before it is stored, so a stored session is always
// counted.
func (s *Store) CreateSession(ctx context.Context, sess *taskstate.Session, limit int) error {
	b, err := taskstate.EncodeSession(sess)
	if err != nil {
		return fmt.Errorf("natskv: create session: %w", err)
	}
	if sess.Owner != "" {
		err := s.editOwnerSessions(ctx, sess.Owner, func(m map[string]int64, now time.Time) error {
			if limit > 0 && len(m) >= limit {
				return fmt.Errorf("%w: the owner has %d", taskstate.ErrSessionLimit, len(m))
			}
			m[sess.ID] = now.Add(s.cfg.SessionTTL).UnixMilli()
			return nil
		})
		if err != nil {
			return err
		}
	}
	if _, err := s.sessions.Put(ctx, sess.ID, b); err != nil {
		return fmt.Errorf("natskv: create session: %w", err)
	}
	return nil
}

// editOwnerSessions applies edit to the owner's live sessions (expired ones
// dropped) and writes the result if its revision is still the one read,
// reading again on a conflict. An error from edit is returned as it is.
func (s *Store) editOwnerSessions(ctx context.Context, owner string, edit func(m map[string]int64, now time.Time) error) error {
	key := ownerSessionsKey(owner)
	for {
		m := map[string]int64{}
		var rev uint64
		e, err := s.sessions.Get(ctx, key)
		switch {
		case err == nil:
			rev = e.Revision()
			_ = json.Unmarshal(e.Value(), &m) // unreadable: counted afresh
		case errors.Is(err, jetstream.ErrKeyNotFound), errors.Is(err, jetstream.ErrKeyDeleted):
		default:
			return fmt.Errorf("natskv: sessions of an owner: %w", err)
		}
		now := time.Now()
		for id, exp := range m {
			if exp <= now.UnixMilli() {
				delete(m, id)
			}
		}
		if err := edit(m, now); err != nil {
			return err
		}
		v, _ := json.Marshal(m)
		if rev == 0 {
			_, err = s.sessions.Create(ctx, key, v)
		} else {
			_, err = s.sessions.Update(ctx, key, v, rev)
		}
		switch {
		case err == nil:
			return nil
		case errors.Is(err, jetstream.ErrKeyExists), wrongLastSequence(err):
			if err := ctx.Err(); err != nil {
				return err
			}
		default:
			return fmt.Errorf("natskv: sessions of an owner: %w", err)
		}
	}
}

// PutSession stores the session: taskstate.Sessions. Its entry among its
// owner's sessions gets the new expiry.
func (s *Store) PutSession(ctx context.Context, sess *taskstate.Session) error {
	b, err := taskstate.EncodeSession(sess)
	if err != nil {
		return fmt.Errorf("natskv: put session: %w", err)
	}
	if sess.Owner != "" {
		if err := s.editOwnerSessions(ctx, sess.Owner, func(m map[string]int64, now time.Time) error {
			m[sess.ID] = now.Add(s.cfg.SessionTTL).UnixMilli()
			return nil
		}); err != nil {
			return err
		}
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

// DeleteSession removes a session, and its entry among its owner's
// sessions (nil if absent): taskstate.Sessions.
func (s *Store) DeleteSession(ctx context.Context, id string) error {
	sess, err := s.Session(ctx, id)
	if errors.Is(err, taskstate.ErrNotFound) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("natskv: delete session: %w", err)
	}
	if err := s.sessions.Purge(ctx, id); err != nil && !errors.Is(err, jetstream.ErrKeyNotFound) {
		return fmt.Errorf("natskv: delete session: %w", err)
	}
	if sess.Owner == "" {
		return nil
	}
	return s.editOwnerSessions(ctx, sess.Owner, func(m map[string]int64, _ time.Time) error {
		delete(m, id)
		return nil
	})
}
