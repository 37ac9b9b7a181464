package integration

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/mcpqueue/mcpqueue/auth/jwtauth"
	"github.com/mcpqueue/mcpqueue/integration/harness"
)

// TestFairShare: principal A fills the queue with 40 long tasks ahead of
// principal C's one short task, on a 4-slot pool with --principal-share 0.5
// and no tenant share (--tenant-share 1: the share by principal alone). A
// holds its share of the slots (half), and C's task starts within 2 s.
func TestFairShare(t *testing.T) {
	t.Parallel()
	eachBroker(t, func(t *testing.T, broker string) {
		s := newAuthSystem(t, broker, jwtauth.RS256)
		w := s.conformanceWorker(t, "fixtures", "--concurrency", "4", "--tenant-share", "1", "--principal-share", "0.5")
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

// TestFairShareTenants: with the default shares (a tenant 3 of 4 slots, a
// principal 1 of its tenant's 3), principals A and B of tenant T1 each fill
// a 4-slot pool with 40 long tasks, A's first; then a third principal of
// T1, C, and a principal of T2, D, each get a 1-s task started within 2 s.
// A and B run one task each, and the jobs the worker handed back (its
// mcpq_fair_share_deferrals_total) stay near one a second per waiting
// job: no busy loop.
func TestFairShareTenants(t *testing.T) {
	t.Parallel()
	eachBroker(t, func(t *testing.T, broker string) {
		s := newAuthSystem(t, broker, jwtauth.RS256, "--auth-tenant-claim", "tenant")
		admin := fmt.Sprintf("http://127.0.0.1:%d", harness.FreePort(t))
		w := s.conformanceWorker(t, "fixtures", "--concurrency", "4", "--admin", strings.TrimPrefix(admin, "http://"))
		client := func(sub, tenant string) *harness.Client {
			claims := s.iss.Claims(sub, s.mcpURL)
			claims["tenant"] = tenant
			return authClient(s.mcpURL, s.iss.Mint(t, claims))
		}
		a, b, c, d := client("principal-a", "T1"), client("principal-b", "T1"), client("principal-c", "T1"), client("principal-d", "T2")
		started := func(ids []string) int {
			n := 0
			for _, id := range ids {
				n += count(w, id, "task running")
			}
			return n
		}

		first := time.Now()
		longA := startAll(t, a, 40, "slow_compute", map[string]any{"seconds": 60})
		longB := startAll(t, b, 40, "slow_compute", map[string]any{"seconds": 60})
		harness.Eventually(t, 20*time.Second, func() (bool, string) {
			return started(longA) >= 1 && started(longB) >= 1, fmt.Sprintf("A's and B's tasks are not running yet (%d, %d)", started(longA), started(longB))
		})

		created := time.Now()
		shortC := c.StartTask(t, "slow_compute", map[string]any{"seconds": 1})
		shortD := d.StartTask(t, "slow_compute", map[string]any{"seconds": 1})
		harness.Eventually(t, 2*time.Second-time.Since(created), func() (bool, string) {
			nc, nd := count(w, shortC, "task running"), count(w, shortD, "task running")
			return nc == 1 && nd == 1, fmt.Sprintf("2 s after C's task was created, C's (T1) has started %d times, D's (T2) %d", nc, nd)
		})
		t.Logf("C's and D's tasks behind A's and B's 80 both started %s after C's was created", time.Since(created).Round(time.Millisecond))
		c.WaitStatus(t, shortC, 10*time.Second, "completed")
		d.WaitStatus(t, shortD, 10*time.Second, "completed")
		for who, ids := range map[string][]string{"A": longA, "B": longB} {
			if n := started(ids); n != 1 {
				t.Errorf("%s's tasks started %d times on a 4-slot worker, want its share: 1", who, n)
			}
		}

		m := scrape(t, admin)
		deferred := m[`mcpq_fair_share_deferrals_total{level="principal",tool="slow_compute"}`] + m[`mcpq_fair_share_deferrals_total{level="tenant",tool="slow_compute"}`]
		// 78 jobs wait; each comes back at most once a second (NATS; Asynq
		// every two), plus one hand-back as it arrives.
		bound := 78 * (time.Since(first).Seconds() + 1)
		t.Logf("%.0f hand-backs in %s (bound %.0f)", deferred, time.Since(first).Round(time.Millisecond), bound)
		if deferred < 78 || deferred > bound {
			t.Errorf("the worker handed back %.0f jobs in %s, want each of the 78 waiting ones at least once and at most about once a second (%.0f)", deferred, time.Since(first).Round(time.Millisecond), bound)
		}
	})
}
