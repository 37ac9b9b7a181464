package natskv

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/mcpqueue/mcpqueue/taskstate"
)

var _ taskstate.RateLimiter = (*Store)(nil)

// TakeRate implements taskstate.RateLimiter with a compare-and-set on the
// owner bucket's key rate.<hash of key>, which holds when the key's next
// slot is free (Unix nanoseconds, decimal): a slot that is due is taken by
// writing now + interval on the revision read, so of clients racing for
// it one write wins and the others read again. The entry's per-message
// TTL (the interval and a second) lets a quiet key vanish. The times are
// the clients' clocks: hosts out of step by d space two slots of
// different hosts up to d closer (or further) than the interval.
func (s *Store) TakeRate(ctx context.Context, key string, r taskstate.Rate) (time.Duration, error) {
	if err := taskstate.CheckRateTake("natskv", key, r); err != nil {
		return 0, err
	}
	k := "rate." + ownerHash(key)
	iv := r.Interval()
	ttl := iv.Truncate(time.Second) + 2*time.Second // at least iv + 1s, in whole seconds
	for {
		var next time.Time
		var rev uint64
		e, err := s.owners.Get(ctx, k)
		switch {
		case errors.Is(err, jetstream.ErrKeyNotFound) || errors.Is(err, jetstream.ErrKeyDeleted):
		case err != nil:
			return 0, fmt.Errorf("natskv: rate limit %s: %w", key, err)
		default:
			rev = e.Revision()
			if n, perr := strconv.ParseInt(string(e.Value()), 10, 64); perr == nil {
				next = time.Unix(0, n)
			}
		}
		now := time.Now()
		newNext, wait := taskstate.NextSlot(now, next, iv)
		if wait > 0 {
			return wait, nil
		}
		val := []byte(strconv.FormatInt(newNext.UnixNano(), 10))
		if rev == 0 {
			_, err = s.owners.Create(ctx, k, val, jetstream.KeyTTL(ttl))
			if errors.Is(err, jetstream.ErrKeyExists) {
				continue // another client took it first
			}
		} else {
			_, err = s.js.PublishMsg(ctx, &nats.Msg{Subject: "$KV." + s.cfg.OwnerBucket + "." + k, Data: val},
				jetstream.WithExpectLastSequencePerSubject(rev), jetstream.WithMsgTTL(ttl))
			if wrongLastSequence(err) {
				continue
			}
		}
		if err != nil {
			return 0, fmt.Errorf("natskv: rate limit %s: %w", key, err)
		}
		return 0, nil
	}
}
