package testenv

import (
	"sort"
	"time"
)

// MaxInWindow is the most of times that fall in any one window of length
// w, [t, t+w) (feature: rate limits per tool: "at most N starts in any
// window of Per"). times may come in any order.
func MaxInWindow(times []time.Time, w time.Duration) int {
	ts := append([]time.Time(nil), times...)
	sort.Slice(ts, func(i, j int) bool { return ts[i].Before(ts[j]) })
	most, lo := 0, 0
	for hi := range ts {
		for ts[hi].Sub(ts[lo]) >= w {
			lo++
		}
		most = max(most, hi-lo+1)
	}
	return most
}
