package consumer

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/mcpqueue/mcpqueue/broker"
	"github.com/mcpqueue/mcpqueue/taskstate"
	"github.com/mcpqueue/mcpqueue/vocab"
)

// Call is one run of a handler: the decoded arguments and what the handler
// can do besides returning: report progress, log, ask the client for input.
type Call[In any] struct {
	Args In
	*callState
}

type callState struct {
	w       *Worker
	taskID  string
	tool    string
	owner   string
	attempt int
	args    json.RawMessage
	meta    map[string]json.RawMessage
	trace   map[string]any // trace_id and span_id of the run's span, for its log lines

	// lost ends the handler when a write finds that another run took the
	// task over (set once the run holds the lease).
	lost func(error)

	// The tool's input settings for this run, and the bound of the run
	// itself (the tool's timeout).
	parkAfter, inputTimeout, runBound time.Duration

	mu sync.Mutex
	// takeDue is the take of a run that has not written it yet (lazy take,
	// see Worker.process): the run's first write applies it first.
	takeDue func(*taskstate.Task) error
	parked  bool            // the run ended by parking the task
	rec     *taskstate.Task // the newest version of the record this run has seen
	mode    taskstate.Mode
	seq     int                        // input keys handed out in this run
	answers map[string]json.RawMessage // known answers, by key
	pending map[string]InputRequest    // sync/gather: requests this run could not answer
}

// ErrFenced is the cause a handler's context ends with when another run
// took its task over: this worker's lease lapsed (it was paused, cut off,
// or too slow to renew) and the task was handed to someone else. The run's
// writes are refused from then on and its job is left to the broker.
var ErrFenced = errors.New("consumer: lease lost: another run took the task over")

// writeTimeout bounds one record write of a run, re-reads on conflict
// included.
const writeTimeout = 10 * time.Second

// mutate writes the record starting from the newest version this run has
// seen (see taskstate.MutateFrom) and remembers what it wrote. Once the run
// holds the task (attempt set), every write is fenced on the attempt: the
// record must still carry this run's attempt number, which only a newer
// run's take changes, or the write is refused with ErrFenced.
func (c *callState) mutate(ctx context.Context, decide func(*taskstate.Task) error) (*taskstate.Task, error) {
	return c.write(ctx, decide, false)
}

// write is mutate; takeOnly writes the run's pending take and nothing else,
// and nothing at all once another write of the run has carried it.
func (c *callState) write(ctx context.Context, decide func(*taskstate.Task) error, takeOnly bool) (*taskstate.Task, error) {
	c.mu.Lock()
	known, take := c.rec, c.takeDue
	c.mu.Unlock()
	if takeOnly && take == nil {
		return known, taskstate.ErrSkip
	}
	// A handler's ctx may allow minutes (the tool's timeout); a request in
	// flight when the broker restarts gets no reply and would wait all of
	// that while the lease keeper goes on renewing, so nobody would step in.
	ctx, cancel := context.WithTimeout(ctx, writeTimeout)
	defer cancel()
	ctx, end := c.w.cfg.Telemetry.StartWrite(ctx, c.taskID)
	t, err := taskstate.MutateFrom(ctx, c.w.store, known, c.taskID, c.w.cfg.Now, func(t *taskstate.Task) error {
		switch {
		case take != nil && !c.took(t):
			// The take this run deferred goes first. It must still be the
			// take of the version the run started from: another run's take
			// in between, or its lease, fences this one.
			if t.Attempt != c.attempt-1 || take(t) != nil {
				return ErrFenced
			}
		case takeOnly:
			return taskstate.ErrSkip // another write of the run carried the take
		case c.attempt > 0 && t.Attempt != c.attempt:
			return ErrFenced
		}
		return decide(t)
	})
	if errors.Is(err, taskstate.ErrSkip) {
		end(nil) // nothing to change is not a failed write
	} else {
		end(err)
	}
	if err == nil && take != nil {
		c.mu.Lock()
		c.takeDue = nil
		c.mu.Unlock()
	}
	c.saw(t)
	switch {
	case c.lost == nil:
	case errors.Is(err, ErrFenced):
		c.lost(ErrFenced)
	case errors.Is(err, taskstate.ErrInvalidChange) && t != nil && t.Status == taskstate.Cancelled:
		// Cancelled, and the broadcast did not reach this run (it may
		// have started from a record the job carried, written before
		// the cancel): the record says so all the same.
		c.lost(ErrTaskCancelled)
	}
	return t, err
}

// lazyTake is how long a run defers its take (see Worker.process): longer
// than most short tools take, far shorter than any lease.
const lazyTake = 50 * time.Millisecond

// deferTake makes take the run's pending take, of attempt.
func (c *callState) deferTake(attempt int, take func(*taskstate.Task) error) {
	c.mu.Lock()
	c.attempt, c.takeDue = attempt, take
	c.mu.Unlock()
}

