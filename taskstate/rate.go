package taskstate

import (
	"context"
	"encoding/json"
	"fmt"
	"time"
)

// Rate is a rate limit: at most N events in any window of Per (feature:
// rate limits per tool). The zero Rate is no limit.
type Rate struct {
	N   int
	Per time.Duration
}

// IsZero reports whether r is no limit.
func (r Rate) IsZero() bool { return r.N == 0 && r.Per == 0 }

// Check reports what is wrong with r as a limit: a negative N or Per, or
// one of them without the other. The zero Rate is valid (no limit).
func (r Rate) Check() error {
	if r.IsZero() {
		return nil
	}
	if r.N <= 0 || r.Per <= 0 {
		return fmt.Errorf("rate limit %d per %s: want a positive number per a positive interval", r.N, r.Per)
	}
	if r.Interval() <= 0 {
		return fmt.Errorf("rate limit %d per %s: more than one per nanosecond", r.N, r.Per)
	}
	return nil
}

// Interval is the spacing of r's slots, Per/N: a limiter that keeps every
// two slots of a key at least this far apart lets at most N through in any
// window of Per.
func (r Rate) Interval() time.Duration {
	if r.N <= 0 {
		return 0
	}
	return r.Per / time.Duration(r.N)
}

// String is r as people write it: "5 per 1s".
func (r Rate) String() string { return fmt.Sprintf("%d per %s", r.N, r.Per) }

// rateJSON is Rate's JSON form in the catalog: {"n": 5, "perMs": 1000}.
type rateJSON struct {
	N     int   `json:"n"`
	PerMs int64 `json:"perMs"`
}

// MarshalJSON writes r as {"n": N, "perMs": Per in milliseconds}.
func (r Rate) MarshalJSON() ([]byte, error) {
	return json.Marshal(rateJSON{N: r.N, PerMs: r.Per.Milliseconds()})
}

// UnmarshalJSON reads the form MarshalJSON writes.
func (r *Rate) UnmarshalJSON(b []byte) error {
	var j rateJSON
	if err := json.Unmarshal(b, &j); err != nil {
		return err
	}
	*r = Rate{N: j.N, Per: time.Duration(j.PerMs) * time.Millisecond}
	return nil
}

// RateLimiter is an optional ability of a Store: rate limits kept in the
// store, so that one limit holds for every client of it (every worker of
// every pool). A worker asks before it starts a task of a rate-limited
// tool (consumer.Tool.RateLimit).
type RateLimiter interface {
	// TakeRate takes a slot of the limit named key if one is free now and
	// returns 0; else it takes nothing and returns how long until the next
	// slot is free (> 0). Slots of one key are kept r.Interval() apart, so
	// at most r.N are taken in any window of r.Per, across every client
	// of the store; callers of one key should agree on r (each call is
	// held to its own r against the slots taken before). A key is 1 to 200
	// bytes of ValidRateKey; a bad key or an invalid or zero r is an error.
	TakeRate(ctx context.Context, key string, r Rate) (time.Duration, error)
}

// ValidRateKey reports whether s may name a rate limit: 1 to 200 ASCII
// letters, digits and "_", "-", ".", "/" (a catalog key: a tool's name,
// "prompt/<name>").
func ValidRateKey(s string) bool {
	if len(s) < 1 || len(s) > 200 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '_' || c == '-' || c == '.' || c == '/') {
			return false
		}
	}
	return true
}

// CheckRateTake is what every TakeRate checks first: a valid key and a
// non-zero valid rate. who prefixes the error ("natskv").
func CheckRateTake(who, key string, r Rate) error {
	if !ValidRateKey(key) {
		return fmt.Errorf("%s: rate limit key %q: want 1 to 200 letters, digits, _ - . /", who, key)
	}
	if r.IsZero() {
		return fmt.Errorf("%s: rate limit %q: no rate given", who, key)
	}
	if err := r.Check(); err != nil {
		return fmt.Errorf("%s: %q: %w", who, key, err)
	}
	return nil
}

// NextSlot is the decision every RateLimiter makes (GCRA without burst:
// the generic cell rate algorithm, its state one time per key): next is
// when the key's next slot is free (the zero time: never taken). At or
// after next, the slot is taken: wait is 0 and the key's next becomes
// now + interval. Before, nothing is taken and wait is next - now.
func NextSlot(now, next time.Time, interval time.Duration) (newNext time.Time, wait time.Duration) {
	if now.Before(next) {
		return next, next.Sub(now)
	}
	return now.Add(interval), 0
}
