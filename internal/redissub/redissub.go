// Package redissub multiplexes many Redis pub/sub subscriptions over one
// connection. The Redis seams use it: redisstate for its change feed, and
// asynqbroker for its bus.
//
// Subscribe returns only once the server has registered the subscription, so
// a message published after it returns is delivered. The proof is a PING with
// a unique payload written after the SUBSCRIBE on the same connection: Redis
// answers commands in order, so its PONG means the SUBSCRIBE took effect.
//
// Subscribers of the same channel (or pattern) share one server-side
// subscription, counted by reference. When the connection breaks, go-redis
// reconnects and subscribes again; messages published in between are lost.
// Each Handler's Interrupted hook says so when the break is noticed, and its
// Resubscribed hook once the subscription is renewed, letting a caller stop
// trusting what it holds meanwhile and re-read what it may have missed.
package redissub

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// Handler receives a subscription's traffic. Both functions run on the Mux's
// one reading goroutine, in arrival order, and must not block.
type Handler struct {
	// Message is called for every message on the channel (for a pattern
	// subscription: on every channel matching it).
	Message func(channel, payload string)
	// Resubscribed, if set, is called after a reconnection renewed the
	// subscription: messages published while it was down were lost.
	Resubscribed func()
	// Interrupted, if set, is called when the connection failed under a
	// subscription the server had confirmed: messages may be lost from then
	// until Resubscribed. A subscription not confirmed yet is not told: its
	// Subscribe returns only once it is live on the new connection.
	Interrupted func()
}

// healthInterval is how often an idle connection is pinged, so a dead one is
// noticed and replaced.
const healthInterval = 5 * time.Second

// repingInterval is how often Subscribe repeats its confirming PING when no
// PONG came back (the connection may have been replaced in between).
const repingInterval = time.Second

// Mux is one pub/sub connection shared by many subscriptions. The zero value
// is not usable; call New.
type Mux struct {
	client redis.UniversalClient

	// cmdMu orders the commands written on the connection (SUBSCRIBE,
	// UNSUBSCRIBE, PING) without being held while messages are dispatched.
	cmdMu sync.Mutex

	mu      sync.Mutex
	ps      *redis.PubSub // nil until the first Subscribe
	closed  bool
	entries map[key]*entry
	pongs   map[string]chan struct{}
	seq     uint64
	done    chan struct{}
	wg      sync.WaitGroup
}

type key struct {
	name    string
	pattern bool
}

type entry struct {
	subs map[*Sub]struct{}
	seen bool // the server has confirmed this subscription at least once
}

// New returns a Mux on client. It connects on the first Subscribe.
func New(client redis.UniversalClient) *Mux {
	return &Mux{
		client:  client,
		entries: map[key]*entry{},
		pongs:   map[string]chan struct{}{},
		done:    make(chan struct{}),
	}
}

// ErrClosed is returned by Subscribe after Close.
var ErrClosed = errors.New("redissub: closed")

// Subscribe subscribes h to channel and returns once the subscription is live.
func (m *Mux) Subscribe(ctx context.Context, channel string, h Handler) (*Sub, error) {
	return m.subscribe(ctx, key{name: channel}, h)
}

// PSubscribe subscribes h to every channel matching the glob pattern and
// returns once the subscription is live.
func (m *Mux) PSubscribe(ctx context.Context, pattern string, h Handler) (*Sub, error) {
	return m.subscribe(ctx, key{name: pattern, pattern: true}, h)
}

func (m *Mux) subscribe(ctx context.Context, k key, h Handler) (*Sub, error) {
	if h.Message == nil {
		return nil, errors.New("redissub: subscribe without a message handler")
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s := &Sub{m: m, k: k, h: h}

	m.cmdMu.Lock()
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		m.cmdMu.Unlock()
		return nil, ErrClosed
	}
	ps := m.startLocked()
	e := m.entries[k]
	first := e == nil
	if first {
		e = &entry{subs: map[*Sub]struct{}{}}
		m.entries[k] = e
	}
	e.subs[s] = struct{}{}
	token, pong := m.tokenLocked()
	m.mu.Unlock()

	var err error
	if first {
		if k.pattern {
			err = ps.PSubscribe(ctx, k.name)
		} else {
			err = ps.Subscribe(ctx, k.name)
		}
	}
	if err == nil {
		err = ps.Ping(ctx, token)
	}
	m.cmdMu.Unlock()

	if err == nil {
		err = m.awaitPong(ctx, ps, token, pong)
	}
	if err != nil {
		m.dropToken(token)
		_ = s.Close()
		return nil, fmt.Errorf("redissub: subscribe %s: %w", k.name, err)
	}
	return s, nil
}

// startLocked creates the connection and its goroutines on first use.
func (m *Mux) startLocked() *redis.PubSub {
	if m.ps != nil {
		return m.ps
	}
	m.ps = m.client.Subscribe(context.Background()) // no channels: nothing sent yet
	m.wg.Add(2)
	go m.read(m.ps)
	go m.health(m.ps)
	return m.ps
}

func (m *Mux) tokenLocked() (string, chan struct{}) {
	m.seq++
	token := "redissub:" + strconv.FormatUint(m.seq, 10)
	ch := make(chan struct{})
	m.pongs[token] = ch
	return token, ch
}