// takePending reports whether the run's take is still unwritten.
func (c *callState) takePending() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.takeDue != nil
}

// took reports whether t already holds this run's take (written by another
// of the run's writes, racing this one).
func (c *callState) took(t *taskstate.Task) bool {
	return t.Attempt == c.attempt && t.Lease != nil && t.Lease.Worker == c.w.cfg.ID
}

// takeLater writes a pending take after d unless a write of the run did
// first; stop cancels that, or waits for the write in progress.
func (c *callState) takeLater(ctx context.Context, d time.Duration) (stop func()) {
	if !c.takePending() {
		return func() {}
	}
	var wg sync.WaitGroup
	wg.Add(1)
	t := time.AfterFunc(d, func() {
		defer wg.Done()
		_, _ = c.write(ctx, func(*taskstate.Task) error { return nil }, true)
	})
	return func() {
		if t.Stop() {
			wg.Done() // it will not run
		}
		wg.Wait() // a write in progress lands before the run goes on
	}
}

// saw records a version of the record if it is newer than the last one.
func (c *callState) saw(t *taskstate.Task) {
	if t == nil {
		return
	}
	c.mu.Lock()
	if c.rec == nil || t.Revision > c.rec.Revision {
		c.rec = t
	}
	c.mu.Unlock()
}

// Logger returns the worker's logger with the task's fields.
func (c *callState) Logger() *zerolog.Logger {
	l := c.w.log.With().Fields(c.trace).Str("task", c.taskID).Str("tool", c.tool).Str("principal", c.owner).Int("attempt", c.attempt).Logger()
	return &l
}

// TaskID is the id of the task this call runs.
func (c *callState) TaskID() string { return c.taskID }

// Attempt counts runs of this task, starting at 1 (more after a crash).
func (c *callState) Attempt() int { return c.attempt }

// Owner is the principal that created the task ("" without authentication).
func (c *callState) Owner() string { return c.owner }

// Sync reports whether the client waits inline for this call rather than
// holding a task handle.
func (c *callState) Sync() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.mode != taskstate.ModeTask
}

// Progress reports how far the call has come: message becomes the task's
// statusMessage, and a client that sent a progress token receives a progress
// notification with progress/total. Pass total 0 when unknown.
func (c *callState) Progress(ctx context.Context, progress, total float64, message string) error {
	if message != "" {
		_, err := c.mutate(ctx, func(t *taskstate.Task) error {
			if t.StatusMessage == message {
				return taskstate.ErrSkip
			}
			t.StatusMessage = message
			return nil
		})
		if err != nil && !errors.Is(err, taskstate.ErrSkip) {
			return fmt.Errorf("consumer: progress: %w", err)
		}
	}
	tok, ok := c.meta[vocab.MetaProgressToken]
	if !ok {
		return nil
	}
	p := map[string]any{"progressToken": tok, "progress": progress}
	if total > 0 {
		p["total"] = total
	}
	if message != "" {
		p["message"] = message
	}
	return c.notify(ctx, "notifications/progress", p)
}

// logLevels orders the MCP log levels (RFC 5424 severities).
var logLevels = map[string]int{"debug": 0, "info": 1, "notice": 2, "warning": 3, "error": 4, "critical": 5, "alert": 6, "emergency": 7}

// Log sends a log message to the client, if its request asked for logs at
// this level or more severe (_meta logLevel); otherwise it does nothing.
func (c *callState) Log(ctx context.Context, level string, data any) error {
	raw, ok := c.meta[vocab.MetaLogLevel]
	if !ok {
		return nil
	}
	var min string
	_ = json.Unmarshal(raw, &min)
	lv, known := logLevels[level]
	if !known {
		return fmt.Errorf("consumer: unknown log level %q", level)
	}
	if lv < logLevels[min] {
		return nil
	}
	return c.notify(ctx, "notifications/message", map[string]any{"level": level, "logger": c.tool, "data": data})
}

// endNotifications tells a streaming front end that no notification of this
// call is still in flight (see broker.TopicNotify).
func (c *callState) endNotifications(ctx context.Context) {
	_, progress := c.meta[vocab.MetaProgressToken]
	_, logs := c.meta[vocab.MetaLogLevel]
	if progress || logs {
		_ = c.w.bus.Publish(ctx, broker.TopicNotify, c.taskID, nil)
	}
}

func (c *callState) notify(ctx context.Context, method string, params any) error {
	b, err := json.Marshal(map[string]any{"jsonrpc": "2.0", "method": method, "params": params})
	if err != nil {
		return fmt.Errorf("consumer: notification: %w", err)
	}
	return c.w.bus.Publish(ctx, broker.TopicNotify, c.taskID, b)
}
