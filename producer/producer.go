// Package producer turns a tool call into a task, for the api: it writes the
// task record and starts the job through an Executor (QueueExecutor puts it on
// the queue), idempotently on the task id, and it cancels tasks. It never
// imports consumer or mcpfront.
package producer

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/rs/zerolog"

	"github.com/mcpqueue/mcpqueue/broker"
	"github.com/mcpqueue/mcpqueue/internal/slogzero"
	"github.com/mcpqueue/mcpqueue/taskstate"
	"github.com/mcpqueue/mcpqueue/telemetry"
	"github.com/mcpqueue/mcpqueue/vocab"
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

// Start enqueues the task's job.
func (e QueueExecutor) Start(ctx context.Context, job *broker.Job) error {
	return e.Queue.Enqueue(ctx, job)
}

// Cancel broadcasts the task's cancellation to every worker.
func (e QueueExecutor) Cancel(ctx context.Context, taskID string) error {
	return e.Bus.Publish(ctx, broker.TopicCancel, taskID, nil)
}

// Config tunes a Producer. A nil Config is valid.
type Config struct {
	// TTL is the retention of a terminal task. Default 1h.
	TTL time.Duration
	// PollInterval suggested to clients. Default 500ms.
	PollInterval time.Duration
	// Logger gets the producer's log lines; Slog, when set, instead.
	// Default: none.
	Logger zerolog.Logger
	Slog   *slog.Logger
	// Telemetry counts created and cancelled tasks and traces creation; the
	// job carries the trace on (nil: none).
	Telemetry *telemetry.Telemetry
	// Now is the clock. Default time.Now.
	Now func() time.Time
	// StartRetry is how long Create keeps retrying a job publish that
	// failed (a broker restarting, a cluster electing a stream leader)
	// before it marks the task failed; the caller's ctx bounds it too.
	// Publishing is deduped on the task id, so a retry never queues the job
	// twice. Default 5s; negative: no retry.
	StartRetry time.Duration
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
	c.TTL = cmp.Or(max(c.TTL, 0), time.Hour)
	c.PollInterval = cmp.Or(max(c.PollInterval, 0), 500*time.Millisecond)
	c.Logger, c.Slog = slogzero.Logger(c.Logger, c.Slog), nil
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.StartRetry == 0 {
		c.StartRetry = 5 * time.Second
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
	// IdempotencyKey, when set, is the client's idempotency key for the
	// call: the task's id is taskstate.IdempotentID(Owner, IdempotencyKey,
	// Round) (ID is set to it), and a call whose key finds an existing
	// task gets that task (CreateOrGet) — or ErrKeyReused when the task is
	// of another call (another kind, tool or arguments).
	IdempotencyKey string
	// Round tells apart the rounds of one multi-round (MRTR) call: the
	// requestState the call brings back, "" for a first call.
	Round string
	// StatusMessage is the record's first statusMessage (e.g. that no
	// worker serves the tool right now: taskstate.AwaitingWorker).
	StatusMessage string
	// NotBefore, when ahead, schedules the call (issue #32 item 1): the
	// task is created at once, with statusMessage "scheduled for …" and
	// the time in its Meta (taskstate.MetaNotBefore), and its handler does
	// not start before then. A time that has passed runs at once. See
	// schedule.go.
	NotBefore time.Time
	// WebhookURL, when set, is where the task's completion webhook goes
	// (the caller checked it against its allow list): its delivery is
	// written to the store's outbox (taskstate.Outbox) before the record,
	// so no crash loses it (webhook.go).
	WebhookURL string
}

// ErrStart wraps a failure to start a job; the task has been marked failed.
var ErrStart = errors.New("producer: job not started")

// ErrKeyReused is CreateOrGet's (and Create's) refusal of a call whose
// idempotency key names an existing task of another call: another kind,
// tool or arguments. The error is a *KeyReusedError, which matches it.
var ErrKeyReused = errors.New("producer: idempotency key was used for another call")

// KeyReusedError says which call an idempotency key belongs to.
type KeyReusedError struct {
	Key string
	// Kind and Tool are those of the task the key created; SameTool says
	// they are the refused call's too (its arguments differ).
	Kind, Tool string
	SameTool   bool
}

func (e *KeyReusedError) Error() string {
	what := fmt.Sprintf("%s %q", cmp.Or(e.Kind, "tool"), e.Tool)
	if e.SameTool {
		what += " with other arguments"
	}
	return fmt.Sprintf("idempotency key %q was used for another call (%s)", e.Key, what)
}

// Is makes a KeyReusedError match ErrKeyReused.
func (e *KeyReusedError) Is(target error) bool { return target == ErrKeyReused }

// Create writes the record (working) and starts the job. It returns once both
// are durable, so an immediate tasks/get finds the task. If the start fails
// the record is marked failed and an error wrapping ErrStart is returned.
// A request whose ID or IdempotencyKey names an existing task gets that
// task (see CreateOrGet).
func (p *Producer) Create(ctx context.Context, r *Request) (*taskstate.Task, error) {
	t, _, err := p.CreateOrGet(ctx, r)
	return t, err
}

// CreateOrGet is Create that also tells whether this call created the task.
// When r.ID or r.IdempotencyKey names a task that exists, it starts nothing
// and returns that task as it stands (created false); with an idempotency
// key, a task of another call (another kind, tool or arguments:
// taskstate.InputDigest) is refused with an error wrapping ErrKeyReused,
// along with that task. Of several calls racing for one id, on any number
// of api replicas, the store's create-if-absent lets exactly one create the
// record, and only that one publishes the job: the others read its record.
// A creator that dies before it publishes leaves a working record without
// a job, which the reaper republishes (Reap, PublishGrace).
func (p *Producer) CreateOrGet(ctx context.Context, r *Request) (*taskstate.Task, bool, error) {
	if r.IdempotencyKey != "" {
		if err := taskstate.CheckIdempotencyKey(r.IdempotencyKey); err != nil {
			return nil, false, fmt.Errorf("producer: idempotency key %w", err)
		}
		r.ID = taskstate.IdempotentID(r.Owner, r.IdempotencyKey, r.Round)
	}
	for range 3 {
		var t *taskstate.Task
		err := taskstate.ErrNotFound
		if r.IdempotencyKey != "" {
			t, err = p.store.Get(ctx, r.ID) // a retry mostly finds its task: nothing to store
		}
		if errors.Is(err, taskstate.ErrNotFound) {
			t, err = p.create(ctx, r)
			if !errors.Is(err, taskstate.ErrExists) {
				return t, err == nil, err
			}
			t, err = p.store.Get(ctx, r.ID)
		}
		if errors.Is(err, taskstate.ErrNotFound) {
			continue // it expired in between: create it afresh
		}
		if err != nil {
			return nil, false, fmt.Errorf("producer: reading the existing task: %w", err)
		}
		if r.IdempotencyKey != "" && t.InputDigest != taskstate.InputDigest(r.Kind, r.Tool, r.Arguments) {
			return t, false, &KeyReusedError{Key: r.IdempotencyKey, Kind: t.Kind, Tool: t.Tool, SameTool: t.Kind == r.Kind && t.Tool == r.Tool}
		}
		return t, false, nil
	}
	return nil, false, fmt.Errorf("producer: task %s keeps vanishing between create and read", r.ID)
}

// create is Create of a new record: taskstate.ErrExists (unwrapped) when
// r.ID is taken.
func (p *Producer) create(ctx context.Context, r *Request) (*taskstate.Task, error) {
	now := p.cfg.Now().UTC()
	id := r.ID
	if r.Mode == "" {
		r.Mode = taskstate.ModeTask
	}
	if id == "" {
		id = taskstate.NewID()
	}
	tel := p.cfg.Telemetry
	ctx, end := tel.StartCreate(ctx, id, r.Kind, r.Tool)
	defer end(nil)
	digest, blob := "", "args"
	if r.IdempotencyKey != "" {
		// Racing calls of one key each store their own arguments' blob
		// (named by their digest): a loser's never replaces the winner's.
		digest = taskstate.InputDigest(r.Kind, r.Tool, r.Arguments)
		blob = "args-" + digest[:16]
	}
	args, ref, err := p.putArgs(ctx, id, blob, r.Arguments)
	if err != nil {
		end(err)
		return nil, err
	}
	t := &taskstate.Task{
		ID:             id,
		Kind:           r.Kind,
		Tool:           r.Tool,
		Arguments:      args,
		ArgumentsRef:   ref,
		Owner:          r.Owner,
		IdempotencyKey: r.IdempotencyKey,
		Era:            r.Era,
		Mode:           r.Mode,
		Status:         taskstate.Working,
		StatusMessage:  r.StatusMessage,
		CreatedAt:      now,
		LastUpdatedAt:  now,
		TTLMs:          cmp.Or(r.TTL, p.cfg.TTL).Milliseconds(),
		PollIntervalMs: p.cfg.PollInterval.Milliseconds(),
		Meta:           tel.Inject(ctx, r.Meta), // the job continues this trace
	}
	t.InputDigest = digest
	scheduled := p.schedule(t, r.NotBefore, now) // schedule.go
	err = p.writeRecord(ctx, r, t)               // with its webhook delivery: webhook.go
	if errors.Is(err, taskstate.ErrExists) && r.ID != "" {
		if ref != nil && digest != "" {
			p.dropLostArgs(ctx, ref.Key)
		}
		return nil, taskstate.ErrExists
	}
	if err != nil {
		return nil, fmt.Errorf("producer: create record: %w", err)
	}
	if p.cfg.AfterRecord != nil {
		p.cfg.AfterRecord(t)
	}
	if scheduled && !p.schedules() {
		// The queue cannot hold a job until it is due: the reaper
		// publishes it then (schedule.go).
		p.created(ctx, t)
		return t, nil
	}
	job := JobFor(t)
	if w, ok := p.exec.(interface{ Withdraws() bool }); ok && w.Withdraws() {
		withRecord(job, t) // its workers start from it (broker.Withdrawer)
	}
	retried, err := p.start(ctx, job)
	if err == nil && retried {
		// A publish that needed retries may have spanned a failover of
		// the store (a Redis primary lost before it replicated the
		// record): acknowledge only a record that is still there.
		if _, gerr := p.store.Get(ctx, id); gerr != nil {
			err = fmt.Errorf("the task record is gone after the job was queued (lost in a failover?): %w", gerr)
		}
	}
	if err != nil {
		p.cfg.Logger.Error().Err(err).Str("task", id).Str("tool", r.Tool).Msg("job start failed; marking task failed")
		// The caller's ctx may be what failed; the failure must still be recorded.
		fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		failed, ferr := taskstate.Mutate(fctx, p.store, id, p.cfg.Now, func(t *taskstate.Task) error {
			t.Status = taskstate.Failed
			t.StatusMessage = "the job could not be queued"
			t.Error = &taskstate.RPCError{Code: vocab.CodeInternalError, Message: "task could not be started: " + err.Error()}
			return nil
		})
		if ferr != nil {
			p.cfg.Logger.Error().Err(ferr).Str("task", id).Msg("could not mark unstarted task failed")
		} else {
			p.finished(fctx, failed)
		}
		end(err)
		return failed, fmt.Errorf("%w: %w", ErrStart, err)
	}
	p.created(ctx, t)
	return t, nil
}

// created counts and logs t, a task just created.
func (p *Producer) created(ctx context.Context, t *taskstate.Task) {
	p.cfg.Telemetry.TaskCreated(t.Tool)
	ev := p.cfg.Logger.Info().Fields(telemetry.LogFields(ctx)).Str("task", t.ID).Str("tool", t.Tool).Str("principal", t.Owner).Int("attempt", 0).
		Str("era", string(t.Era)).Str("mode", string(t.Mode)).Str("status", string(t.Status))
	if nb := taskstate.NotBefore(t.Meta); !nb.IsZero() {
		ev = ev.Time("not_before", nb)
	}
	ev.Msg("task created")
}

// start publishes job, retrying for up to StartRetry (50 ms, 100 ms, … up
// to 1 s apart) while the caller waits; retried says it took more than one
// try.
func (p *Producer) start(ctx context.Context, job *broker.Job) (retried bool, err error) {
	giveUp := time.Now().Add(p.cfg.StartRetry)
	wait := 50 * time.Millisecond
	for try := 0; ; try++ {
		err := p.exec.Start(ctx, job)
		if err == nil || ctx.Err() != nil || time.Now().Add(wait).After(giveUp) {
			return try > 0, err
		}
		p.cfg.Logger.Warn().Err(err).Str("task", job.TaskID).Dur("retry_in", wait).Msg("job publish failed; retrying")
		select {
		case <-ctx.Done():
			return true, err
		case <-time.After(wait):
		}
		wait = min(2*wait, time.Second)
	}
}

// Resume publishes the job of t, a task whose last input answer just
// arrived while it was parked (the caller cleared Parked and bumped
// Requeues in the same write, so the job's dedupe key is new and two
// replicas never both resume it). A publish that fails is left to the
// reaper: the record is working and unheld, so its job is republished
// after PublishGrace.
func (p *Producer) Resume(ctx context.Context, t *taskstate.Task) error {
	if _, err := p.start(ctx, JobFor(t)); err != nil {
		p.cfg.Logger.Warn().Err(err).Str("task", t.ID).Msg("resuming a parked task: job publish failed; the reaper republishes it")
		return fmt.Errorf("producer: resume %s: %w", t.ID, err)
	}
	p.cfg.Logger.Info().Str("task", t.ID).Str("tool", t.Tool).Str("principal", t.Owner).Int("requeues", t.Requeues).Msg("client input complete; parked task resumed")
	return nil
}

// putArgs keeps arguments larger than taskstate.InlineMax in a blob of the
// task (when the store keeps blobs), returning what the record holds.
func (p *Producer) putArgs(ctx context.Context, id, name string, args json.RawMessage) (json.RawMessage, *taskstate.BlobRef, error) {
	blobs, ok := p.store.(taskstate.Blobs)
	if !ok || len(args) <= taskstate.InlineMax {
		return args, nil, nil
	}
	key := taskstate.BlobKey(id, name)
	n, err := blobs.PutBlob(ctx, key, bytes.NewReader(args), 0)
	if err != nil {
		return nil, nil, fmt.Errorf("producer: storing the arguments: %w", err)
	}
	return nil, &taskstate.BlobRef{Key: key, Size: n}, nil
}

// dropLostArgs removes the arguments' blob a keyed call stored before it
// lost the race for its task's record, unless the winner's record uses the
// same blob (the same call: same digest, same name).
func (p *Producer) dropLostArgs(ctx context.Context, key string) {
	t, err := p.store.Get(ctx, strings.SplitN(key, "/", 2)[0])
	if err == nil && t.ArgumentsRef != nil && t.ArgumentsRef.Key == key {
		return
	}
	if err := p.store.(taskstate.Blobs).DeleteBlob(ctx, key); err != nil {
		p.cfg.Logger.Warn().Err(err).Str("blob", key).Msg("removing the arguments of a call that found its task already created")
	}
}

// finished counts t, which ended here (failed or cancelled, not by a
// worker), and drops its arguments.
func (p *Producer) finished(ctx context.Context, t *taskstate.Task) {
	p.cfg.Telemetry.TaskFinished(ctx, t.Tool, string(t.Status))
	DropArgs(ctx, p.store, t, p.cfg.Logger)
}

// DropArgs removes the blob of an ended task's arguments
// (taskstate.DropArgs), logging a failure.
func DropArgs(ctx context.Context, store taskstate.Store, t *taskstate.Task, log zerolog.Logger) {
	if err := taskstate.DropArgs(ctx, store, t); err != nil {
		log.Warn().Err(err).Str("task", t.ID).Msg("removing the blob of an ended task's arguments")
	}
}

// JobFor is the job that runs t; after a requeue it carries the requeue's
// dedupe key (Task.JobKey).
func JobFor(t *taskstate.Task) *broker.Job {
	j := &broker.Job{TaskID: t.ID, Kind: t.Kind, Tool: t.Tool, Arguments: t.Arguments, Owner: t.Owner, Meta: t.Meta}
	if t.ArgumentsRef != nil {
		j.ArgumentsRef = t.ArgumentsRef.Key
	}
	if t.Requeues > 0 {
		j.Dedupe = t.JobKey()
	}
	j.NotBefore = taskstate.NotBefore(t.Meta) // a scheduled call: schedule.go
	return j
}

// withRecord makes job carry t, the record just created (Job.Record), so
// a worker of a queue that withdraws cancelled tasks' jobs starts from it
// without reading it. A record that does not encode leaves job as it is.
func withRecord(job *broker.Job, t *taskstate.Task) *broker.Job {
	if t.Revision == 0 {
		return job // a store without revisions
	}
	b, err := taskstate.Encode(t)
	if err != nil {
		return job
	}
	job.Record, job.Revision = b, t.Revision
	return job
}

// Withdraws reports whether the queue withdraws a cancelled task's jobs
// (broker.Withdrawer): a new task's job then carries its record.
func (e QueueExecutor) Withdraws() bool {
	_, ok := e.Queue.(broker.Withdrawer)
	return ok
}

// Withdraw implements broker.Withdrawer when the queue is one, and does
// nothing otherwise (its workers read the record before they run a job).
func (e QueueExecutor) Withdraw(ctx context.Context, route, taskID string) error {
	if w, ok := e.Queue.(broker.Withdrawer); ok {
		return w.Withdraw(ctx, route, taskID)
	}
	return nil
}

// Holds implements broker.Holder when the queue is one.
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
		t.Parked = nil
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
	p.unschedule(ctx, t) // schedule.go
	if w, ok := p.exec.(broker.Withdrawer); ok {
		// A job still queued must not start: its worker would run it from
		// the record it carries, written before the cancel.
		if err := w.Withdraw(ctx, taskstate.CatalogKey(t.Kind, t.Tool), id); err != nil {
			p.cfg.Logger.Warn().Err(err).Str("task", id).Msg("withdrawing the cancelled task's job failed; a run that starts from it ends at its first write")
		}
	}
	p.finished(ctx, t)
	p.cfg.Logger.Info().Fields(telemetry.LogFields(ctx)).Str("task", id).Str("tool", t.Tool).Str("principal", t.Owner).Int("attempt", t.Attempt).
		Dur("took", t.LastUpdatedAt.Sub(t.CreatedAt)).Str("status", string(t.Status)).Msg("task cancelled")
	return t, nil
}

// ErrTerminal is returned when cancelling a task that already ended.
var ErrTerminal = errors.New("producer: task already terminal")
