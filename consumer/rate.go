package consumer

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/mcpqueue/mcpqueue/broker"
	"github.com/mcpqueue/mcpqueue/taskstate"
)

// Rate is a tool's rate limit (Tool.RateLimit): at most N starts in any
// window of Per. It holds across every worker of every pool on the store:
// the store keeps it (taskstate.RateLimiter: a Redis script, a NATS KV
// compare-and-set), and starts are spaced Per/N apart and 5% more (no
// burst), so at most N fall in any window of Per.
type Rate = taskstate.Rate

// RateWait is the statusMessage of a task of tool waiting for the tool's
// rate limit r.
func RateWait(tool string, r Rate) string {
	return fmt.Sprintf("waiting for tool %q's rate limit (%s)", tool, r)
}

// rateOf is the rate limit of the tool under catalog key: the worker's own
// for it (Config.RateLimits), else the tool's; the zero Rate is none.
func (w *Worker) rateOf(key string, e *entry) Rate {
	return cmp.Or(w.cfg.RateLimits[key], e.rate)
}

// checkRates refuses to run a rate-limited tool on a store that cannot
// keep the limit: a limit per process would not hold for the pool.
func (w *Worker) checkRates(mux *Mux) error {
	if _, ok := w.store.(taskstate.RateLimiter); ok {
		return nil
	}
	for key, e := range mux.entries() {
		if r := w.rateOf(key, e); !r.IsZero() {
			return fmt.Errorf("consumer: tool %q has a rate limit (%s), and the store (%T) keeps none (taskstate.RateLimiter)", key, r, w.store)
		}
	}
	for key, r := range w.cfg.RateLimits {
		if err := r.Check(); err != nil {
			return fmt.Errorf("consumer: Config.RateLimits[%q]: %w", key, err)
		}
	}
	return nil
}

// publishRate puts the rate limit of the catalog entry t on it.
func (w *Worker) publishRate(mux *Mux, t *taskstate.ToolInfo) {
	if e := mux.lookup(t.Key()); e != nil {
		if r := w.rateOf(t.Key(), e); !r.IsZero() {
			t.RateLimit = &r
		}
	}
}

// rateHold bounds how long a job over its tool's rate limit waits in its
// worker slot for the limit's next free slot before it goes back to the
// queue: a queue's deferral may come back later than asked (Asynq
// schedules in whole seconds), and jobs that all come back at once get
// one slot between them. At most the limit's N jobs of one tool wait so on
// one worker; the others go back to the queue at once.
const rateHold = time.Second

// rateGate takes a slot of the tool's rate limit for the delivery r about
// to take the task on record rec (take: the take it would write; a take
// that would be refused takes no slot, and neither does a tool without a
// limit). Over the limit the job waits for the next slot, in its worker
// slot for up to rateHold, else handed back to the queue until then (not
// a delivery failure, not an attempt: broker.Deferrer); the task's
// statusMessage says why, written once per wait, not on every hand-back.
// False: the job was handed back (or, when the limiter failed, retried).
func (w *Worker) rateGate(r *delivery, rec *taskstate.Task, take func(*taskstate.Task) error) bool {
	key := taskstate.CatalogKey(r.job.Kind, r.job.Tool)
	limit := w.rateOf(key, r.e)
	if limit.IsZero() {
		return true
	}
	r.rateWait = RateWait(r.job.Tool, limit)
	if take(rec.Clone()) != nil {
		return true // the take refuses: no slot for it
	}
	l, _ := w.store.(taskstate.RateLimiter) // checkRates at Run, but a Replace may add a limit
	if l == nil {
		r.log.Error().Str("rate", limit.String()).Msg("the tool has a rate limit and the store keeps none; retrying the job")
		_ = r.d.Retry(r.io, backoff(r.d.Delivered()))
		return false
	}
	holding := false
	defer func() {
		if holding {
			w.holdRate(key, -1)
		}
	}()
	deadline := w.cfg.Now().Add(rateHold)
	padded := withMargin(limit)
	for {
		wait, err := l.TakeRate(r.io, key, padded)
		if err != nil {
			r.log.Error().Err(err).Msg("taking a slot of the tool's rate limit; retrying the job")
			deferJob(r.io, r.d, backoff(r.d.Delivered()))
			return false
		}
		if wait == 0 {
			return true
		}
		w.noteRateWait(r, rec)
		if !holding {
			holding = w.holdRate(key, limit.N)
		}
		if !holding || w.cfg.Now().Add(wait).After(deadline) {
			r.log.Debug().Dur("wait", wait).Str("rate", limit.String()).Msg("over the tool's rate limit; deferring the job to its next slot")
			deferJob(r.io, r.d, wait)
			return false
		}
		select {
		case <-time.After(wait): // the limit's next slot: pacing, as a deferral would
		case <-r.tctx.Done(): // cancelled, or shutting down: the job goes back
			deferJob(r.io, r.d, 0)
			return false
		}
	}
}

// rateMargin is the share of a rate's interval the worker adds to it: the
// limiter spaces slots by the interval, and the handler starts a store
// round trip and a take after its slot, later by an amount that varies; so
// that starts measured at the handler, or calls counted by the upstream
// API, stay within the limit, slots are kept this much further apart (5 per
// 1s: 210ms, 4.76 a second).
const rateMargin = 20 // 1/20: 5%

// withMargin is r with its interval widened by rateMargin.
func withMargin(r Rate) Rate { return Rate{N: r.N, Per: r.Per + r.Per/rateMargin} }

// holdRate counts a job of the tool key waiting in its slot (n > 0: if
// fewer than n do; reports whether it now counts) or, with n < 0, one
// that stopped.
func (w *Worker) holdRate(key string, n int) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if n < 0 {
		if w.rateHolds[key]--; w.rateHolds[key] <= 0 {
			delete(w.rateHolds, key)
		}
		return false
	}
	if w.rateHolds[key] >= n {
		return false
	}
	w.rateHolds[key]++
	return true
}

// noteRateWait writes r's rate-limit wait as the task's statusMessage
// unless rec (the record as the take will start from, updated here) says
// so already.
func (w *Worker) noteRateWait(r *delivery, rec *taskstate.Task) {
	if rec.StatusMessage == r.rateWait {
		return
	}
	t, err := taskstate.MutateFrom(r.io, w.store, rec, r.job.TaskID, w.cfg.Now, func(t *taskstate.Task) error {
		if t.Status != taskstate.Working || t.StatusMessage == r.rateWait {
			return taskstate.ErrSkip
		}
		t.StatusMessage = r.rateWait
		return nil
	})
	switch {
	case err == nil, errors.Is(err, taskstate.ErrSkip):
		*rec = *t // the take writes on this revision
	default:
		r.log.Warn().Err(err).Msg("writing the rate limit's wait on the record")
	}
}

// deferJob hands d's job back for delay without counting a delivery
// failure (broker.Deferrer), or with Retry where the queue cannot.
func deferJob(io context.Context, d broker.Delivery, delay time.Duration) {
	if df, ok := d.(broker.Deferrer); ok {
		_ = df.Defer(io, delay)
		return
	}
	_ = d.Retry(io, delay)
}
