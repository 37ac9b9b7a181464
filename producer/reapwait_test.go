package producer

import (
	"testing"
	"time"
)

// A pass that takes long stretches the wait after it, so a large store
// cannot keep the reaper scanning most of the time.
func TestReapWaitBoundsScanning(t *testing.T) {
	for _, c := range []struct{ interval, took, want time.Duration }{
		{5 * time.Second, 10 * time.Millisecond, 5 * time.Second},
		{5 * time.Second, 500 * time.Millisecond, 5 * time.Second},
		{5 * time.Second, 2 * time.Second, 20 * time.Second},
	} {
		if got := reapWait(c.interval, c.took); got != c.want {
			t.Errorf("reapWait(%s, %s) = %s, want %s", c.interval, c.took, got, c.want)
		}
	}
}
