package taskstate

import (
	"context"
	"encoding/json"
	"fmt"
	"time"
)

// Recurring schedules (issue #32 item 5). A Schedule is a tool call made
// again at every firing of a cron expression, as a task of Owner; the api
// replicas fire it (producer.RunSchedules), and the store keeps the
// schedules (Schedules, an optional ability of a Store).

// Schedule is one recurring tool call.
type Schedule struct {
	// Name names the schedule: a plain name (letters, digits, _ and -), 1–64.
	Name string `json:"name"`
	Tool string `json:"tool"`
	// Arguments are the call's arguments (a JSON object, or none).
	Arguments json.RawMessage `json:"arguments,omitempty"`
	// Cron is when it fires: a standard 5-field cron expression (minute
	// resolution, UTC), a 6-field one with seconds first, or a descriptor
	// such as @hourly or @every 2s.
	Cron string `json:"cron"`
	// Owner owns the tasks it creates (an owner key, as Task.Owner).
	Owner     string    `json:"owner,omitempty"`
	CreatedAt time.Time `json:"createdAt"`
}

// Schedules is the optional ability of a Store to keep recurring
// schedules, shared by every api replica.
type Schedules interface {
	// PutSchedule stores s, replacing a schedule of the same name.
	PutSchedule(ctx context.Context, s *Schedule) error
	// DeleteSchedule removes the schedule of that name; ErrNotFound when
	// there is none.
	DeleteSchedule(ctx context.Context, name string) error
	// ListSchedules returns every schedule, by name.
	ListSchedules(ctx context.Context) ([]*Schedule, error)
}

// CheckSchedule validates what a store keeps of s: a plain name, a tool, a
// cron expression and arguments that are a JSON object or none. (Whether
// the expression parses is the firing side's: producer.ParseCron.)
func CheckSchedule(s *Schedule) error {
	switch {
	case s == nil:
		return fmt.Errorf("taskstate: schedule: none")
	case !ValidLeaseName(s.Name):
		return fmt.Errorf("taskstate: schedule name %q: want 1-64 letters, digits, _ and -", s.Name)
	case s.Tool == "":
		return fmt.Errorf("taskstate: schedule %s: no tool", s.Name)
	case s.Cron == "":
		return fmt.Errorf("taskstate: schedule %s: no cron expression", s.Name)
	}
	if len(s.Arguments) > 0 {
		var obj map[string]json.RawMessage
		if json.Unmarshal(s.Arguments, &obj) != nil || obj == nil {
			return fmt.Errorf("taskstate: schedule %s: arguments must be a JSON object", s.Name)
		}
	}
	return nil
}
