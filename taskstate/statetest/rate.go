package statetest

import (
	"sync"
	"testing"
	"time"

	"github.com/mcpqueue/mcpqueue/taskstate"
)

// takeRate is TakeRate on l, failing the test on error.
func (e *env) takeRate(t *testing.T, l taskstate.RateLimiter, key string, r taskstate.Rate) time.Duration {
	t.Helper()
	wait, err := l.TakeRate(e.ctx, key, r)
	if err != nil {
		t.Fatalf("TakeRate(%s, %s): %v", key, r, err)
	}
	return wait
}

// rateSpacing: a free slot is taken at once; the next is refused with the
// time left until it is free, a refusal takes nothing, and the slot is
// free once that time has passed; keys are apart; bad keys and rates are
// errors.
func (s *suite) rateSpacing(t *testing.T, e *env) {
	l := e.store.(taskstate.RateLimiter)
	r := taskstate.Rate{N: 4, Per: 2 * time.Second} // a slot every 500ms
	for _, bad := range []struct {
		key string
		r   taskstate.Rate
	}{
		{"", r}, {"bad key", r}, {"tool", taskstate.Rate{}},
		{"tool", taskstate.Rate{N: -1, Per: time.Second}}, {"tool", taskstate.Rate{N: 1}},
	} {
		if _, err := l.TakeRate(e.ctx, bad.key, bad.r); err == nil {
			t.Errorf("TakeRate(%q, %s) accepted a bad key or rate", bad.key, bad.r)
		}
	}
	if w := e.takeRate(t, l, "fetch_page", r); w != 0 {
		t.Fatalf("the first TakeRate of a key waits %s, want 0 (a free slot)", w)
	}
	took := time.Now()
	w1 := e.takeRate(t, l, "fetch_page", r)
	if w1 <= 0 || w1 > r.Interval() {
		t.Fatalf("TakeRate right after a take = %s, want a wait in (0, %s]", w1, r.Interval())
	}
	if w2 := e.takeRate(t, l, "fetch_page", r); w2 <= 0 || w2 > w1 {
		t.Fatalf("TakeRate after a refusal = %s, want a wait in (0, %s]: a refusal must take nothing", w2, w1)
	}
	if w := e.takeRate(t, l, "prompt/fetch_page", r); w != 0 {
		t.Fatalf("TakeRate of another key waits %s: keys must be apart", w)
	}
	eventually(t, s.opts.Wait, "the next slot of fetch_page", func() (bool, error) {
		w, err := l.TakeRate(e.ctx, "fetch_page", r)
		return w == 0, err
	})
	// The server may stamp the first take up to a round trip before this
	// process saw it return.
	if gap := time.Since(took); gap < r.Interval()-100*time.Millisecond {
		t.Fatalf("the second slot was taken %s after the first, want about %s", gap, r.Interval())
	}
}

// rateShared: two clients of one store (two worker processes) share one
// budget: a slot one takes is refused to the other, and 16 goroutines on
// the two taking slots as fast as they are given never get more than the
// rate allows over the time they ran.
func (s *suite) rateShared(t *testing.T, e *env) {
	a := e.store.(taskstate.RateLimiter)
	b := a
	if s.opts.Twin != nil {
		b = s.opts.Twin(t, e.store).(taskstate.RateLimiter)
	}
	one := taskstate.Rate{N: 1, Per: time.Minute}
	if w := e.takeRate(t, a, "charge_card", one); w != 0 {
		t.Fatalf("the first TakeRate of a key waits %s", w)
	}
	if w := e.takeRate(t, b, "charge_card", one); w <= 0 {
		t.Fatal("the second client took a slot the first had just taken: the budget is not shared")
	}

	r := taskstate.Rate{N: 10, Per: time.Second} // a slot every 100ms
	const run = 1500 * time.Millisecond
	var mu sync.Mutex
	granted := map[string]int{}
	var wg sync.WaitGroup
	start := time.Now()
	for i := range 16 {
		l, who := a, "a"
		if i%2 == 1 {
			l, who = b, "b"
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Since(start) < run {
				w, err := l.TakeRate(e.ctx, "search", r)
				if err != nil {
					t.Errorf("TakeRate: %v", err)
					return
				}
				if w == 0 {
					mu.Lock()
					granted[who]++
					mu.Unlock()
					continue
				}
				time.Sleep(w) // as a worker defers the job: pacing, not synchronisation
			}
		}()
	}
	wg.Wait()
	took := time.Since(start)
	total := granted["a"] + granted["b"]
	limit := int(took/r.Interval()) + 1
	t.Logf("%d slots in %s (a %d, b %d), at most %d allowed", total, took.Round(time.Millisecond), granted["a"], granted["b"], limit)
	if total > limit {
		t.Fatalf("two clients took %d slots of %s in %s, more than the %d the rate allows", total, r, took, limit)
	}
	if total < 5 {
		t.Fatalf("two clients took only %d slots of %s in %s", total, r, took)
	}
}
