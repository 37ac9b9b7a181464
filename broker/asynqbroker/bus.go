package asynqbroker

import (
	"context"
	"fmt"
	"strings"
	"sync"

	"github.com/redis/go-redis/v9"

	"github.com/mcpqueue/mcpqueue/broker"
	"github.com/mcpqueue/mcpqueue/internal/redissub"
)

// Bus is the Redis pub/sub implementation of broker.Bus. A message for a task
// goes to the channel <BusPrefix>:<topic>:<taskID>; a subscription to every
// task is a PSUBSCRIBE of <BusPrefix>:<topic>:*. All subscriptions of one Bus
// share a single pub/sub connection; Subscribe returns once Redis has
// confirmed the subscription, so a publish that follows it is heard.
type Bus struct {
	rdb    redis.UniversalClient
	prefix string
	sub    *redissub.Mux
}

var _ broker.Bus = (*Bus)(nil)

// NewBus returns a bus on rdb. Only cfg.BusPrefix is used. The caller keeps
// ownership of rdb (Close does not close it).
func NewBus(rdb redis.UniversalClient, cfg *Config) *Bus {
	c := cfg.withDefaults()
	return &Bus{rdb: rdb, prefix: c.BusPrefix, sub: redissub.New(rdb)}
}

// Close ends every subscription and the bus's pub/sub connection.
func (b *Bus) Close() error { return b.sub.Close() }

func (b *Bus) topicPrefix(topic broker.Topic) string { return b.prefix + ":" + string(topic) + ":" }

// Publish sends data on topic for taskID to every current subscriber (Redis
// PUBLISH: nothing is kept for a subscriber that is not there).
func (b *Bus) Publish(ctx context.Context, topic broker.Topic, taskID string, data []byte) error {
	if !broker.SafeName(string(topic)) {
		return fmt.Errorf("asynqbroker: publish: invalid topic %q", topic)
	}
	if !broker.SafeName(taskID) {
		return fmt.Errorf("asynqbroker: publish %s: invalid task id %q", topic, taskID)
	}
	if err := b.rdb.Publish(ctx, b.topicPrefix(topic)+taskID, data).Err(); err != nil {
		return fmt.Errorf("asynqbroker: publish %s: %w", topic, err)
	}
	return nil
}

// busQueue bounds the messages waiting for one subscription's callback;
// beyond it, messages are dropped (the bus is best effort).
const busQueue = 4096

// Subscribe calls fn with the task id and data of each message published on
// topic for taskID, or for every task when taskID is "", until the
// subscription is closed (ctx bounds only the subscribe itself).
func (b *Bus) Subscribe(ctx context.Context, topic broker.Topic, taskID string, fn func(string, []byte)) (broker.Subscription, error) {
	if !broker.SafeName(string(topic)) {
		return nil, fmt.Errorf("asynqbroker: subscribe: invalid topic %q", topic)
	}
	if taskID != "" && !broker.SafeName(taskID) {
		// "*" or "a?" would subscribe to other tasks' messages.
		return nil, fmt.Errorf("asynqbroker: subscribe %s: invalid task id %q", topic, taskID)
	}
	tp := b.topicPrefix(topic)
	s := &busSub{fn: fn, queue: make(chan busMsg, busQueue), quit: make(chan struct{})}
	h := redissub.Handler{Message: func(channel, payload string) {
		if !strings.HasPrefix(channel, tp) {
			return
		}
		select {
		case s.queue <- busMsg{taskID: channel[len(tp):], data: payload}:
		default: // a callback that cannot keep up loses messages
		}
	}}
	var err error
	if taskID == "" {
		s.sub, err = b.sub.PSubscribe(ctx, globEscape(tp)+"*", h)
	} else {
		s.sub, err = b.sub.Subscribe(ctx, tp+taskID, h)
	}
	if err != nil {
		return nil, fmt.Errorf("asynqbroker: subscribe %s: %w", topic, err)
	}
	go s.run()
	return s, nil
}

type busMsg struct {
	taskID string
	data   string
}

// busSub calls its callback on a goroutine of its own, in arrival order, so
// a slow callback holds up no other subscription.
type busSub struct {
	fn    func(string, []byte)
	sub   *redissub.Sub
	queue chan busMsg
	quit  chan struct{}
	once  sync.Once
}

func (s *busSub) run() {
	for {
		select {
		case <-s.quit:
			return
		case m := <-s.queue:
			select {
			case <-s.quit:
				return
			default:
			}
			s.fn(m.taskID, []byte(m.data))
		}
	}
}

// Close ends the subscription. It does not wait for a callback already under
// way; no message is handed to the callback after that one.
func (s *busSub) Close() error {
	var err error
	s.once.Do(func() {
		close(s.quit)
		err = s.sub.Close()
	})
	return err
}

// globEscape quotes the characters Redis glob patterns treat specially.
func globEscape(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		switch c := s[i]; c {
		case '*', '?', '[', ']', '\\', '^', '-':
			b.WriteByte('\\')
			b.WriteByte(c)
		default:
			b.WriteByte(c)
		}
	}
	return b.String()
}
