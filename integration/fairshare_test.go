package integration

import (
	"strings"
	"testing"
	"time"

	"github.com/mcpqueue/mcpqueue/auth/jwtauth"
	"github.com/mcpqueue/mcpqueue/integration/harness"
)

// TestFairShare: principal A fills the queue with 40 long tasks ahead of
// principal C's one short task, on a 4-slot pool with the default settings.
// A holds its share of the slots (half), and C's task starts within 2 s.
func TestFairShare(t *testing.T) {
	t.Parallel()
	eachBroker(t, func(t *testing.T, broker string) {
		s := newAuthSystem(t, broker, jwtauth.RS256)
		w := s.conformanceWorker(t, "fixtures", "--concurrency", "4")
		a, c := s.client(t, "principal-a"), s.client(t, "principal-c")
		long := startAll(t, a, 40, "slow_compute", map[string]any{"seconds": 60})
		harness.Eventually(t, 20*time.Second, func() (bool, string) {
			n := strings.Count(w.Output(), `"message":"task running"`)
			return n >= 2, "A's tasks are not running yet"
		})
		created := time.Now()
		short := c.StartTask(t, "slow_compute", map[string]any{"seconds": 0})
		c.WaitStatus(t, short, 2*time.Second, "completed")
		t.Logf("C's task behind A's 40 completed %s after creation", time.Since(created).Round(time.Millisecond))
		running := 0
		for _, id := range long {
			running += count(w, id, "task running")
		}
		if running != 2 {
			t.Errorf("A's tasks started %d times on a 4-slot worker, want its share: 2", running)
		}
	})
}
