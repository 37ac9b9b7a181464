package console_test

import (
	"testing"
	"time"

	"github.com/mcpqueue/mcpqueue/console"
	"github.com/mcpqueue/mcpqueue/taskstate"
)

// The schedules view lists the store's schedules by name with each one's
// next firing, and says why when an expression does not parse.
func TestConsoleSchedules(t *testing.T) {
	at := time.Date(2026, 12, 7, 16, 0, 30, 0, time.UTC)
	f := newFixture(t, console.Config{Now: func() time.Time { return at }})
	for _, s := range []*taskstate.Schedule{
		{Name: "nightly", Tool: "report", Cron: "0 3 * * *", Owner: "iss|ops"},
		{Name: "broken", Tool: "report", Cron: "every now and then"},
	} {
		if err := f.store.PutSchedule(t.Context(), s); err != nil {
			t.Fatal(err)
		}
	}
	var out struct {
		Schedules []struct{ Name, Tool, Cron, Owner, Next, Error string }
	}
	if code := f.do(t, "GET", "/console/api/schedules", "", &out); code != 200 {
		t.Fatalf("GET api/schedules: %d", code)
	}
	if len(out.Schedules) != 2 {
		t.Fatalf("schedules %+v, want 2", out.Schedules)
	}
	b, n := out.Schedules[0], out.Schedules[1]
	if n.Name != "nightly" || n.Next != "2026-12-08T03:00:00Z" || n.Owner != "iss|ops" || n.Error != "" {
		t.Errorf("nightly shown as %+v, want next 2026-12-08T03:00:00Z", n)
	}
	if b.Name != "broken" || b.Next != "" || b.Error == "" {
		t.Errorf("broken shown as %+v, want no next firing and why", b)
	}
}
