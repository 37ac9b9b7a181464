package mcpfront

import (
	"fmt"
	"testing"
	"time"
)

func TestRateLimitsBucket(t *testing.T) {
	l := newRateLimits(10, 5)
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for i := range 5 {
		if _, ok := l.take("a", now); !ok {
			t.Fatalf("request %d within the burst refused", i)
		}
	}
	wait, ok := l.take("a", now)
	if ok || wait != 100*time.Millisecond {
		t.Fatalf("past the burst: ok=%v wait=%s, want a refusal for 100ms", ok, wait)
	}
	if _, ok := l.take("b", now); !ok {
		t.Fatal("another key shares a's bucket")
	}
	if _, ok := l.take("a", now.Add(100*time.Millisecond)); !ok {
		t.Fatal("refused after the wait it was told")
	}
	if newRateLimits(0, 5) != nil {
		t.Fatal("a zero rate must mean no limiter")
	}
	if l := newRateLimits(2.5, 0); l.burst != 3 {
		t.Fatalf("default burst %d, want the rate rounded up", l.burst)
	}
}

func TestRateLimitsStayBounded(t *testing.T) {
	l := newRateLimits(10, 5) // a bucket is full again after 0.5s; sweeps every 10s
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for i := range 1000 {
		l.take(fmt.Sprint("idle-", i), now)
	}
	if n := l.size(); n != 1000 {
		t.Fatalf("%d buckets, want 1000", n)
	}
	l.take("late", now.Add(9*time.Second))
	if n := l.size(); n != 1001 {
		t.Fatalf("%d buckets, want no sweep yet", n)
	}
	l.take("later", now.Add(11*time.Second))
	if n := l.size(); n != 1 {
		t.Fatalf("%d buckets after the idle ones were full again, want 1", n)
	}
	// Many principals at once: the map never passes its cap.
	for i := range limiterCap + 1000 {
		l.take(fmt.Sprint("busy-", i), now.Add(11*time.Second))
		if l.size() > limiterCap {
			t.Fatalf("%d buckets, cap %d", l.size(), limiterCap)
		}
	}
}
