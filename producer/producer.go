// Package producer turns a tool call into a task: it writes the record and
// starts the job through an Executor, idempotently on the task id. It also
// cancels tasks. It never imports consumer or mcpfront.
package producer

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/rs/zerolog"

	"github.com/mcpqueue/mcpqueue/broker"
	"github.com/mcpqueue/mcpqueue/taskstate"
)

// Executor runs jobs durably. Start returns once the job is durably accepted
// (not when it finishes); Cancel asks whoever runs the task to stop.
// JetStream and Asynq queues are executors (see QueueExecutor); another
// durable runtime plugs in the same way.
type Executor interface {
	Start(ctx context.Context, job *broker.Job) error
	Cancel(ctx context.Context, taskID string) error
}

// QueueExecutor is the Executor over a broker.Queue and a broker.Bus: Start
// enqueues, Cancel broadcasts on the cancel topic.
type QueueExecutor struct {
	Queue broker.Queue
	Bus   broker.Bus
}

func (e QueueExecutor) Start(ctx context.Context, job *broker.Job) error {
	return e.Queue.Enqueue(ctx, job)
}

func (e QueueExecutor) Cancel(ctx context.Context, taskID string) error {
	return e.Bus.Publish(ctx, broker.TopicCancel, taskID, nil)
}

// Config tunes a Producer. A nil Config is valid.
type Config struct {
	// TTL is the retention of a terminal task. Default 1h.
	TTL time.Duration
	// PollInterval suggested to clients. Default 500ms.
	PollInterval time.Duration
	Logger       zerolog.Logger
	// Now is the clock. Default time.Now.
	Now func() time.Time
	// AfterRecord, if set, runs after a task's record is written and before
	// its job is published: a fault-injection point for tests of that gap.
	AfterRecord func(*taskstate.Task)
}

// Producer creates and cancels tasks.
type Producer struct {
	store taskstate.Store
	exec  Executor
	cfg   Config
}

// New returns a Producer writing to store and starting jobs on exec.
func New(store taskstate.Store, exec Executor, cfg *Config) *Producer {
	var c Config
	if cfg != nil {
		c = *cfg
	}
	if c.TTL <= 0 {
		c.TTL = time.Hour
	}
	if c.PollInterval <= 0 {
		c.PollInterval = 500 * time.Millisecond
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	return &Producer{store: store, exec: exec, cfg: c}
}

// Request is one tool call to run as a task.
type Request struct {
	// Kind is taskstate.KindTool (default) or taskstate.KindPrompt.
	Kind      string
	Tool      string
	Arguments json.RawMessage
	Owner     string
	Era       taskstate.Era
	// Mode says who waits (see taskstate.Mode). Default ModeTask.
	Mode taskstate.Mode
	Meta map[string]json.RawMessage
	// TTL overrides the retention of this task once terminal (0: the default).
	TTL time.Duration
	// ID, when set, makes Create idempotent: a retry with the same id returns
	// the existing record instead of starting a second job.
	ID string
}

// ErrStart wraps a failure to start a job; the task has been marked failed.
var ErrStart = errors.New("producer: job not started")

// Create writes the record (working) and starts the job. It returns once both
// are durable, so an immediate tasks/get finds the task. If the start fails
// the record is marked failed and an error wrapping ErrStart is returned.
func (p *Producer) Create(ctx context.Context, r *Request) (*taskstate.Task, error) {
	now := p.cfg.Now().UTC()
	id := r.ID
	if r.Mode == "" {
		r.Mode = taskstate.ModeTask
	}
	if id == "" {
		id = taskstate.NewID()
	}
	t := &taskstate.Task{
		ID:             id,
		Kind:           r.Kind,
		Tool:           r.Tool,
		Arguments:      r.Arguments,
		Owner:          r.Owner,
		Era:            r.Era,
		Mode:           r.Mode,
		Status:         taskstate.Working,
		CreatedAt:      now,
		LastUpdatedAt:  now,
		TTLMs:          cmp.Or(r.TTL, p.cfg.TTL).Milliseconds(),
		PollIntervalMs: p.cfg.PollInterval.Milliseconds(),
		Meta:           r.Meta,
	}
	err := p.store.Create(ctx, t)
	if errors.Is(err, taskstate.ErrExists) && r.ID != "" {
		return p.store.Get(ctx, id)
	}
	if err != nil {
		return nil, fmt.Errorf("producer: create record: %w", err)
	}
	if p.cfg.AfterRecord != nil {
		p.cfg.AfterRecord(t)
	}
	if err := p.exec.Start(ctx, JobFor(t)); err != nil {
		p.cfg.Logger.Error().Err(err).Str("task", id).Str("tool", r.Tool).Msg("job start failed; marking task failed")
		// The caller's ctx may be what failed; the failure must still be recorded.
		fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		failed, ferr := taskstate.Mutate(fctx, p.store, id, p.cfg.Now, func(t *taskstate.Task) error {
			t.Status = taskstate.Failed
			t.StatusMessage = "the job could not be queued"
			t.Error = &taskstate.RPCError{Code: -32603, Message: "task could not be started: " + err.Error()}
			return nil
		})
		if ferr != nil {
			p.cfg.Logger.Error().Err(ferr).Str("task", id).Msg("could not mark unstarted task failed")
		}
		return failed, fmt.Errorf("%w: %w", ErrStart, err)
	}
	p.cfg.Logger.Debug().Str("task", id).Str("tool", r.Tool).Str("era", string(r.Era)).Str("mode", string(t.Mode)).Msg("task created")
	return t, nil
}

// JobFor is the job that runs t; after a requeue it carries the requeue's
// dedupe key (Task.JobKey).
func JobFor(t *taskstate.Task) *broker.Job {
	j := &broker.Job{TaskID: t.ID, Kind: t.Kind, Tool: t.Tool, Arguments: t.Arguments, Owner: t.Owner, Meta: t.Meta}
	if t.Requeues > 0 {
		j.Dedupe = t.JobKey()
	}
	return j
}

// Holds implements Holder when the queue is a broker.Holder.
func (e QueueExecutor) Holds(ctx context.Context, tool, taskID, dedupe string) (bool, error) {
	h, ok := e.Queue.(broker.Holder)
	if !ok {
		return true, fmt.Errorf("producer: %T cannot tell whether it holds a job", e.Queue)
	}
	return h.Holds(ctx, tool, taskID, dedupe)
}

// Cancel marks the task cancelled (terminal and sticky) and then tells the
// executor. A task already terminal is returned unchanged with ErrTerminal.
func (p *Producer) Cancel(ctx context.Context, id, reason string) (*taskstate.Task, error) {
	t, err := taskstate.Mutate(ctx, p.store, id, p.cfg.Now, func(t *taskstate.Task) error {
		if t.Status.Terminal() {
			return ErrTerminal
		}
		t.Status = taskstate.Cancelled
		t.StatusMessage = reason
		t.InputRequests = nil
		t.Lease = nil
		return nil
	})
	if err != nil {
		if errors.Is(err, taskstate.ErrInvalidChange) {
			err = ErrTerminal
		}
		return t, err
	}
	if err := p.exec.Cancel(ctx, id); err != nil {
		// The record is already cancelled: a worker that misses the broadcast
		// still stops when it next reads the record.
		p.cfg.Logger.Warn().Err(err).Str("task", id).Msg("cancel broadcast failed")
	}
	p.cfg.Logger.Info().Str("task", id).Str("tool", t.Tool).Msg("task cancelled")
	return t, nil
}

// ErrTerminal is returned when cancelling a task that already ended.
var ErrTerminal = errors.New("producer: task already terminal")
