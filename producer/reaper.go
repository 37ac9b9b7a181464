package producer

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/mcpqueue/mcpqueue/broker"
	"github.com/mcpqueue/mcpqueue/taskstate"
	"github.com/mcpqueue/mcpqueue/vocab"
)

// ReaperConfig tunes Reap. A nil ReaperConfig is valid.
type ReaperConfig struct {
	// Interval between passes. Default 5s.
	Interval time.Duration
	// PublishGrace is how long a task may sit with no worker holding it
	// before the reaper asks the queue whether it still holds the job, and
	// republishes it if not (the api died between writing the record and
	// publishing, or a job was lost). Default 30s.
	PublishGrace time.Duration
	// LeaseSlack is how long past its expiry a worker's lease must be
	// before the reaper calls the worker lost: room for clock skew between
	// hosts. Default 1s.
	LeaseSlack time.Duration
	// MaxAttempts: a task whose worker is lost on this attempt is failed
	// instead of requeued. Use the workers' --max-attempts. Default 3.
	MaxAttempts int
	// LeaseExpired, if set, is told of every lapsed lease the reaper acts
	// on (a metrics hook).
	LeaseExpired func(tool string)
	// Holder names this reaper to the others sharing its store, for the
	// store's "reaper" lease (taskstate.Leaser): only the holder runs
	// passes. Default: a random name per Reap.
	Holder string
}

func (c *ReaperConfig) withDefaults() ReaperConfig {
	var out ReaperConfig
	if c != nil {
		out = *c
	}
	out.Interval = cmp.Or(max(out.Interval, 0), 5*time.Second)
	out.PublishGrace = cmp.Or(max(out.PublishGrace, 0), 30*time.Second)
	out.LeaseSlack = cmp.Or(max(out.LeaseSlack, 0), time.Second)
	out.MaxAttempts = cmp.Or(max(out.MaxAttempts, 0), 3)
	return out
}

// ReapStats counts what one pass saw and did.
type ReapStats struct {
	Active   int // non-terminal records scanned
	Requeued int // jobs republished: lapsed lease, or lost before any worker took it
	Failed   int // tasks failed: their worker was lost on the last attempt
	// Released counts scheduled tasks whose job this pass published, now
	// due; NextDue is the earliest not-before still ahead (zero: none),
	// which Reap wakes for (schedule.go).
	Released int
	NextDue  time.Time
}

// Reap runs a pass every Interval until ctx ends. Every api replica may run
// one. When the store has leases (taskstate.Leaser), only the reaper that
// holds the "reaper" lease runs passes, renewing it before each; the others
// try to take it at every Interval, and one does within about three of
// the holder's waits (at least a second) of its end. Either way each action is a
// compare-and-set on the record, so two reapers never both act on the same
// state of a task, and a republished job that races another is held off by
// the live lease of whichever run took it first.
//
// A pass scans the active records (through the stores' active indexes, so
// its cost follows the tasks in flight). So that a large backlog cannot
// keep an api busy scanning, the wait after a pass is also at least
// reapBusyFactor times what the pass took.
func (p *Producer) Reap(ctx context.Context, cfg *ReaperConfig) {
	c := cfg.withDefaults()
	if c.Holder == "" {
		c.Holder = "reaper-" + taskstate.NewID()[:16]
	}
	next := c.Interval // the wait before the coming pass
	wait := time.NewTimer(next)
	defer wait.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-wait.C:
		}
		if !p.holdsReaperLease(ctx, &c, max(next, c.Interval)) {
			next = c.Interval
			wait.Reset(next)
			continue
		}
		began := time.Now()
		st, err := p.ReapOnce(ctx, &c)
		if err != nil && ctx.Err() == nil {
			p.cfg.Logger.Warn().Err(err).Msg("reaper pass failed")
		}
		if st.Requeued+st.Failed+st.Released > 0 {
			p.cfg.Logger.Info().Int("active", st.Active).Int("requeued", st.Requeued).Int("failed", st.Failed).Int("released", st.Released).Msg("reaper pass")
		}
		after := reapWait(c.Interval, time.Since(began))
		if !st.NextDue.IsZero() {
			// A scheduled task falls due before the next pass: wake for it.
			after = min(after, max(st.NextDue.Sub(p.cfg.Now()), 10*time.Millisecond))
		}
		if after > next {
			p.holdsReaperLease(ctx, &c, after) // a long pass: hold on through the longer wait
		}
		next = after
		wait.Reset(next)
	}
}