func (m *Mux) dropToken(token string) {
	m.mu.Lock()
	delete(m.pongs, token)
	m.mu.Unlock()
}

// awaitPong waits for the PONG carrying token, repeating the PING now and
// then in case the connection was replaced after the first one was written.
func (m *Mux) awaitPong(ctx context.Context, ps *redis.PubSub, token string, pong <-chan struct{}) error {
	t := time.NewTicker(repingInterval)
	defer t.Stop()
	for {
		select {
		case <-pong:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		case <-m.done:
			return ErrClosed
		case <-t.C:
			m.cmdMu.Lock()
			err := ps.Ping(ctx, token)
			m.cmdMu.Unlock()
			if err != nil && ctx.Err() != nil {
				return ctx.Err()
			}
		}
	}
}

// read is the one goroutine receiving from the connection.
func (m *Mux) read(ps *redis.PubSub) {
	defer m.wg.Done()
	failures := 0
	for {
		msg, err := ps.Receive(context.Background())
		if err != nil {
			if errors.Is(err, redis.ErrClosed) {
				return
			}
			// go-redis replaces a broken connection and subscribes again
			// on the next read; back off while the server is unreachable.
			if failures == 0 {
				m.interrupted()
			}
			failures++
			wait := min(time.Duration(failures)*100*time.Millisecond, 2*time.Second)
			select {
			case <-m.done:
				return
			case <-time.After(wait):
			}
			continue
		}
		failures = 0
		m.dispatch(msg)
	}
}

func (m *Mux) dispatch(msg any) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return
	}
	switch msg := msg.(type) {
	case *redis.Message:
		k := key{name: msg.Channel}
		if msg.Pattern != "" {
			k = key{name: msg.Pattern, pattern: true}
		}
		if e := m.entries[k]; e != nil {
			for s := range e.subs {
				s.h.Message(msg.Channel, msg.Payload)
			}
		}
	case *redis.Subscription:
		if msg.Kind != "subscribe" && msg.Kind != "psubscribe" {
			return
		}
		e := m.entries[key{name: msg.Channel, pattern: msg.Kind == "psubscribe"}]
		if e == nil {
			return
		}
		if !e.seen {
			e.seen = true
			return
		}
		// Confirmed again: go-redis reconnected and resubscribed.
		for s := range e.subs {
			if s.h.Resubscribed != nil {
				s.h.Resubscribed()
			}
		}
	case *redis.Pong:
		if ch, ok := m.pongs[msg.Payload]; ok {
			delete(m.pongs, msg.Payload)
			close(ch)
		}
	}
}

// interrupted tells the confirmed subscriptions that the connection failed.
func (m *Mux) interrupted() {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return
	}
	for _, e := range m.entries {
		if !e.seen {
			continue
		}
		for s := range e.subs {
			if s.h.Interrupted != nil {
				s.h.Interrupted()
			}
		}
	}
}

// health pings an idle connection so go-redis notices a dead one.
func (m *Mux) health(ps *redis.PubSub) {
	defer m.wg.Done()
	t := time.NewTicker(healthInterval)
	defer t.Stop()
	for {
		select {
		case <-m.done:
			return
		case <-t.C:
			ctx, cancel := context.WithTimeout(context.Background(), healthInterval)
			m.cmdMu.Lock()
			_ = ps.Ping(ctx)
			m.cmdMu.Unlock()
			cancel()
		}
	}
}

// Close ends every subscription and the connection, and waits for the
// Mux's goroutines. Handlers are not called once Close has returned.
func (m *Mux) Close() error {
	m.cmdMu.Lock()
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		m.cmdMu.Unlock()
		return nil
	}
	m.closed = true
	ps := m.ps
	m.entries = map[key]*entry{}
	close(m.done)
	m.mu.Unlock()
	m.cmdMu.Unlock()
	if ps == nil {
		return nil
	}
	err := ps.Close()
	m.wg.Wait()
	if err != nil && !errors.Is(err, redis.ErrClosed) {
		return fmt.Errorf("redissub: close: %w", err)
	}
	return nil
}

// Sub is one subscription. Close it when done.
type Sub struct {
	m    *Mux
	k    key
	h    Handler
	once sync.Once
}

// unsubscribeTimeout bounds the UNSUBSCRIBE a Close writes.
const unsubscribeTimeout = 5 * time.Second

// Close ends the subscription; its Handler is not called once Close has
// returned. The server-side subscription ends with its last subscriber.
func (s *Sub) Close() error {
	var err error
	s.once.Do(func() {
		m := s.m
		m.cmdMu.Lock()
		defer m.cmdMu.Unlock()
		m.mu.Lock()
		last := false
		if e := m.entries[s.k]; e != nil {
			delete(e.subs, s)
			if len(e.subs) == 0 {
				delete(m.entries, s.k)
				last = true
			}
		}
		ps, closed := m.ps, m.closed
		m.mu.Unlock()
		if !last || closed || ps == nil {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), unsubscribeTimeout)
		defer cancel()
		if s.k.pattern {
			err = ps.PUnsubscribe(ctx, s.k.name)
		} else {
			err = ps.Unsubscribe(ctx, s.k.name)
		}
		if err != nil {
			err = fmt.Errorf("redissub: unsubscribe %s: %w", s.k.name, err)
		}
	})
	return err
}
