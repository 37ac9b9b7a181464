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
	scheduleOnTwoReplicas(t, "@every 2s", 2*time.Second, 4, time.Minute)
}

// TestScheduleEveryMinuteOnTwoReplicas is the issue's own case: a
// five-field cron expression firing every minute, two api replicas, one
// task per minute (two firings, so up to three minutes of waiting; the
// test sleeps in Eventually, it costs no CPU beside the others).
func TestScheduleEveryMinuteOnTwoReplicas(t *testing.T) {
	t.Parallel()
	scheduleOnTwoReplicas(t, "* * * * *", time.Minute, 2, 3*time.Minute)
}

// scheduleOnTwoReplicas adds a schedule of spec on a system with a second
// api replica, waits for want firings (within), and checks each made
// exactly one task and none was missed (consecutive firings period apart).
func scheduleOnTwoReplicas(t *testing.T, spec string, period time.Duration, want int, within time.Duration) {
	onBrokers(t, func(t *testing.T, s *system) {
		harness.API(t, s.bins, s.be, s.prefix) // the second replica
		const owner = "https://issuer.example|ops"
		add := s.apiCLI(t, "schedules", "add", "--name", "tick", "--tool", "noop", "--args", `{}`, "--cron", spec, "--owner", owner)
		if add.code != 0 {
			t.Fatalf("api schedules add: %d %s %s", add.code, add.stdout, add.stderr)
		}
		if l := s.apiCLI(t, "schedules", "list"); l.code != 0 || !strings.Contains(l.stdout, "tick") || !strings.Contains(l.stdout, spec) {
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
		harness.Eventually(t, within, func() (bool, string) {
			f := firings()
			return len(f) >= want, fmt.Sprintf("%d firings so far: %v", len(f), f)
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
			if d := times[i].Sub(times[i-1]); d != period {
				t.Fatalf("firings %s and %s are %s apart, want %s (one missed?): %v", times[i-1], times[i], d, period, f)
			}
		}
	})
}
