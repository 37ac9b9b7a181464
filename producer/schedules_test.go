package producer_test

import (
	"sync"
	"testing"
	"time"

	"github.com/mcpqueue/mcpqueue/producer"
	"github.com/mcpqueue/mcpqueue/taskstate"
)

// Cron expressions: 5 fields (minutes), 6 with seconds, descriptors;
// "@every" on the epoch's grid, so every replica computes the same times.
func TestParseCron(t *testing.T) {
	t.Parallel()
	base := time.Date(2026, 12, 7, 16, 0, 30, 0, time.UTC)
	for _, c := range []struct {
		expr string
		want time.Time
	}{
		{"* * * * *", base.Add(30 * time.Second)},
		{"*/15 * * * *", base.Add(15*time.Minute - 30*time.Second)},
		{"*/10 * * * * *", base.Add(10 * time.Second)},
		{"@hourly", base.Add(time.Hour - 30*time.Second)},
		{"@every 7s", time.Unix((base.Unix()/7+1)*7, 0).UTC()},
	} {
		cr, err := producer.ParseCron(c.expr)
		if err != nil {
			t.Fatalf("ParseCron(%q): %v", c.expr, err)
		}
		if got := cr.Next(base); !got.Equal(c.want) {
			t.Errorf("ParseCron(%q).Next(%s) = %s, want %s", c.expr, base, got, c.want)
		}
	}
	for _, bad := range []string{"", "every minute", "61 * * * *"} {
		if _, err := producer.ParseCron(bad); err == nil {
			t.Errorf("ParseCron(%q) accepted it", bad)
		}
	}
}

// A schedule fired by two replicas at once, over the same firings, makes
// exactly one task per firing, for the schedule's owner.
func TestSchedulesFireOncePerFiringAcrossReplicas(t *testing.T) {
	t.Parallel()
	reapBackends(t, func(t *testing.T, e *reapEnv) {
		sc := e.store.(taskstate.Schedules)
		if err := sc.PutSchedule(t.Context(), &taskstate.Schedule{Name: "tick", Tool: "echo", Cron: "@every 2s", Owner: "iss|ops", CreatedAt: time.Now()}); err != nil {
			t.Fatal(err)
		}
		until := time.Now().Truncate(2 * time.Second)
		since := until.Add(-10 * time.Second) // five firings: since+2s … until
		replicas := []*producer.Producer{e.prod, producer.New(e.store, producer.QueueExecutor{Queue: e.queue}, nil)}
		var wg sync.WaitGroup
		for _, p := range replicas {
			for range 2 {
				wg.Go(func() {
					if err := p.FireSchedules(t.Context(), sc, since, until); err != nil {
						t.Error(err)
					}
				})
			}
		}
		wg.Wait()
		tasks, _, err := e.store.List(t.Context(), "iss|ops", "", 100)
		if err != nil {
			t.Fatal(err)
		}
		fired := map[string]int{}
		for _, tk := range tasks {
			fired[string(tk.Meta[producer.MetaSchedule])]++
		}
		if len(tasks) != 5 || len(fired) != 5 {
			t.Fatalf("%d tasks over %d firings; want 5 tasks, one per firing: %v", len(tasks), len(fired), fired)
		}
	})
}
