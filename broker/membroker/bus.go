package membroker

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/mcpqueue/mcpqueue/broker"
)

// Bus is an in-memory broker.Bus: a message reaches every subscription of
// this Bus on its topic and key that is open when Publish is called. Each
// subscription's callback runs on a goroutine of its own, in publish
// order, so a slow callback holds up neither the publisher nor other
// subscriptions.
type Bus struct {
	mu   sync.Mutex
	subs map[broker.Topic]map[*subscription]bool
}

var _ broker.Bus = (*Bus)(nil)

// NewBus returns a bus with no subscriptions.
func NewBus() *Bus { return &Bus{subs: map[broker.Topic]map[*subscription]bool{}} }

// Publish implements broker.Bus.
func (b *Bus) Publish(ctx context.Context, topic broker.Topic, taskID string, data []byte) error {
	if !broker.SafeName(taskID) {
		return fmt.Errorf("membroker: publish on %s: task id %q is not one plain name", topic, taskID)
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	msg := busMsg{taskID: taskID, data: bytes.Clone(data)}
	if msg.data == nil {
		msg.data = []byte{}
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	for s := range b.subs[topic] {
		if s.taskID == "" || s.taskID == taskID {
			s.push(msg)
		}
	}
	return nil
}

// Subscribe implements broker.Bus.
func (b *Bus) Subscribe(ctx context.Context, topic broker.Topic, taskID string, fn func(taskID string, data []byte)) (broker.Subscription, error) {
	if taskID != "" && !broker.SafeName(taskID) {
		return nil, fmt.Errorf("membroker: subscribe to %s: task id %q is not one plain name", topic, taskID)
	}
	if fn == nil {
		return nil, errors.New("membroker: subscribe: nil callback")
	}
	s := &subscription{bus: b, topic: topic, taskID: taskID, fn: fn, wake: make(chan struct{}, 1), done: make(chan struct{})}
	b.mu.Lock()
	if b.subs[topic] == nil {
		b.subs[topic] = map[*subscription]bool{}
	}
	b.subs[topic][s] = true
	b.mu.Unlock()
	go s.deliver()
	return s, nil
}

type busMsg struct {
	taskID string
	data   []byte
}

type subscription struct {
	bus    *Bus
	topic  broker.Topic
	taskID string
	fn     func(string, []byte)

	mu      sync.Mutex
	pending []busMsg
	closed  bool
	wake    chan struct{} // room for one wake-up
	done    chan struct{} // closed by Close
	once    sync.Once
}

func (s *subscription) push(m busMsg) {
	s.mu.Lock()
	s.pending = append(s.pending, m)
	s.mu.Unlock()
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

func (s *subscription) deliver() {
	for {
		select {
		case <-s.done:
			return
		case <-s.wake:
		}
		for {
			s.mu.Lock()
			if s.closed || len(s.pending) == 0 {
				s.mu.Unlock()
				break
			}
			m := s.pending[0]
			s.pending = s.pending[1:]
			s.mu.Unlock()
			s.fn(m.taskID, m.data)
		}
	}
}

// Close implements broker.Subscription: no callback starts after it
// returns.
func (s *subscription) Close() error {
	s.once.Do(func() {
		s.bus.mu.Lock()
		delete(s.bus.subs[s.topic], s)
		s.bus.mu.Unlock()
		s.mu.Lock()
		s.closed, s.pending = true, nil
		s.mu.Unlock()
		close(s.done)
	})
	return nil
}
