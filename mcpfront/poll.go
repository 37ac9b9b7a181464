package mcpfront

import (
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mcpqueue/mcpqueue/taskstate"
)

// The polling interval every task answer suggests (pollIntervalMs on
// 2026-07-28, pollInterval on 2025-11-25) is chosen from what the server
// knows: the task's age and how long its tool's tasks usually take. A client
// that follows it sees a task's end soon after it happens without hammering
// tasks/get; a fixed interval is either too slow for a tool that takes
// milliseconds or too busy for one that takes minutes.

const (
	maxPoll      = 5 * time.Second        // how late a long task's end may be seen
	maxPollFloor = 100 * time.Millisecond // the floor while a tool's durations are unknown
	minPollFloor = 5 * time.Millisecond   // the lowest floor, however fast the tool
	// maxTrackedTools bounds the per-tool estimates: tool names come from
	// workers, and a deployment that churns through names must not grow the
	// api without bound. Names past it are not tracked (their tasks get the
	// age rule alone).
	maxTrackedTools = 1024
	// durationWeight is the weight of a new sample once a tool has
	// durationSamples of them (the plain average before: the first samples
	// count fully instead of being pulled towards an arbitrary start).
	durationSamples = 8
	durationWeight  = 1.0 / durationSamples
)

// pollInterval is the polling interval suggested for t, in ms: pollHint of
// its age and its tool's typical duration. A finished task keeps the
// interval it was created with: there is nothing left to wait for.
func (s *Server) pollInterval(t *taskstate.Task) int64 {
	if t.Status.Terminal() {
		if t.PollIntervalMs > 0 {
			return t.PollIntervalMs
		}
		return defaultPollMs
	}
	return pollHint(s.cfg.Now().Sub(t.CreatedAt), s.durations.typical(t)).Milliseconds()
}

// pollHint is the interval suggested for a task that has not ended (working
// or waiting for input), of age age, whose tool's tasks typically take
// typical from creation to their end (0: not known yet).
//
//   - typical known, the task younger than it: the rest of it, so that the
//     first poll lands when the task usually ends (a create answer, age ≈ 0,
//     suggests typical itself);
//   - otherwise a fifth of the age: a task that runs long is polled less
//     and less often, up to 5 s.
//
// The floor keeps a client from spinning on a task that overran: half the
// typical duration, between 5 ms and 100 ms, or 100 ms while the tool has
// not been measured.
func pollHint(age, typical time.Duration) time.Duration {
	floor := maxPollFloor
	if typical > 0 {
		floor = min(max(typical/2, minPollFloor), maxPollFloor)
		if age < typical {
			return min(max(typical-age, floor), maxPoll)
		}
	}
	return min(max(age/5, floor), maxPoll)
}

// durations estimates, per tool, how long its tasks take from creation to
// their end (LastUpdatedAt − CreatedAt, queue wait included: that is what a
// client waits), from the finished records the front end reads anyway. It
// keeps one small entry per tool and nothing per task, so the api's memory
// stays flat however many tasks it serves; each replica learns on its own.
//
// The estimator is a moving average of the logarithm of the durations,
// weighted 1/8 (after the first 8 samples, which are averaged plainly). In
// the log domain a sample counts by its ratio to the estimate, not its size:
// one task that waited minutes for a worker or was retried after a crash
// moves the estimate of a 20 ms tool by a bounded factor, not by an eighth of
// its minutes, and the skewed durations of a tool average to their
// geometric mean, near the median — the typical task. It costs a Log and an
// Exp per sample, and the hint reads the estimate with one atomic load.
type durations struct {
	mu    sync.RWMutex
	tools map[string]*toolDuration // tool name → estimate; nil until the first sample
}

type toolDuration struct {
	typical atomic.Int64 // the estimate in ns (0: none yet), read without mu

	mu      sync.Mutex
	logMean float64 // the weighted average of ln(duration in s)
	samples int     // counted so far, up to durationSamples
	// lastID is the task counted last: a client commonly reads a finished
	// task twice in a row (tasks/get, then tasks/result), and counts once.
	lastID string
}

// observe counts a record the front end read, if it is a tool's task that
// completed or failed. A cancelled task says nothing about the tool: its
// client gave up. Prompts are not tracked: they never get a task handle.
func (d *durations) observe(t *taskstate.Task) {
	if t.Status != taskstate.Completed && t.Status != taskstate.Failed || t.Kind != taskstate.KindTool {
		return
	}
	e := d.entry(t.Tool)
	if e == nil {
		return
	}
	// A sample of at least 1 ms: the worker's and the api's clocks may
	// disagree, and no floor goes below 5 ms anyway.
	x := math.Log(max(t.LastUpdatedAt.Sub(t.CreatedAt), time.Millisecond).Seconds())
	e.mu.Lock()
	defer e.mu.Unlock()
	if t.ID == e.lastID {
		return
	}
	e.lastID = t.ID
	w := durationWeight
	if e.samples < durationSamples {
		e.samples++
		w = 1 / float64(e.samples)
	}
	e.logMean += w * (x - e.logMean)
	e.typical.Store(int64(math.Exp(e.logMean) * float64(time.Second)))
}

// entry is tool's estimate, added if there is room (nil if not).
func (d *durations) entry(tool string) *toolDuration {
	d.mu.RLock()
	e := d.tools[tool]
	d.mu.RUnlock()
	if e != nil {
		return e
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if e = d.tools[tool]; e == nil && len(d.tools) < maxTrackedTools {
		if d.tools == nil {
			d.tools = map[string]*toolDuration{}
		}
		e = &toolDuration{}
		d.tools[tool] = e
	}
	return e
}

// typical is how long t's tool's tasks usually take; 0 if not known.
func (d *durations) typical(t *taskstate.Task) time.Duration {
	if t.Kind != taskstate.KindTool {
		return 0
	}
	return d.typicalOf(t.Tool)
}

// typicalOf is how long tool's tasks usually take; 0 if not known.
func (d *durations) typicalOf(tool string) time.Duration {
	d.mu.RLock()
	e := d.tools[tool]
	d.mu.RUnlock()
	if e == nil {
		return 0
	}
	return time.Duration(e.typical.Load())
}
