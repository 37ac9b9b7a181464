package producer

import (
	"context"
	"maps"
	"time"

	"github.com/mcpqueue/mcpqueue/broker"
	"github.com/mcpqueue/mcpqueue/taskstate"
)

// Scheduled calls (issue #32 item 1). A call with a not-before time ahead
// is created at once — working, statusMessage taskstate.ScheduledFor, the
// time in its Meta (taskstate.MetaNotBefore) and so in every job its record
// makes (JobFor: broker.Job.NotBefore) — and then:
//
//   - on a queue that schedules (broker.Scheduler: Asynq's scheduled set)
//     its job is enqueued at once and the queue holds it until it is due;
//     a cancel takes it back (Unschedule);
//   - on any other queue (JetStream) nothing is published: the reaper
//     publishes the job once it is due (releaseDue), waking for the
//     earliest not-before it saw rather than after a whole interval. A
//     scheduled task not yet released is one with no requeue and no
//     attempt; the release bumps Requeues with a compare-and-set, so two
//     reapers never both publish it, and its job's dedupe key (id/r1) is
//     fresh. A cancel leaves nothing to withdraw: the record is terminal
//     and the reaper scans only active ones.
//
// In both cases the worker defers a job that comes before its not-before
// (consumer), so an early delivery never runs it, and the reaper does not
// take a task waiting for its time for a lost one.

// schedule makes t, a record about to be created at now, a scheduled one
// when notBefore is ahead of now; it reports whether it did.
func (p *Producer) schedule(t *taskstate.Task, notBefore, now time.Time) bool {
	if !notBefore.After(now) {
		return false // the time has come: an ordinary call
	}
	t.Meta = taskstate.SetNotBefore(maps.Clone(t.Meta), notBefore)
	t.StatusMessage = taskstate.ScheduledFor(notBefore)
	return true
}

// schedules reports whether the executor's queue holds a scheduled job
// until it is due (broker.Scheduler).
func (p *Producer) schedules() bool {
	if s, ok := p.exec.(interface{ Schedules() bool }); ok {
		return s.Schedules()
	}
	_, ok := p.exec.(broker.Scheduler)
	return ok
}

// Schedules reports whether the queue holds a job until its NotBefore
// (broker.Scheduler): the producer then enqueues a scheduled call's job at
// once, else the reaper publishes it when due.
func (e QueueExecutor) Schedules() bool {
	_, ok := e.Queue.(broker.Scheduler)
	return ok
}

// Unschedule implements broker.Scheduler when the queue is one, and does
// nothing otherwise (Schedules is false: no job waits in the queue).
func (e QueueExecutor) Unschedule(ctx context.Context, route, taskID string) error {
	if s, ok := e.Queue.(broker.Scheduler); ok {
		return s.Unschedule(ctx, route, taskID)
	}
	return nil
}

// unschedule takes back the job of t, a scheduled task just cancelled,
// from a queue that holds it until it is due.
func (p *Producer) unschedule(ctx context.Context, t *taskstate.Task) {
	s, ok := p.exec.(broker.Scheduler)
	if !ok || !p.schedules() || !taskstate.NotBefore(t.Meta).After(p.cfg.Now()) {
		return
	}
	if err := s.Unschedule(ctx, taskstate.CatalogKey(t.Kind, t.Tool), t.ID); err != nil {
		p.cfg.Logger.Warn().Err(err).Str("task", t.ID).Msg("taking back the cancelled scheduled task's job failed; the worker drops it when due")
	}
}

// unreleased reports whether t is a scheduled task whose job the reaper
// has yet to publish: a not-before, on a queue that does not schedule, and
// no requeue or attempt since the create.
func (p *Producer) unreleased(t *taskstate.Task) bool {
	return !p.schedules() && t.Requeues == 0 && t.Attempt == 0 && t.Lease == nil && !taskstate.NotBefore(t.Meta).IsZero()
}

// releaseDue publishes the job of seen, a scheduled task now due that no
// job was published for (unreleased); it reports whether it did.
func (p *Producer) releaseDue(ctx context.Context, seen *taskstate.Task) (bool, error) {
	t, err := p.reapMutate(ctx, seen.ID, func(t *taskstate.Task) error {
		if !p.unreleased(t) {
			return errNothingToDo // another reaper released it, or it was cancelled
		}
		t.Requeues++
		return nil
	})
	if t == nil || err != nil {
		return false, err
	}
	p.cfg.Logger.Info().Str("task", t.ID).Str("tool", t.Tool).Time("not_before", taskstate.NotBefore(t.Meta)).Msg("scheduled task due; job published")
	// A failed publish is the lost job the grace below republishes.
	return true, p.exec.Start(ctx, JobFor(t))
}
