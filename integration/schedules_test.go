package integration

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mcpqueue/mcpqueue/integration/harness"
	"github.com/mcpqueue/mcpqueue/producer"
)

// Issue 32, acceptance 5 (at test speed): a schedule firing every 2 s on
// two api replicas creates exactly one task per firing for its owner, with
// no firing missed between the first and the last; api schedules lists it
// with its next firing and rm stops it.
func TestScheduleOnTwoReplicas(t *testing.T) {
	t.Parallel()
	onBrokers(t, func(t *testing.T, s *system) {
		harness.API(t, s.bins, s.be, s.prefix) // the second replica
		const owner = "https://issuer.example|ops"
		add := s.apiCLI(t, "schedules", "add", "--name", "tick", "--tool", "noop", "--args", `{}`, "--cron", "@every 2s", "--owner", owner)
		if add.code != 0 {
			t.Fatalf("api schedules add: %d %s %s", add.code, add.stdout, add.stderr)
		}
		if l := s.apiCLI(t, "schedules", "list"); l.code != 0 || !strings.Contains(l.stdout, "tick") || !strings.Contains(l.stdout, "@every 2s") {
			t.Fatalf("api schedules list: %d %q %s", l.code, l.stdout, l.stderr)
		}
		firings := func() map[string]int {
			out := map[string]int{}
			for _, r := range harness.Records(t, s.be, s.prefix) {
				if r.Owner != owner {
					continue
				}
				var m struct {
					FiredAt string `json:"firedAt"`
				}
				_ = json.Unmarshal(r.Meta[producer.MetaSchedule], &m)
				out[m.FiredAt]++
			}
			return out
		}
		harness.Eventually(t, time.Minute, func() (bool, string) {
			f := firings()
			return len(f) >= 4, fmt.Sprintf("%d firings so far: %v", len(f), f)
		})
		if rm := s.apiCLI(t, "schedules", "rm", "tick"); rm.code != 0 {
			t.Fatalf("api schedules rm: %d %s %s", rm.code, rm.stdout, rm.stderr)
		}
		f := firings()
		times := make([]time.Time, 0, len(f))
		for at, n := range f {
			ts, err := time.Parse(time.RFC3339, at)
			if err != nil || n != 1 {
				t.Fatalf("firing %q made %d tasks (%v); want one task per firing: %v", at, n, err, f)
			}
			times = append(times, ts)
		}
		slices.SortFunc(times, time.Time.Compare)
		for i := 1; i < len(times); i++ {
			if d := times[i].Sub(times[i-1]); d != 2*time.Second {
				t.Fatalf("firings %s and %s are %s apart, want 2s (one missed?): %v", times[i-1], times[i], d, f)
			}
		}
	})
}
