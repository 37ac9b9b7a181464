package redisstate

import (
	"context"
	"errors"
	"fmt"

	"github.com/redis/go-redis/v9"

	"github.com/mcpqueue/mcpqueue/taskstate"
)

// The outbox (taskstate.Outbox, completion webhooks) is three keys under
// one hash tag, so its scripts run on a cluster: <prefix>{outbox}:data, a
// hash of the encoded deliveries by task id; <prefix>{outbox}:owner, a
// hash of each delivery's owner set; and <prefix>{outbox}:o:<owner hash>,
// the set of an owner's pending task ids, which CountDeliveries reads with
// one SCARD. The delivery loop reads the data hash with HSCAN: its cost
// follows the pending deliveries.

func (s *Store) outboxKeys(owner string) []string {
	k := s.cfg.Prefix + "{outbox}:"
	return []string{k + "data", k + "owner", k + "o:" + ownerHash(owner)}
}

// addDeliveryScript: KEYS data, owner, owner set; ARGV id, encoding,
// create (1: refuse an existing delivery, 0: refuse a missing one).
// Returns 1 on a write, 0 on a refusal.
var addDeliveryScript = redis.NewScript(`
local has = redis.call('HEXISTS', KEYS[1], ARGV[1])
if (ARGV[3] == '1' and has == 1) or (ARGV[3] == '0' and has == 0) then return 0 end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
redis.call('HSET', KEYS[2], ARGV[1], KEYS[3])
redis.call('SADD', KEYS[3], ARGV[1])
return 1`)

// removeDeliveryScript: KEYS data, owner; ARGV id.
var removeDeliveryScript = redis.NewScript(`
local set = redis.call('HGET', KEYS[2], ARGV[1])
if set then redis.call('SREM', set, ARGV[1]) end
redis.call('HDEL', KEYS[1], ARGV[1])
redis.call('HDEL', KEYS[2], ARGV[1])
return 1`)

// AddDelivery implements taskstate.Outbox.
func (s *Store) AddDelivery(ctx context.Context, d *taskstate.Delivery) error {
	return s.writeDelivery(ctx, d, true)
}

// PutDelivery implements taskstate.Outbox.
func (s *Store) PutDelivery(ctx context.Context, d *taskstate.Delivery) error {
	return s.writeDelivery(ctx, d, false)
}

func (s *Store) writeDelivery(ctx context.Context, d *taskstate.Delivery, create bool) error {
	b, err := taskstate.EncodeDelivery(d)
	if err != nil {
		return err
	}
	flag, refusal := "0", taskstate.ErrNotFound
	if create {
		flag, refusal = "1", taskstate.ErrExists
	}
	n, err := addDeliveryScript.Run(ctx, s.rdb, s.outboxKeys(d.Owner), d.TaskID, b, flag).Int()
	if err != nil {
		return fmt.Errorf("redisstate: outbox: %w", err)
	}
	if n == 0 {
		return refusal
	}
	return nil
}

// RemoveDelivery implements taskstate.Outbox.
func (s *Store) RemoveDelivery(ctx context.Context, taskID string) error {
	if err := removeDeliveryScript.Run(ctx, s.rdb, s.outboxKeys("")[:2], taskID).Err(); err != nil {
		return fmt.Errorf("redisstate: outbox: %w", err)
	}
	return nil
}

// Deliveries implements taskstate.Outbox.
func (s *Store) Deliveries(ctx context.Context, fn func(*taskstate.Delivery) bool) error {
	it := s.rdb.HScan(ctx, s.outboxKeys("")[0], 0, "", 100).Iterator()
	for it.Next(ctx) {
		if !it.Next(ctx) { // fields and values alternate
			break
		}
		d, err := taskstate.DecodeDelivery([]byte(it.Val()))
		if err != nil {
			return err
		}
		if !fn(d) {
			return nil
		}
	}
	if err := it.Err(); err != nil && !errors.Is(err, redis.Nil) {
		return fmt.Errorf("redisstate: outbox: %w", err)
	}
	return nil
}

// CountDeliveries implements taskstate.Outbox.
func (s *Store) CountDeliveries(ctx context.Context, owner string) (int, error) {
	if owner == "" {
		return 0, nil
	}
	n, err := s.rdb.SCard(ctx, s.outboxKeys(owner)[2]).Result()
	if err != nil {
		return 0, fmt.Errorf("redisstate: outbox: %w", err)
	}
	return int(n), nil
}
