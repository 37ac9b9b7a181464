package mcpfront

import (
	"testing"
	"time"

	"github.com/mcpqueue/mcpqueue/taskstate"
)

func TestPollIntervalFollowsAge(t *testing.T) {
	created := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		age    time.Duration
		status taskstate.Status
		want   int64
	}{
		{0, taskstate.Working, 100},
		{2 * time.Second, taskstate.Working, 400},
		{10 * time.Second, taskstate.InputRequired, 2000},
		{time.Hour, taskstate.Working, 5000},
		{time.Hour, taskstate.Completed, 500}, // the interval the task was created with
	} {
		tk := &taskstate.Task{CreatedAt: created, Status: c.status, PollIntervalMs: 500}
		if got := pollInterval(tk, created.Add(c.age)); got != c.want {
			t.Errorf("age %s, %s: pollInterval = %d ms, want %d", c.age, c.status, got, c.want)
		}
	}
}
