package producer

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/robfig/cron/v3"

	"github.com/mcpqueue/mcpqueue/taskstate"
)

// Recurring schedules (issue #32 item 5). Every api replica runs
// RunSchedules; each firing of a schedule becomes one task for its owner,
// whose id follows from the schedule and the firing time
// (taskstate.IdempotentID of owner, "schedule/<name>/<time>"): of the
// replicas that see one firing, the store's create-if-absent lets one
// create the task and publish its job, and the others find it
// (CreateOrGet). Firing times are wall-clock ones in UTC, the same on every
// replica; "@every d" fires at the multiples of d since the Unix epoch. A
// firing no replica was up for is not made up later, beyond the catch-up
// window (RunSchedules' first look reaches back ScheduleConfig.CatchUp).

// MetaSchedule is the Meta key naming the schedule and firing a task
// came from: {"name": …, "firedAt": …}.
const MetaSchedule = "io.mcpqueue/schedule"

var cronParser = cron.NewParser(cron.SecondOptional | cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow | cron.Descriptor)

// Cron is a parsed schedule expression.
type Cron struct{ s cron.Schedule }

// ParseCron parses a schedule's expression: standard 5-field cron (minute,
// hour, day of month, month, day of week; UTC), 6 fields with seconds
// first, or a descriptor (@hourly, @daily, @every 30s, …; @every rounds
// down to whole seconds, at least one).
func ParseCron(expr string) (Cron, error) {
	s, err := cronParser.Parse(expr)
	if err != nil {
		return Cron{}, fmt.Errorf("producer: cron expression %q: %w", expr, err)
	}
	return Cron{s: s}, nil
}

// Next is the first firing after t.
func (c Cron) Next(t time.Time) time.Time {
	t = t.UTC()
	if d, ok := c.s.(cron.ConstantDelaySchedule); ok {
		// On the Unix epoch's grid: the same on every replica.
		n := int64(d.Delay)
		return time.Unix(0, (t.UnixNano()/n+1)*n).UTC()
	}
	return c.s.Next(t)
}

// ScheduleConfig tunes RunSchedules. A nil ScheduleConfig is valid.
type ScheduleConfig struct {
	// Tick is how often the schedules are read and due firings made.
	// Default 1s.
	Tick time.Duration
	// CatchUp is how far back the first look reaches: firings within it
	// that no replica made yet are made. Default 1m.
	CatchUp time.Duration
}

// RunSchedules fires the store's schedules (taskstate.Schedules) until ctx
// ends; it returns at once when the store keeps none.
func (p *Producer) RunSchedules(ctx context.Context, cfg *ScheduleConfig) {
	sched, ok := p.store.(taskstate.Schedules)
	if !ok {
		return
	}
	var c ScheduleConfig
	if cfg != nil {
		c = *cfg
	}
	c.Tick = max(c.Tick, 0)
	if c.Tick == 0 {
		c.Tick = time.Second
	}
	if c.CatchUp <= 0 {
		c.CatchUp = time.Minute
	}
	since := p.cfg.Now().Add(-c.CatchUp)
	tick := time.NewTicker(c.Tick)
	defer tick.Stop()
	for {
		now := p.cfg.Now()
		if err := p.FireSchedules(ctx, sched, since, now); err != nil && ctx.Err() == nil {
			p.cfg.Logger.Warn().Err(err).Msg("firing schedules")
		} else {
			since = now
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// maxFirings bounds the firings of one schedule one look makes.
const maxFirings = 100

// FireSchedules makes the firings of every schedule in (since, until]:
// one task each, created once however many replicas call it.
func (p *Producer) FireSchedules(ctx context.Context, sched taskstate.Schedules, since, until time.Time) error {
	all, err := sched.ListSchedules(ctx)
	if err != nil {
		return err
	}
	var errs []error
	for _, s := range all {
		c, err := ParseCron(s.Cron)
		if err != nil {
			errs = append(errs, fmt.Errorf("schedule %s: %w", s.Name, err))
			continue
		}
		for at, n := c.Next(since), 0; !at.After(until) && n < maxFirings; at, n = c.Next(at), n+1 {
			if err := p.fire(ctx, s, at); err != nil {
				errs = append(errs, fmt.Errorf("schedule %s at %s: %w", s.Name, at.Format(time.RFC3339), err))
			}
		}
	}
	return errors.Join(errs...)
}

// fire makes schedule s's firing at at: its task, unless a replica has.
func (p *Producer) fire(ctx context.Context, s *taskstate.Schedule, at time.Time) error {
	fired := at.UTC().Format(time.RFC3339)
	mark, _ := json.Marshal(map[string]string{"name": s.Name, "firedAt": fired})
	t, created, err := p.CreateOrGet(ctx, &Request{
		Tool: s.Tool, Arguments: s.Arguments, Owner: s.Owner, Era: taskstate.Era20260728, Mode: taskstate.ModeTask,
		IdempotencyKey: "schedule/" + s.Name + "/" + fired,
		Meta:           map[string]json.RawMessage{MetaSchedule: mark},
	})
	if err != nil {
		return err
	}
	if created {
		p.cfg.Logger.Info().Str("schedule", s.Name).Str("fired_at", fired).Str("task", t.ID).Str("tool", s.Tool).Msg("schedule fired")
	}
	return nil
}
