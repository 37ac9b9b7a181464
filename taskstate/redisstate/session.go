package redisstate

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/mcpqueue/mcpqueue/taskstate"
)

// Sessions (taskstate.Sessions) are one JSON string each under
// <Prefix>session:<id>, written with an expiry of Config.SessionTTL. An
// owner's sessions are counted in a sorted set <Prefix>session-owner:<hash
// of the owner>, one member per session scored with its expiry (Unix ms);
// the set expires with its last session. CreateSession drops the expired
// members, counts and writes in one script, so concurrent creations on
// several replicas cannot pass the cap together.

func (s *Store) sessionKey(id string) string { return s.cfg.Prefix + "session:" + id }

func (s *Store) sessionOwnerKey(owner string) string {
	h := sha256.Sum256([]byte(owner))
	return s.cfg.Prefix + "session-owner:" + hex.EncodeToString(h[:16])
}

// createSessionScript: KEYS[1] the session, KEYS[2] its owner's set (or
// none: no cap, no count); ARGV[1] the session JSON, ARGV[2] its id, ARGV[3]
// now (Unix ms), ARGV[4] the TTL (ms), ARGV[5] the cap (0: none). Returns 1
// once stored, 0 at the cap.
var createSessionScript = redis.NewScript(`
if KEYS[2] then
  local now, ttl, max = tonumber(ARGV[3]), tonumber(ARGV[4]), tonumber(ARGV[5])
  redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', now)
  if max > 0 and redis.call('ZCARD', KEYS[2]) >= max then return 0 end
  redis.call('ZADD', KEYS[2], now + ttl, ARGV[2])
  redis.call('PEXPIRE', KEYS[2], ttl)
end
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[4])
return 1
`)

// CreateSession stores a new session within its owner's cap: taskstate.Sessions.
func (s *Store) CreateSession(ctx context.Context, sess *taskstate.Session, limit int) error {
	b, err := taskstate.EncodeSession(sess)
	if err != nil {
		return fmt.Errorf("redisstate: create session: %w", err)
	}
	keys := []string{s.sessionKey(sess.ID)}
	if sess.Owner != "" {
		keys = append(keys, s.sessionOwnerKey(sess.Owner))
	}
	ttl := s.cfg.SessionTTL.Milliseconds()
	n, err := createSessionScript.Run(ctx, s.rdb, keys, b, sess.ID, time.Now().UnixMilli(), ttl, max(limit, 0)).Int()
	if err != nil {
		return fmt.Errorf("redisstate: create session: %w", err)
	}
	if n == 0 {
		return fmt.Errorf("%w: the owner has %d", taskstate.ErrSessionLimit, limit)
	}
	return nil
}

// PutSession stores the session: taskstate.Sessions. Its member in the
// owner's set (if it has one) gets the new expiry.
func (s *Store) PutSession(ctx context.Context, sess *taskstate.Session) error {
	b, err := taskstate.EncodeSession(sess)
	if err != nil {
		return fmt.Errorf("redisstate: put session: %w", err)
	}
	_, err = s.rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
		p.Set(ctx, s.sessionKey(sess.ID), b, s.cfg.SessionTTL)
		if sess.Owner != "" {
			ok := s.sessionOwnerKey(sess.Owner)
			p.ZAddXX(ctx, ok, redis.Z{Score: float64(time.Now().Add(s.cfg.SessionTTL).UnixMilli()), Member: sess.ID})
			p.PExpire(ctx, ok, s.cfg.SessionTTL)
		}
		return nil
	})
	if err != nil {
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

// DeleteSession removes a session, and its member in its owner's set (nil
// if absent): taskstate.Sessions.
func (s *Store) DeleteSession(ctx context.Context, id string) error {
	sess, err := s.Session(ctx, id)
	if errors.Is(err, taskstate.ErrNotFound) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("redisstate: delete session: %w", err)
	}
	_, err = s.rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
		p.Del(ctx, s.sessionKey(id))
		if sess.Owner != "" {
			p.ZRem(ctx, s.sessionOwnerKey(sess.Owner), id)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("redisstate: delete session: %w", err)
	}
	return nil
}
