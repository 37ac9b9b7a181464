package bridge

import (
	"context"
	"errors"
	"sync"
	"time"
)

// errClosed is what calls get once the relay is closed.
var errClosed = errors.New("bridge: relay closed")

// pool holds a relay's sessions: at most size at once, each serving one
// call at a time, started when a call needs one and none is idle. A session
// that dies is dropped; the next start after a death or a failed start
// waits out a backoff (0.5 s, doubling to 30 s, reset by a call that ends
// normally).
type pool struct {
	open  func(ctx context.Context) (*session, error)
	grace time.Duration // how long a cancelled call's answer is waited for
	slots chan struct{} // one per session in use

	mu        sync.Mutex
	idle      []*session
	all       map[*session]struct{}
	failures  int
	notBefore time.Time
	closed    bool
}

func newPool(size int, grace time.Duration, open func(context.Context) (*session, error)) *pool {
	return &pool{open: open, grace: grace, slots: make(chan struct{}, size), all: map[*session]struct{}{}}
}

// put adds a session started elsewhere (the relay's first) as idle.
func (p *pool) put(s *session) {
	p.mu.Lock()
	p.all[s] = struct{}{}
	p.idle = append(p.idle, s)
	p.mu.Unlock()
	go p.watch(s)
}

// watch drops s once it ends and, unless the pool closed it, delays the
// next start.
func (p *pool) watch(s *session) {
	<-s.done
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.all, s)
	for i, x := range p.idle {
		if x == s {
			p.idle = append(p.idle[:i], p.idle[i+1:]...)
			break
		}
	}
	if !p.closed && !s.retired() {
		p.failedLocked()
	}
}

func (p *pool) failedLocked() {
	p.failures++
	d := 500 * time.Millisecond << min(p.failures-1, 6)
	p.notBefore = time.Now().Add(min(d, 30*time.Second))
}

// acquire returns a session for one call, starting one if none is idle.
func (p *pool) acquire(ctx context.Context) (*session, error) {
	select {
	case p.slots <- struct{}{}:
	case <-ctx.Done():
		return nil, context.Cause(ctx)
	}
	for {
		p.mu.Lock()
		if p.closed {
			p.mu.Unlock()
			<-p.slots
			return nil, errClosed
		}
		if n := len(p.idle); n > 0 {
			s := p.idle[n-1]
			p.idle = p.idle[:n-1]
			p.mu.Unlock()
			if s.alive() {
				return s, nil
			}
			continue
		}
		wait := time.Until(p.notBefore)
		p.mu.Unlock()
		if wait > 0 {
			t := time.NewTimer(wait)
			select {
			case <-t.C:
			case <-ctx.Done():
				t.Stop()
				<-p.slots
				return nil, context.Cause(ctx)
			}
		}
		s, err := p.open(ctx)
		if err != nil {
			p.mu.Lock()
			if ctx.Err() == nil {
				p.failedLocked()
			}
			p.mu.Unlock()
			<-p.slots
			return nil, err
		}
		p.mu.Lock()
		if p.closed {
			p.mu.Unlock()
			s.retire()
			<-p.slots
			return nil, errClosed
		}
		p.all[s] = struct{}{}
		p.mu.Unlock()
		go p.watch(s)
		return s, nil
	}
}

// release gives s back after a call: idle again if it may serve another
// (see session.quiet), else closed. ok says the call ended normally.
func (p *pool) release(s *session, ok bool) {
	settle := func() {
		defer func() { <-p.slots }()
		if !s.quiet(p.grace) {
			s.retire()
			return
		}
		p.mu.Lock()
		defer p.mu.Unlock()
		if p.closed {
			go s.retire()
			return
		}
		if ok {
			p.failures = 0
		}
		p.idle = append(p.idle, s)
	}
	if s.hasAbandoned() {
		go settle() // the slot stays taken until the session is settled
		return
	}
	settle()
}

// close stops every session, idle or busy.
func (p *pool) close() {
	p.mu.Lock()
	p.closed = true
	all := make([]*session, 0, len(p.all))
	for s := range p.all {
		all = append(all, s)
	}
	p.idle = nil
	p.mu.Unlock()
	var wg sync.WaitGroup
	for _, s := range all {
		wg.Go(s.retire)
	}
	wg.Wait()
}
