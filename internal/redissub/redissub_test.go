package redissub_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/mcpqueue/mcpqueue/internal/redissub"
	"github.com/mcpqueue/mcpqueue/internal/redistest"
)

// newMux is a Mux on sc, closed when the test ends.
func newMux(t *testing.T, sc *redis.Client) *redissub.Mux {
	m := redissub.New(sc)
	t.Cleanup(func() { _ = m.Close() })
	return m
}

// Once Subscribe has returned, the server counts the subscription: another
// connection sees it in PUBSUB NUMSUB, and a message published from there
// arrives.
func TestSubscribeIsLiveOnReturn(t *testing.T) {
	t.Parallel()
	sc, pc := redistest.Client(t), redistest.Client(t)
	m := newMux(t, sc)
	ctx := t.Context()
	name := redistest.Name(t)
	for i := range 200 {
		ch := fmt.Sprintf("%s:%d", name, i)
		got := make(chan string, 1)
		s, err := m.Subscribe(ctx, ch, redissub.Handler{Message: func(_, p string) { got <- p }})
		if err != nil {
			t.Fatal(err)
		}
		n, err := pc.PubSubNumSub(ctx, ch).Result()
		if err != nil {
			t.Fatal(err)
		}
		if n[ch] != 1 {
			t.Fatalf("round %d: PUBSUB NUMSUB = %d right after Subscribe returned, want 1", i, n[ch])
		}
		if err := pc.Publish(ctx, ch, "x").Err(); err != nil {
			t.Fatal(err)
		}
		select {
		case <-got:
		case <-time.After(5 * time.Second):
			t.Fatalf("round %d: message not received", i)
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

// Subscribers of one channel share one server-side subscription, which ends
// with the last of them; a pattern and a channel are separate.
func TestSharedSubscription(t *testing.T) {
	t.Parallel()
	sc, pc := redistest.Client(t), redistest.Client(t)
	m := newMux(t, sc)
	ctx := t.Context()
	ch := redistest.Name(t)

	var mu sync.Mutex
	counts := map[string]int{}
	handler := func(who string) redissub.Handler {
		return redissub.Handler{Message: func(string, string) { mu.Lock(); counts[who]++; mu.Unlock() }}
	}
	a, err := m.Subscribe(ctx, ch, handler("a"))
	if err != nil {
		t.Fatal(err)
	}
	b, err := m.Subscribe(ctx, ch, handler("b"))
	if err != nil {
		t.Fatal(err)
	}
	p, err := m.PSubscribe(ctx, ch+"*", handler("p"))
	if err != nil {
		t.Fatal(err)
	}
	numsub := func() int64 {
		n, err := pc.PubSubNumSub(ctx, ch).Result()
		if err != nil {
			t.Fatal(err)
		}
		return n[ch]
	}
	// publish sends msg on ch and waits for the handlers' counts to be want.
	publish := func(msg string, want map[string]int) {
		t.Helper()
		if err := pc.Publish(ctx, ch, msg).Err(); err != nil {
			t.Fatal(err)
		}
		waitCounts(t, &mu, counts, want)
	}
	if n := numsub(); n != 1 {
		t.Fatalf("two subscribers hold %d server subscriptions, want 1", n)
	}
	publish("1", map[string]int{"a": 1, "b": 1, "p": 1})

	_ = a.Close()
	if n := numsub(); n != 1 {
		t.Fatalf("after one of two closed: %d server subscriptions, want 1", n)
	}
	publish("2", map[string]int{"a": 1, "b": 2, "p": 2})
	_ = b.Close()
	_ = p.Close()
	deadline := time.Now().Add(5 * time.Second)
	for numsub() != 0 {
		if time.Now().After(deadline) {
			t.Fatal("server subscription outlived its last subscriber")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if _, err := m.Subscribe(context.Background(), ch, handler("c")); err != nil {
		t.Fatal(err)
	}
	_ = m.Close()
	if _, err := m.Subscribe(ctx, ch, handler("d")); err == nil {
		t.Fatal("Subscribe after Close succeeded")
	}
}

func waitCounts(t *testing.T, mu *sync.Mutex, got, want map[string]int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		mu.Lock()
		ok := true
		for k, v := range want {
			if got[k] != v {
				ok = false
			}
		}
		snapshot := fmt.Sprint(got)
		mu.Unlock()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("message counts %s, want %v", snapshot, want)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// When the connection breaks, a confirmed subscription hears Interrupted,
// then Resubscribed once go-redis has renewed it, and messages flow again.
func TestInterruptedThenResubscribed(t *testing.T) {
	t.Parallel()
	sc, name := redistest.NamedClient(t)
	admin := redistest.Client(t)
	m := newMux(t, sc)
	ctx := t.Context()

	events := make(chan string, 16)
	_, err := m.Subscribe(ctx, name, redissub.Handler{
		Message:      func(_, p string) { events <- "message " + p },
		Interrupted:  func() { events <- "interrupted" },
		Resubscribed: func() { events <- "resubscribed" },
	})
	if err != nil {
		t.Fatal(err)
	}
	if n := redistest.KillSubscribers(t, admin, name); n != 1 {
		t.Fatalf("found %d subscriber connections to kill, want 1", n)
	}
	next := func() string {
		t.Helper()
		select {
		case e := <-events:
			return e
		case <-time.After(10 * time.Second):
			t.Fatal("no event within 10s")
			return ""
		}
	}
	if e := next(); e != "interrupted" {
		t.Fatalf("first event after the kill %q, want interrupted", e)
	}
	if e := next(); e != "resubscribed" {
		t.Fatalf("second event after the kill %q, want resubscribed", e)
	}
	if err := admin.Publish(ctx, name, "x").Err(); err != nil {
		t.Fatal(err)
	}
	if e := next(); e != "message x" {
		t.Fatalf("after resubscribing got %q, want message x", e)
	}
}
