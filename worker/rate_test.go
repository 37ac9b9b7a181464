package worker

import (
	"strings"
	"testing"
	"time"

	"github.com/mcpqueue/mcpqueue/consumer"
)

// --tool-rate-limit entries parse into Config.RateLimits; a malformed one is an
// error naming it and what is wrong.
func TestRateLimitFlag(t *testing.T) {
	w := &Options{rateLimits: []string{"geocode=5/1s", "prompt/summary=100/1m"}}
	if err := w.Check(); err != nil {
		t.Fatal(err)
	}
	want := map[string]consumer.Rate{"geocode": {N: 5, Per: time.Second}, "prompt/summary": {N: 100, Per: time.Minute}}
	for k, r := range want {
		if w.RateLimits[k] != r {
			t.Errorf("RateLimits[%q] = %v, want %v", k, w.RateLimits[k], r)
		}
	}
	for spec, why := range map[string]string{
		"geocode":        "want TOOL=N/INTERVAL",
		"=5/1s":          "want TOOL=N/INTERVAL",
		"geocode=5":      "want TOOL=N/INTERVAL",
		"geocode=x/1s":   "not a number",
		"geocode=5/soon": "not an interval",
		"geocode=0/1s":   "positive number",
		"geocode=5/-1s":  "positive interval",
	} {
		err := (&Options{rateLimits: []string{spec}}).Check()
		if err == nil || !strings.Contains(err.Error(), why) || !strings.Contains(err.Error(), "--tool-rate-limit") {
			t.Errorf("--tool-rate-limit %s: %v, want an error saying %q", spec, err, why)
		}
	}
}
