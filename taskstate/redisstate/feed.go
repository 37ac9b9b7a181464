package redisstate

import (
	"context"
	"fmt"
	"strings"

	"github.com/mcpqueue/mcpqueue/internal/redissub"
	"github.com/mcpqueue/mcpqueue/taskstate"
)

var _ taskstate.Feed = (*Store)(nil)

// Changes implements taskstate.Feed with a pattern subscription on every
// record's change channel (<Prefix>watch:*), shared with the watches' pub/sub
// connection. The create and update scripts PUBLISH each version there. A
// reconnection loses what was published meanwhile: the consumer gets a nil.
func (s *Store) Changes(ctx context.Context) (<-chan *taskstate.Task, error) {
	q := taskstate.NewFeedQueue()
	pattern := globEscape(s.cfg.Prefix+"watch:") + "*"
	idAt := len(s.cfg.Prefix + "watch:")
	sub, err := s.sub.PSubscribe(ctx, pattern, redissub.Handler{
		Message: func(channel, payload string) {
			if len(channel) <= idAt {
				return
			}
			if t, err := s.decodeChange(ctx, channel[idAt:], payload); err == nil && t != nil {
				q.Push(t)
			}
		},
		Resubscribed: q.Lost,
	})
	if err != nil {
		return nil, fmt.Errorf("redisstate: changes: %w", err)
	}
	out := make(chan *taskstate.Task)
	go func() {
		defer sub.Close()
		q.Deliver(ctx, s.closed, out)
	}()
	return out, nil
}

// globEscape quotes the characters Redis glob patterns treat specially.
func globEscape(s string) string {
	var b strings.Builder
	for _, r := range s {
		if strings.ContainsRune(`*?[]\`, r) {
			b.WriteByte('\\')
		}
		b.WriteRune(r)
	}
	return b.String()
}
