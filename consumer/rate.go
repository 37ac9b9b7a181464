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
// compare-and-set), and starts are spaced Per/N apart.
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

// rateGate takes a slot of the tool's rate limit for the delivery r about
// to take the task on record rec (take: the take it would write; a take
// that would be refused takes no slot, and neither does a tool without a
// limit); false: no slot was free, and the job was deferred until the next
// one (not a delivery failure, not an attempt: broker.Deferrer) with the
// task's statusMessage saying why — written once per wait, not on every
// hand-back — or the limiter failed and the job was retried.
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
	wait, err := l.TakeRate(r.io, key, limit)
	if err != nil {
		r.log.Error().Err(err).Msg("taking a slot of the tool's rate limit; retrying the job")
		deferJob(r.io, r.d, backoff(r.d.Delivered()))
		return false
	}
	if wait == 0 {
		return true
	}
	if rec.StatusMessage != r.rateWait {
		_, err := taskstate.MutateFrom(r.io, w.store, rec, r.job.TaskID, w.cfg.Now, func(t *taskstate.Task) error {
			if t.Status != taskstate.Working || t.StatusMessage == r.rateWait {
				return taskstate.ErrSkip
			}
			t.StatusMessage = r.rateWait
			return nil
		})
		if err != nil && !errors.Is(err, taskstate.ErrSkip) {
			r.log.Warn().Err(err).Msg("writing the rate limit's wait on the record")
		}
	}
	r.log.Debug().Dur("wait", wait).Str("rate", limit.String()).Msg("over the tool's rate limit; deferring the job to its next slot")
	deferJob(r.io, r.d, wait)
	return false
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