// reaperLease is the name of the lease the reapers of one store share.
const reaperLease = "reaper"

// holdsReaperLease takes or renews the reaper lease for c.Holder, for three
// times the wait before the coming pass (an Interval, or longer after a long
// pass): true when this reaper should run it. A
// store without leases, or one that fails to answer, lets it run (two
// reapers cost work, not correctness).
func (p *Producer) holdsReaperLease(ctx context.Context, c *ReaperConfig, wait time.Duration) bool {
	l, ok := p.store.(taskstate.Leaser)
	if !ok {
		return true
	}
	held, err := l.Lease(ctx, reaperLease, c.Holder, 3*wait)
	if err != nil {
		if ctx.Err() == nil {
			p.cfg.Logger.Warn().Err(err).Msg("reaper lease: running the pass anyway")
		}
		return true
	}
	return held
}

// reapBusyFactor bounds the reaper to about a tenth of an api's time.
const reapBusyFactor = 10

// reapWait is the wait after a pass that took took.
func reapWait(interval, took time.Duration) time.Duration {
	return max(interval, reapBusyFactor*took)
}

// errNothingToDo tells Mutate that the task no longer needs the reaper.
var errNothingToDo = errors.New("producer: task needs no reaping")

// ReapOnce scans the active tasks once. A task whose worker's lease lapsed
// is requeued (its lease cleared, Requeues bumped, its job published under
// a fresh dedupe key) or, on its last attempt, failed with a statusMessage
// that says so. A task no worker has held for PublishGrace is republished
// if the queue no longer holds its job.
func (p *Producer) ReapOnce(ctx context.Context, cfg *ReaperConfig) (ReapStats, error) {
	c := cfg.withDefaults()
	var st ReapStats
	var firstErr error
	note := func(err error) {
		if err != nil && firstErr == nil {
			firstErr = err
		}
	}
	err := p.store.Scan(ctx, true, func(t *taskstate.Task) bool {
		st.Active++
		now := p.cfg.Now()
		notBefore := taskstate.NotBefore(t.Meta) // a scheduled call: schedule.go
		switch {
		case notBefore.After(now) && t.Lease == nil:
			// Waits for its time, no worker's to lose.
			if st.NextDue.IsZero() || notBefore.Before(st.NextDue) {
				st.NextDue = notBefore
			}
		case !notBefore.IsZero() && p.unreleased(t):
			done, err := p.releaseDue(ctx, t)
			note(err)
			if done {
				st.Released++
			}
		case t.Lease != nil && now.After(t.Lease.Expires.Add(c.LeaseSlack)):
			did, err := p.reapLapsed(ctx, &c, t)
			note(err)
			switch did {
			case reapFailed:
				st.Failed++
			case reapRequeued:
				st.Requeued++
			}
		case t.Parked != nil:
			// Waits for its client with no run and no job: nothing to
			// republish, only its input deadline to keep.
			if now.After(t.Parked.Until) {
				done, err := p.failParked(ctx, t)
				note(err)
				if done {
					st.Failed++
				}
			}
		case t.Lease == nil && now.Sub(t.LastUpdatedAt) > c.PublishGrace:
			done, err := p.republishLost(ctx, t)
			note(err)
			if done {
				st.Requeued++
			}
		}
		return ctx.Err() == nil
	})
	if err != nil {
		return st, fmt.Errorf("producer: reap: %w", err)
	}
	return st, firstErr
}

// What reapLapsed did.
type reapAction int

const (
	reapNothing  reapAction = iota // the task moved on meanwhile
	reapRequeued                   // lease cleared, job republished
	reapFailed                     // last attempt: task failed
)

// reapLapsed acts on a lapsed lease.
func (p *Producer) reapLapsed(ctx context.Context, c *ReaperConfig, seen *taskstate.Task) (reapAction, error) {
	lost := *seen.Lease
	failed := false
	t, err := p.reapMutate(ctx, seen.ID, func(t *taskstate.Task) error {
		// Act only on the state this pass judged: the same run's lease,
		// still lapsed. A renewal or a new take in between wins.
		if t.Status.Terminal() || t.Attempt != seen.Attempt || t.Lease == nil || !t.Lease.Expires.Equal(lost.Expires) {
			return errNothingToDo
		}
		t.Lease = nil
		if max := cmp.Or(t.MaxAttempts, c.MaxAttempts); t.Runs() >= max {
			failed = true
			msg := fmt.Sprintf("gave up after %d attempts: worker %s stopped renewing its lease (expired %s)",
				t.Attempt, lost.Worker, lost.Expires.UTC().Format(time.RFC3339))
			fail(t, msg)
			return nil
		}
		failed = false
		t.Requeues++
		return nil
	})
	if t == nil || err != nil {
		return reapNothing, err
	}
	if c.LeaseExpired != nil {
		c.LeaseExpired(t.Tool)
	}
	log := p.cfg.Logger.Warn().Str("task", t.ID).Str("tool", t.Tool).Str("worker", lost.Worker).Int("attempt", t.Attempt)
	if failed {
		p.finished(ctx, t)
		log.Msg("worker lost on the last attempt; task failed")
		return reapFailed, nil
	}
	log.Int("requeues", t.Requeues).Msg("worker lost; job requeued")
	return reapRequeued, p.exec.Start(ctx, JobFor(t))
}

// reapMutate changes the task's record as Mutate does: nil and no error if
// the task moved on meanwhile (see movedOn), so there is nothing to do.
func (p *Producer) reapMutate(ctx context.Context, id string, change func(*taskstate.Task) error) (*taskstate.Task, error) {
	t, err := taskstate.Mutate(ctx, p.store, id, p.cfg.Now, change)
	if movedOn(err) {
		return nil, nil
	}
	return t, err
}

// fail ends t as failed with msg, dropping its open input requests.
func fail(t *taskstate.Task, msg string) {
	t.Status = taskstate.Failed
	t.StatusMessage = msg
	t.Error = &taskstate.RPCError{Code: vocab.CodeInternalError, Message: msg}
	t.InputRequests = nil
}

// movedOn: the task changed under the reaper (or ended, or went), so there
// is nothing left for it to do.
func movedOn(err error) bool {
	return errors.Is(err, errNothingToDo) || errors.Is(err, taskstate.ErrInvalidChange) || errors.Is(err, taskstate.ErrNotFound)
}

// republishLost republishes the job of a task no worker holds if the queue
// no longer holds it either. It reports whether it published.
func (p *Producer) republishLost(ctx context.Context, seen *taskstate.Task) (bool, error) {
	// An Executor that cannot tell whether it holds the job (broker.Holder)
	// leaves the reaper unable to tell a lost job from a waiting one: it
	// republishes only tasks whose worker was lost.
	h, ok := p.exec.(broker.Holder)
	if !ok {
		return false, nil
	}
	held, err := h.Holds(ctx, taskstate.CatalogKey(seen.Kind, seen.Tool), seen.ID, seen.JobKey())
	if err != nil || held {
		return false, err
	}
	t, err := p.reapMutate(ctx, seen.ID, func(t *taskstate.Task) error {
		if t.Lease != nil || t.Revision != seen.Revision {
			return errNothingToDo // a worker took it, or another reaper acted
		}
		t.Requeues++
		return nil
	})
	if t == nil || err != nil {
		return false, err
	}
	p.cfg.Logger.Warn().Str("task", t.ID).Str("tool", t.Tool).Int("requeues", t.Requeues).
		Dur("idle", p.cfg.Now().Sub(seen.LastUpdatedAt)).Msg("no worker took the task and the queue lost its job; republished")
	return true, p.exec.Start(ctx, JobFor(t))
}

// failParked fails a parked task whose input deadline passed.
func (p *Producer) failParked(ctx context.Context, seen *taskstate.Task) (bool, error) {
	t, err := p.reapMutate(ctx, seen.ID, func(t *taskstate.Task) error {
		if t.Parked == nil || !p.cfg.Now().After(t.Parked.Until) {
			return errNothingToDo // answered meanwhile
		}
		waited := t.Parked.Until.Sub(t.Parked.Since).Round(time.Second)
		msg := fmt.Sprintf("timed out waiting for client input: no answer to its input requests by %s (the input timeout, --input-timeout); it waited %s parked",
			t.Parked.Until.UTC().Format(time.RFC3339), waited)
		fail(t, msg)
		t.Parked = nil
		return nil
	})
	if t == nil || err != nil {
		return false, err
	}
	p.finished(ctx, t)
	p.cfg.Logger.Warn().Str("task", t.ID).Str("tool", t.Tool).Str("principal", t.Owner).Msg("parked task timed out waiting for client input; failed")
	return true, nil
}
