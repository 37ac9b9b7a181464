package consumer

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"os"
	"runtime/debug"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/mcpqueue/mcpqueue/auth"
	"github.com/mcpqueue/mcpqueue/backend"
	"github.com/mcpqueue/mcpqueue/broker"
	"github.com/mcpqueue/mcpqueue/internal/slogzero"
	"github.com/mcpqueue/mcpqueue/taskstate"
	"github.com/mcpqueue/mcpqueue/telemetry"
	"github.com/mcpqueue/mcpqueue/vocab"
)

// Config tunes a Worker. A nil Config is valid; zero fields take defaults.
type Config struct {
	// Concurrency is how many handlers run at once. Default 4.
	Concurrency int
	// Lease is how long a job stays with this worker without renewal; the
	// worker renews it every Lease/3 while a handler runs. A crashed worker's
	// job is redelivered after at most Lease. Default 30s.
	Lease time.Duration
	// MaxAttempts bounds how often a task runs (crashes, lost leases). After
	// that the task is marked failed. Default 3.
	MaxAttempts int
	// Timeout bounds a handler whose Tool sets none. Default 10m.
	Timeout time.Duration
	// InputTimeout bounds how long a task waits for the client to answer its
	// input requests, parked or not, for tools that set none; Ask then
	// returns ErrInputTimeout, which fails the task unless the handler
	// recovers (a parked task is failed by the api's reaper). Default 30m.
	InputTimeout time.Duration
	// ParkAfter is how long a run waits for its client's answers before it
	// parks, for tools that set none (Tool.ParkAfter). Default 3s;
	// negative never parks.
	ParkAfter time.Duration
	// TenantShare is the share of Concurrency the principals of one tenant
	// (auth.TenantKey of a task's owner; owners without a tenant form one
	// tenant) may hold together, and PrincipalShare the share of its
	// tenant's slots one principal may hold; tasks without an owner are
	// not counted. Past either, the worker defers the principal's next job
	// for a second, so the slots left go to the jobs of others behind it in
	// the queue. Every worker of a pool applies them, so they hold for the
	// pool. A share below 1 rounds up but never reaches every slot: a
	// tenant leaves at least one of the worker's slots to other tenants,
	// and a principal one of its tenant's to the tenant's other
	// principals. Defaults: TenantShare 0.75, PrincipalShare 0.25 (on 4
	// slots: 3 per tenant, 1 per principal, so two principals of one
	// tenant leave a slot to a third of theirs and one to another tenant);
	// 1 or more: no share at that level.
	TenantShare    float64
	PrincipalShare float64
	// MaxResult bounds a task's result in bytes (as JSON): a larger one
	// fails the task at once, saying so. Default 64 MiB (DefaultMaxResult).
	MaxResult int64
	// MaxWaitingInput bounds the tasks one principal may have parked
	// waiting for input; a task that would park past it fails with an
	// error saying so (tasks without an owner are not counted). Default
	// 100; negative: no bound.
	MaxWaitingInput int
	// ShutdownGrace is how long Run waits for running handlers after its ctx
	// ends before cancelling them and returning their jobs. Default 25s.
	ShutdownGrace time.Duration
	// Heartbeat is how often the catalog entries are refreshed. Default 10s
	// (entries expire after the catalog's TTL without it).
	Heartbeat time.Duration
	// RateLimits are rate limits by catalog key (a tool's name,
	// "prompt/<name>") over those the tools set (Tool.RateLimit): a
	// worker's --tool-rate-limit, for tools it relays or does not own.
	RateLimits map[string]Rate
	// Pool is the pool this worker belongs to (a plain name; default
	// broker.DefaultPool): its catalog entries name it, and a queue with
	// one queue per pool (Asynq) sends their jobs to that pool's queue,
	// the one this worker takes jobs from.
	Pool string
	// ID names this worker on leases and in logs. Default hostname-pid.
	ID string
	// Logger gets the worker's log lines; Slog, when set, instead (each
	// line one slog record). Default: none.
	Logger zerolog.Logger
	Slog   *slog.Logger
	Now    func() time.Time

	// Telemetry records runs, outcomes and input waits and traces each run
	// (nil: none).
	Telemetry *telemetry.Telemetry
}

// Worker pulls jobs and runs them with a Mux's handlers.
type Worker struct {
	queue   broker.Queue
	store   taskstate.Store
	catalog taskstate.Catalog
	bus     broker.Bus
	cfg     Config
	log     zerolog.Logger

	mu      sync.Mutex
	running map[string]context.CancelCauseFunc
	owners  map[string]int // jobs running here per principal
	tenants map[string]int // and per tenant (auth.TenantKey)
	// rateHolds counts, by tool, the jobs waiting in their slots for the
	// tool's rate limit (rate.go).
	rateHolds map[string]int
	ready     chan struct{}
}

// Ready is closed once Run has published the tools and is pulling jobs.
func (w *Worker) Ready() <-chan struct{} { return w.ready }

// New returns a worker on b's seams; b.Catalog may be nil (tools are then
// not published). The worker never closes b.
func New(b backend.Backend, cfg *Config) *Worker {
	var c Config
	if cfg != nil {
		c = *cfg
	}
	if c.Concurrency <= 0 {
		c.Concurrency = 4
	}
	if c.Lease <= 0 {
		c.Lease = 30 * time.Second
	}
	if c.MaxAttempts <= 0 {
		c.MaxAttempts = 3
	}
	if c.Timeout <= 0 {
		c.Timeout = 10 * time.Minute
	}
	if c.InputTimeout <= 0 {
		c.InputTimeout = 30 * time.Minute
	}
	if c.ParkAfter == 0 {
		c.ParkAfter = 3 * time.Second
	}
	if c.MaxWaitingInput == 0 {
		c.MaxWaitingInput = 100
	}
	if c.TenantShare <= 0 {
		c.TenantShare = 0.75
	}
	if c.PrincipalShare <= 0 {
		c.PrincipalShare = 0.25
	}
	if c.MaxResult <= 0 {
		c.MaxResult = DefaultMaxResult
	}
	if c.ShutdownGrace <= 0 {
		c.ShutdownGrace = 25 * time.Second
	}
	if c.Heartbeat <= 0 {
		c.Heartbeat = 10 * time.Second
	}
	c.Pool = cmp.Or(c.Pool, broker.DefaultPool)
	if c.ID == "" {
		host, _ := os.Hostname()
		c.ID = fmt.Sprintf("%s-%d", host, os.Getpid())
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	return &Worker{
		queue: b.Queue, store: b.Store, catalog: b.Catalog, bus: b.Bus, cfg: c,
		log:     slogzero.Logger(c.Logger, c.Slog).With().Str("worker", c.ID).Logger(),
		running: map[string]context.CancelCauseFunc{},
		owners:  map[string]int{},
		tenants: map[string]int{},
		ready:   make(chan struct{}),

		rateHolds: map[string]int{},
	}
}

// Causes of a handler's context ending, told apart with context.Cause.
var (
	ErrTaskCancelled = errors.New("consumer: task cancelled")
	ErrShutdown      = errors.New("consumer: worker shutting down")
	errTimeout       = errors.New("consumer: tool timed out")
	errExhausted     = errors.New("consumer: attempts exhausted")
	errLeaseHeld     = errors.New("consumer: another worker holds the task's lease")
	errWaiting       = errors.New("consumer: the task is parked, waiting for client input")
	errNoRepeat      = errors.New("consumer: an earlier run did not finish and the tool is not safe to repeat")
)

// Run publishes mux's tools, pulls jobs with Concurrency slots and runs them
// until ctx ends; then it stops pulling, gives running handlers
// ShutdownGrace to finish, cancels the rest and returns their jobs to the
// queue. It returns after all of that.
func (w *Worker) Run(ctx context.Context, mux *Mux) error {
	if len(keysOf(mux)) == 0 {
		return errors.New("consumer: mux has no tools")
	}
	// A start cut short by ctx's end is a stop, not a failure.
	started := func(err error) error {
		if err != nil && ctx.Err() != nil {
			return nil
		}
		return err
	}
	if err := w.checkRates(mux); err != nil { // feature: rate limits per tool
		return err
	}
	f, err := w.newFeed(ctx, mux) // a consumer of the tools' routes (feed.go)
	if err != nil {
		return started(err)
	}
	sub, err := w.bus.Subscribe(ctx, broker.TopicCancel, "", func(id string, _ []byte) {
		w.cancelRunning(id, ErrTaskCancelled)
	})
	if err != nil {
		return started(err)
	}
	defer sub.Close()
	if err := w.publishTools(ctx, mux); err != nil {
		return started(err)
	}
	mux.updates.set(w.bus) // Mux.ResourceUpdated works from here on
	defer mux.updates.set(nil)

	// Handlers run under base, which outlives ctx by the shutdown grace.
	base, stopHandlers := context.WithCancelCause(context.WithoutCancel(ctx))
	defer stopHandlers(ErrShutdown)

	var bg sync.WaitGroup
	bg.Add(2)
	go func() { defer bg.Done(); w.heartbeat(ctx, mux) }()
	go func() { defer bg.Done(); f.follow(ctx) }() // the Mux's changes (Replace)

	var slots sync.WaitGroup
	for range w.cfg.Concurrency {
		slots.Add(1)
		go func() {
			defer slots.Done()
			for {
				d, settled, err := f.next(ctx)
				if err != nil {
					if ctx.Err() == nil {
						w.log.Error().Err(err).Msg("consumer stopped")
					}
					return
				}
				w.process(base, mux, d)
				settled()
			}
		}()
	}
	close(w.ready)
	w.log.Info().Int("concurrency", w.cfg.Concurrency).Int("tools", len(keysOf(mux))).Msg("worker running")
	<-ctx.Done()
	w.log.Info().Dur("grace", w.cfg.ShutdownGrace).Msg("draining")

	done := make(chan struct{})
	go func() { slots.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(w.cfg.ShutdownGrace):
		w.log.Warn().Msg("grace period over; returning unfinished jobs to the queue")
		stopHandlers(ErrShutdown)
		<-done
	}
	bg.Wait()
	w.log.Info().Msg("worker stopped")
	return nil
}

// lease, attempts, parkAfter and inputTimeout are a tool's own settings,
// else the worker's.
func (w *Worker) parkAfter(e *entry) time.Duration { return cmp.Or(e.parkAfter, w.cfg.ParkAfter) }
func (w *Worker) inputTimeout(e *entry) time.Duration {
	return cmp.Or(e.inputTimeout, w.cfg.InputTimeout)
}
func (w *Worker) lease(e *entry) time.Duration { return cmp.Or(e.lease, w.cfg.Lease) }
func (w *Worker) attempts(e *entry) int        { return cmp.Or(e.maxAttempts, w.cfg.MaxAttempts) }

// maxDeliveries is unbounded: attempts are counted on the record (real
// handler starts), and jobs deferred for fair share come back as often as
// they must. A job that cannot even be read is dropped by the broker.
func (w *Worker) maxDeliveries(*entry) int { return -1 }

// fairDelay is how long a job over its principal's or its tenant's share
// waits before it is handed out again.
const fairDelay = time.Second

// shareOf is how many of n slots a share of them is: all for 1 or more,
// else the share rounded up, at least one and, of two or more, never all.
func shareOf(share float64, n int) int {
	if share >= 1 {
		return n
	}
	return max(1, min(n-1, int(math.Ceil(share*float64(n)))))
}

// tenantSlots and principalSlots are how many of this worker's slots one
// tenant and one principal may hold.
func (w *Worker) tenantSlots() int { return shareOf(w.cfg.TenantShare, w.cfg.Concurrency) }
func (w *Worker) principalSlots() int {
	return shareOf(w.cfg.PrincipalShare, w.tenantSlots())
}

// Levels of the fair share a job may be deferred at (reserve).
const (
	levelTenant    = "tenant"
	levelPrincipal = "principal"
)

// reserve counts a job of owner as running here, unless owner already
// holds its share or its tenant holds the tenant's; then it says which
// ("principal" or "tenant"). release gives the place back.
func (w *Worker) reserve(owner string) (ok bool, level string) {
	if owner == "" {
		return true, ""
	}
	tenant := auth.TenantKey(owner)
	w.mu.Lock()
	defer w.mu.Unlock()
	switch {
	case w.owners[owner] >= w.principalSlots():
		return false, levelPrincipal
	case w.tenants[tenant] >= w.tenantSlots():
		return false, levelTenant
	}
	w.owners[owner]++
	w.tenants[tenant]++
	return true, ""
}

func (w *Worker) release(owner string) {
	if owner == "" {
		return
	}
	tenant := auth.TenantKey(owner)
	w.mu.Lock()
	if w.owners[owner]--; w.owners[owner] <= 0 {
		delete(w.owners, owner)
	}
	if w.tenants[tenant]--; w.tenants[tenant] <= 0 {
		delete(w.tenants, tenant)
	}
	w.mu.Unlock()
}

func (w *Worker) publishTools(ctx context.Context, mux *Mux) error {
	if w.catalog == nil {
		return nil
	}
	// An entry outlives its workers (the catalog's retention); LiveUntil
	// says whether one serves it now. It moves on a grid of two
	// heartbeats, so every worker of a tool publishes the same entry and
	// the entry changes once per step, not once per heartbeat of each
	// worker (a change is what a catalog announces to every api): a tool
	// whose last worker is gone stops being live two to four heartbeats
	// later.
	step := 2 * w.cfg.Heartbeat
	live := w.cfg.Now().Truncate(step).Add(2 * step).UTC()
	for _, t := range mux.Tools() {
		t.LiveUntil, t.Pool = live, w.cfg.Pool
		w.publishRate(mux, &t) // feature: rate limits per tool
		if err := w.catalog.PublishTool(ctx, &t); err != nil {
			return err
		}
	}
	return nil
}

func (w *Worker) heartbeat(ctx context.Context, mux *Mux) {
	tick := time.NewTicker(w.cfg.Heartbeat)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
			if err := w.publishTools(ctx, mux); err != nil && ctx.Err() == nil {
				w.log.Warn().Err(err).Msg("catalog refresh failed")
			}
		}
	}
}

// register notes that this worker runs task id; false if it already does
// (a duplicate job: a requeue racing the original delivery).
func (w *Worker) register(id string, cancel context.CancelCauseFunc) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if _, dup := w.running[id]; dup {
		return false
	}
	w.running[id] = cancel
	return true
}

func (w *Worker) unregister(id string) {
	w.mu.Lock()
	delete(w.running, id)
	w.mu.Unlock()
}

func (w *Worker) cancelRunning(id string, cause error) {
	w.mu.Lock()
	cancel := w.running[id]
	w.mu.Unlock()
	if cancel != nil {
		cancel(cause)
	}
}

// process runs one delivery to its end: a terminal record and an ack, a
// retry, or (on shutdown) the job handed back. It goes admit → take → run →
// finish; each step that ends the delivery itself says so.
func (w *Worker) process(base context.Context, mux *Mux, d broker.Delivery) {
	job := d.Job()
	carried := carriedRecord(job)
	base, endRun := w.cfg.Telemetry.StartRun(base, job.TaskID, job.Kind, job.Tool, d.Delivered(), job.Meta) // every write below is in this span
	defer endRun()
	r := &delivery{
		d: d, job: job, mux: mux, base: base,
		// Broker and store calls use an uncancelled ctx so that
		// bookkeeping finishes even while shutting down.
		io:      context.WithoutCancel(base),
		log:     w.log.With().Fields(telemetry.LogFields(base)).Str("task", job.TaskID).Str("tool", job.Tool).Str("principal", job.Owner).Int("delivery", d.Delivered()).Logger(),
		carried: carried,
	}
	if w.early(r) { // a scheduled job before its time: schedule.go
		return
	}
	release, ok := w.admit(r)
	if !ok {
		return
	}
	defer release()
	if !w.take(r) {
		return
	}
	out, ok := w.run(r)
	if !ok {
		return
	}
	w.conclude(r, out.res, out.err, out.took)
}

// delivery is one delivery's state as process goes through it.
type delivery struct {
	d    broker.Delivery
	job  *broker.Job
	mux  *Mux
	base context.Context // the run's span
	io   context.Context // base without its cancellation: bookkeeping
	log  zerolog.Logger

	carried *taskstate.Task // the record the job carries (Job.Record), if any

	// admit
	e      *entry
	lease  time.Duration
	tctx   context.Context // base, ended by a cancel or a lost lease
	cancel context.CancelCauseFunc
	// take
	cs       *callState
	rec      *taskstate.Task // the record as the take left it
	attempt  int
	attempts int
	rateWait string // the statusMessage of a wait for the tool's rate limit (rate.go)
}

// admit finds the handler, holds the principal's share of the slots and
// registers the run for cancellation; false: the delivery was handed back.
// release undoes what admit held.
func (w *Worker) admit(r *delivery) (release func(), ok bool) {
	job, d, io, log := r.job, r.d, r.io, r.log
	r.e = r.mux.lookup(taskstate.CatalogKey(job.Kind, job.Tool))
	if r.e == nil {
		// Jobs are routed by tool, so this is a guard, not a path: a job
		// published where this worker's tools go.
		log.Warn().Msg("this worker has no handler for the tool; handing the job back")
		_ = d.Retry(io, backoff(d.Delivered()))
		return nil, false
	}
	r.lease = w.lease(r.e)
	if ok, level := w.reserve(job.Owner); !ok {
		// The principal, or its tenant, holds its share of this worker's
		// slots: the job waits a moment so the next one, maybe another
		// principal's, gets the slot. Not an attempt, not a failure.
		log.Debug().Str("level", level).Int("tenant_slots", w.tenantSlots()).Int("principal_slots", w.principalSlots()).Msg("share of the slots held; deferring the job")
		w.cfg.Telemetry.FairShareDeferred(job.Tool, level)
		deferJob(io, d, fairDelay)
		return nil, false
	}
	r.tctx, r.cancel = context.WithCancelCause(r.base)
	// Register before reading the record: a cancel either is already on the
	// record or reaches this entry through the broadcast.
	if !w.register(job.TaskID, r.cancel) {
		log.Debug().Msg("task already running here (duplicate job); retrying it after a lease")
		_ = d.Retry(io, r.lease)
		r.cancel(nil)
		w.release(job.Owner)
		return nil, false
	}
	return func() {
		w.unregister(job.TaskID)
		r.cancel(nil)
		w.release(job.Owner)
	}, true
}

// carriedRecord decodes the record job carries (Job.Record), filling in
// the arguments and meta the job then leaves out; nil when it carries
// none, or one that does not decode (the worker reads the record).
func carriedRecord(job *broker.Job) *taskstate.Task {
	if job.Record == nil {
		return nil
	}
	t, err := taskstate.Decode(job.Record, job.Revision)
	if err != nil || t.ID != job.TaskID {
		return nil
	}
	if job.Arguments == nil {
		job.Arguments = t.Arguments
	}
	if job.Meta == nil {
		job.Meta = t.Meta
	}
	return t
}

// record is the task's record as the run starts from it: on the first
// delivery of a task's first job from a queue that withdraws a cancelled
// task's jobs (broker.Withdrawer), the one the job carries, without a
// read — a cancel before the pickup withdrew the job, and any other write
// since the create fails the run's first compare-and-set, which then
// reads the record; else the stored one.
func (w *Worker) record(r *delivery) (*taskstate.Task, error) {
	if _, withdraws := w.queue.(broker.Withdrawer); withdraws && r.carried != nil && r.d.Delivered() == 1 && r.job.Dedupe == "" {
		return r.carried, nil
	}
	t, err := w.store.Get(r.io, r.job.TaskID)
	if err == nil && r.job.Record != nil && r.carried == nil {
		// The job's record did not decode, and a queue may have sent it
		// in place of the arguments and meta.
		r.job.Arguments, r.job.Meta = t.Arguments, t.Meta
	}
	return t, err
}

// take reads the record and takes the task for this run (or defers the
// take to the run's first write: lazy take); false: the delivery ended
// here (acked, retried, failed or dropped, as the record says).
func (w *Worker) take(r *delivery) bool {
	job, d, io, log, e := r.job, r.d, r.io, r.log, r.e
	rec, err := w.record(r)
	switch {
	case errors.Is(err, taskstate.ErrNotFound):
		log.Warn().Msg("job has no task record (expired or never created); dropping it")
		_ = d.Term(io, "no task record")
		return false
	case err != nil:
		log.Error().Err(err).Msg("reading task record; retrying job")
		_ = d.Retry(io, backoff(d.Delivered()))
		return false
	case rec.Status.Terminal():
		log.Debug().Str("status", string(rec.Status)).Msg("task already terminal; acking job")
		_ = d.Ack(io)
		return false
	}

	cs, ok := w.newCallState(r, rec)
	if !ok {
		return false
	}

	// Take the task: count the attempt and hold the lease, both on the
	// record, unless another worker's lease is still live there: then this
	// is a duplicate job (a requeue, or a redelivery racing the holder's
	// renewal) and it comes back once that lease would have lapsed. Each
	// take bumps the attempt, and the attempt fences every later write, so
	// of two runs only the newest can write. A tool not safe to repeat
	// (Redeliver) is not taken after a run that did not finish, unless
	// that run kept a checkpoint to go on from.
	var held *taskstate.Lease
	var lost int // the attempt that did not finish
	attempts := w.attempts(e)
	take := func(t *taskstate.Task) error {
		if l := t.Lease; l != nil && l.Worker != w.cfg.ID && l.Expires.After(w.cfg.Now()) {
			held = l
			return errLeaseHeld
		}
		if t.Parked != nil {
			return errWaiting
		}
		if e.noRepeat != "" && unfinished(t) && len(t.Checkpoint) == 0 {
			lost = t.Attempt
			return errNoRepeat
		}
		if t.Runs() >= attempts {
			return errExhausted
		}
		t.Attempt++
		t.MaxAttempts = attempts
		t.Lease = &taskstate.Lease{Worker: w.cfg.ID, Expires: w.cfg.Now().Add(r.lease).UTC()}
		if t.StatusMessage == taskstate.AwaitingWorker(job.Tool) || t.StatusMessage == r.rateWait || taskstate.IsScheduledFor(t.StatusMessage) {
			t.StatusMessage = ""
		}
		return nil
	}
	if !w.rateGate(r, rec, take) { // feature: rate limits per tool (rate.go)
		return false
	}
	var attempt int
	_, redelivers := d.(broker.Redeliverer)
	if probe := rec.Clone(); redelivers && d.Delivered() == 1 && job.Dedupe == "" && e.noRepeat == "" && take(probe) == nil {
		// Lazy take: on the first delivery of a task's first job, which
		// no other run can hold, the take is not written on its own. The
		// run's first write carries it — for a task that ends within
		// lazyTake, its outcome: one write per task instead of two — and
		// a run still going after lazyTake writes it then. A crash before
		// that leaves no lease on the record, but the broker delivers the
		// job again after the lease (broker.Redeliverer; a broker without
		// that needs the record's lease, so its runs take first), and a
		// redelivery is no first delivery: it takes eagerly, and counts.
		// A tool not safe to repeat takes eagerly even so: a crash after
		// its handler started must show on the record.
		attempt = probe.Attempt
		cs.deferTake(attempt, take)
	} else {
		if rec, err = cs.mutate(io, take); err != nil {
			w.refuseTake(r, err, held, lost, attempts)
			return false
		}
		attempt = rec.Attempt
	}
	r.log = log.With().Int("attempt", attempt).Logger()
	r.rec, r.attempt, r.attempts = rec, attempt, attempts
	return true
}

// newCallState is the run's state on record rec, with the arguments read
// from their blob when the job names one instead of carrying them; false:
// they could not be read and the job is retried.
func (w *Worker) newCallState(r *delivery, rec *taskstate.Task) (*callState, bool) {
	job, e := r.job, r.e
	// cs tracks the version of the record this run last saw, so each write
	// starts from it and re-reads only if another writer came in between.
	cs := &callState{
		w: w, taskID: job.TaskID, tool: job.Tool, owner: job.Owner,
		args: job.Arguments, meta: job.Meta, mode: rec.Mode, rec: rec, trace: telemetry.LogFields(r.base),
		parkAfter: w.parkAfter(e), inputTimeout: w.inputTimeout(e),
	}
	r.cs = cs
	if cs.mode == "" {
		cs.mode = taskstate.ModeTask
	}
	if job.ArgumentsRef != "" {
		// Too large for the job: the arguments wait in a blob.
		args, err := w.readArgs(r.io, job.ArgumentsRef)
		if err != nil {
			r.log.Error().Err(err).Str("blob", job.ArgumentsRef).Msg("reading the task's arguments; retrying the job")
			_ = r.d.Retry(r.io, backoff(r.d.Delivered()))
			return nil, false
		}
		cs.args = args
	}
	return cs, true
}

// refuseTake ends a delivery whose take err refused: the attempts used up
// (failed), a tool not safe to repeat after a run that did not finish
// (failed), a parked task (dropped), another run's live lease held (retried
// after it), the task ended meanwhile (acked), or a failed write (retried).
func (w *Worker) refuseTake(r *delivery, err error, held *taskstate.Lease, lost, attempts int) {
	job, d, io, log, e, cs := r.job, r.d, r.io, r.log, r.e, r.cs
	switch {
	case errors.Is(err, errExhausted):
		msg := fmt.Sprintf("gave up after %d attempts: the worker running it was lost or the job kept failing", attempts)
		w.finish(io, log, cs, d, nil, &taskstate.RPCError{Code: vocab.CodeInternalError, Message: msg})
		_ = d.Term(io, msg)
	case errors.Is(err, errNoRepeat):
		msg := notRepeated(job.Tool, lost, "died", e.noRepeat)
		log.Warn().Int("lost_attempt", lost).Str("why", e.noRepeat).Msg("an earlier run did not finish and the tool is not safe to repeat; failing the task")
		w.settle(io, d, w.finish(io, log, cs, d, nil, &taskstate.RPCError{Code: vocab.CodeInternalError, Message: msg}))
	case errors.Is(err, errWaiting):
		// A stale job of a parked task: the last answer publishes a new one.
		log.Debug().Msg("task is parked waiting for client input; dropping the job")
		_ = d.Ack(io)
	case errors.Is(err, errLeaseHeld):
		wait := held.Expires.Sub(w.cfg.Now()) + r.lease/10
		log.Debug().Str("holder", held.Worker).Dur("retry_in", wait).Msg("another worker holds the task; retrying the job after its lease")
		_ = d.Retry(io, wait)
	case errors.Is(err, taskstate.ErrInvalidChange): // turned terminal meanwhile
		_ = d.Ack(io)
	default:
		log.Error().Err(err).Msg("taking the lease; retrying job")
		_ = d.Retry(io, backoff(d.Delivered()))
	}
}

// run runs the handler under the tool's timeout while the lease is kept;
// false: the delivery ended with the run (shutdown, cancel, fencing,
// parking), else its outcome goes to conclude.
func (w *Worker) run(r *delivery) (runOutcome, bool) {
	var res json.RawMessage
	var herr error
	var took time.Duration
	job, d, io, log, e, cs, attempt := r.job, r.d, r.io, r.log, r.e, r.cs, r.attempt
	timeout := e.timeout
	if timeout <= 0 {
		timeout = w.cfg.Timeout
	}
	hctx, stop := context.WithTimeoutCause(r.tctx, timeout, errTimeout)
	defer stop()
	cs.runBound = timeout

	cs.attempt = attempt
	cs.lost = func(cause error) { r.cancel(cause) }
	keeper := w.keepLease(io, hctx, d, cs, r.lease, log)
	stopTake := cs.takeLater(io, lazyTake)
	started := w.cfg.Now()
	w.cfg.Telemetry.TaskStarted(job.Tool, attempt, started.Sub(r.rec.CreatedAt))
	log.Info().Dur("queued", started.Sub(r.rec.CreatedAt)).Str("started", started.UTC().Format(time.RFC3339Nano)).Msg("task running")
	if raw, ok := job.Meta[vocab.MetaInputResponses]; ok {
		_ = json.Unmarshal(raw, &cs.answers)
	}
	res, herr = w.call(hctx, r.mux, e, cs)
	stopTake()
	keeper()
	took = w.cfg.Now().Sub(started)
	w.cfg.Telemetry.TaskRan(job.Tool, took)

	switch cause := context.Cause(hctx); {
	case errors.Is(cause, ErrShutdown) && herr != nil && !w.repeatable(e, cs, herr):
		// Cut short, and not safe to run again: the task ends here, as it
		// would at the next take.
		log.Warn().Str("why", e.noRepeat).Msg("shutdown interrupted a tool that is not safe to repeat; failing the task")
		herr = &ProtocolError{Code: vocab.CodeInternalError, Message: notRepeated(job.Tool, attempt, "shut down before it finished", e.noRepeat)}
		res = nil
	case errors.Is(cause, ErrShutdown) && (herr != nil || e.noRepeat == ""):
		// Not the task's fault: this run does not count as an attempt.
		log.Info().Msg("shutdown interrupted the task; returning the job to the queue")
		if !cs.takePending() { // else nothing was written
			_, _ = cs.mutate(io, func(t *taskstate.Task) error {
				t.Attempt--
				t.Lease = nil
				return nil
			})
		}
		_ = d.Retry(io, 0)
		return runOutcome{}, false
	case errors.Is(cause, ErrTaskCancelled):
		log.Info().Dur("took", took).Msg("task cancelled while running")
		_ = d.Ack(io)
		return runOutcome{}, false
	case errors.Is(cause, ErrFenced):
		// The job may be the one the new holder runs (a redelivery): it is
		// not this run's to settle. Left alone, the broker hands it out
		// again after the lease, and that delivery finds the task held or
		// finished.
		log.Warn().Dur("took", took).Msg("lease lost to another run; outcome discarded, job left to the broker")
		return runOutcome{}, false
	case errors.Is(cause, errTimeout):
		herr = &ProtocolError{Code: vocab.CodeInternalError, Message: fmt.Sprintf("tool %q timed out after %s", job.Tool, timeout)}
		res = nil
	case cs.isParked():
		// The task waits for its client with no run: whatever the handler
		// returned after Ask said so is not an outcome. The last answer
		// publishes the job again.
		log.Info().Dur("took", took).Msg("parked: waiting for client input without a worker slot")
		_ = d.Ack(io)
		return runOutcome{}, false
	}
	return runOutcome{res: res, err: herr, took: took}, true
}

// runOutcome is what a run of the handler came to: its result or error,
// and how long it took.
type runOutcome struct {
	res  json.RawMessage
	err  error
	took time.Duration
}

// conclude writes a run's outcome (or a retry, or the input a sync run
// still needs) and settles the job accordingly.
func (w *Worker) conclude(r *delivery, res json.RawMessage, herr error, took time.Duration) {
	job, d, io, log, cs := r.job, r.d, r.io, r.log, r.cs
	var retried bool
	if retried, herr = w.retry(io, log, cs, d, herr, r.attempts); retried { // Retryable (retry.go)
		return
	}

	var rpcErr *taskstate.RPCError
	result := res
	if need, ok := cs.inputOutcome(); ok {
		// A sync run that needs answers ends here; the client retries with them.
		herr, result = nil, need
	}
	if herr != nil {
		result = nil
		if te, ok := asToolError(herr); ok && job.Kind == taskstate.KindTool {
			result, _ = json.Marshal(&Result{Content: []Content{Text(te.Error())}, IsError: true})
		} else {
			rpcErr = toRPCError(herr)
		}
	}
	if f := w.finish(io, log.With().Dur("took", took).Logger(), cs, d, result, rpcErr); f == finishDone {
		cs.endNotifications(io)
		_ = d.Ack(io)
	} else {
		w.settle(io, d, f) // a retry, or another run owns the task and maybe this very job
	}
}

// settle does with the job what finish's result says: ack it, run it
// again, or leave it to the run that took the task over.
func (w *Worker) settle(io context.Context, d broker.Delivery, f finishResult) {
	switch f {
	case finishRetry:
		_ = d.Retry(io, backoff(d.Delivered()))
	case finishFenced:
	default:
		_ = d.Ack(io)
	}
}

// repeatable reports whether a run of e that ended with herr, cut short,
// may run again: the tool is safe to repeat, its handler checkpointed, or
// it returned a Retryable error (it chose to run again).
func (w *Worker) repeatable(e *entry, cs *callState, herr error) bool {
	var re *RetryableError
	return e.noRepeat == "" || cs.checkpointed() || errors.As(herr, &re)
}

// What finish did with an outcome, and so what becomes of the job.
type finishResult int

const (
	finishDone   finishResult = iota // written, or the task had ended already: ack
	finishRetry                      // the write failed: run the job again
	finishFenced                     // another run holds the task: leave the job
)

// call runs the handler through mux's middleware (Use), turning a panic
// into a failure.
func (w *Worker) call(ctx context.Context, mux *Mux, e *entry, cs *callState) (res json.RawMessage, err error) {
	defer func() {
		if p := recover(); p != nil {
			w.log.Error().Str("task", cs.taskID).Interface("panic", p).Bytes("stack", debug.Stack()).Msg("handler panicked")
			res, err = nil, &ProtocolError{Code: vocab.CodeInternalError, Message: fmt.Sprintf("tool %q panicked: %v", cs.tool, p)}
		}
	}()
	return wrap(e.info.Kind, mux.middleware(), e.run)(ctx, cs)
}

// finish writes the outcome unless the task already ended (a cancel won)
// or another run took it over. A result larger than taskstate.InlineMax goes
// to a blob first (when the store keeps blobs); one larger than MaxResult,
// or an outcome the store refuses as too large, becomes a failed outcome
// saying so: writing it again could never work, and running the handler
// again must not be the answer. A write that fails otherwise (the store
// unreachable) is tried again, with the delivery extended, for up to half
// the lease before the job is given back.
func (w *Worker) finish(ctx context.Context, log zerolog.Logger, cs *callState, d broker.Delivery, result json.RawMessage, rpcErr *taskstate.RPCError) finishResult {
	if rpcErr == nil && int64(len(result)) > w.cfg.MaxResult {
		rpcErr = &taskstate.RPCError{Code: vocab.CodeInternalError, Message: fmt.Sprintf(
			"the result of tool %q is %d bytes, over the limit of %d bytes (--max-result)", cs.tool, len(result), w.cfg.MaxResult)}
		result = nil
	}
	giveUp := w.cfg.Now().Add(w.cfg.Lease / 2)
	wait := 100 * time.Millisecond
	var ref *taskstate.BlobRef
	for {
		var err error
		if rpcErr == nil && ref == nil {
			ref, err = w.putResult(ctx, cs, result)
		}
		var t *taskstate.Task
		if err == nil {
			t, err = cs.mutate(ctx, func(t *taskstate.Task) error {
				if t.Status.Terminal() {
					return taskstate.ErrSkip
				}
				t.Lease = nil
				t.InputRequests = nil
				t.Parked = nil
				if rpcErr != nil {
					t.Status = taskstate.Failed
					t.Error = rpcErr
					t.StatusMessage = rpcErr.Message
					t.Result, t.ResultRef = nil, nil
					return nil
				}
				t.Status = taskstate.Completed
				if ref != nil {
					t.Result, t.ResultRef = nil, ref
				} else {
					t.Result, t.ResultRef = result, nil
				}
				return nil
			})
		}
		switch {
		case errors.Is(err, ErrFenced):
			log.Warn().Int("holder_attempt", t.Attempt).Msg("another run took the task over; outcome discarded")
			return finishFenced
		case errors.Is(err, taskstate.ErrSkip), errors.Is(err, taskstate.ErrInvalidChange):
			log.Info().Str("status", string(t.Status)).Msg("task already ended; outcome discarded")
			return finishDone
		case errors.Is(err, taskstate.ErrNotFound):
			log.Warn().Msg("task record vanished before its outcome was written")
			return finishDone
		case errors.Is(err, taskstate.ErrTooLarge) && rpcErr == nil:
			log.Error().Err(err).Msg("the outcome is too large for the store; failing the task instead")
			rpcErr = &taskstate.RPCError{Code: vocab.CodeInternalError, Message: fmt.Sprintf("the outcome of tool %q could not be stored: %v", cs.tool, err)}
			continue
		case err != nil:
			if w.cfg.Now().Add(wait).After(giveUp) {
				log.Error().Err(err).Msg("writing outcome failed; giving the job back")
				return finishRetry
			}
			log.Warn().Err(err).Dur("retry_in", wait).Msg("writing outcome failed; trying again")
			_ = d.Extend(ctx)
			time.Sleep(wait)
			wait = min(2*wait, 2*time.Second)
			continue
		}
		w.cfg.Telemetry.TaskFinished(ctx, cs.tool, string(t.Status))
		log.Info().Str("status", string(t.Status)).Msg("task finished")
		if err := taskstate.DropArgs(ctx, w.store, t); err != nil {
			log.Warn().Err(err).Msg("removing the blob of the task's arguments")
		}
		return finishDone
	}
}

// keepLease renews the broker lease every Lease/3 and the record's lease
// with it, until the returned stop is called.
func (w *Worker) keepLease(io, hctx context.Context, d broker.Delivery, cs *callState, lease time.Duration, log zerolog.Logger) (stop func()) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		tick := time.NewTicker(lease / 3)
		defer tick.Stop()
		for {
			select {
			case <-done:
				return
			case <-hctx.Done():
				return
			case <-tick.C:
				if err := d.Extend(io); err != nil {
					log.Warn().Err(err).Msg("lease extension failed")
				}
				t, err := cs.mutate(io, func(t *taskstate.Task) error {
					if t.Parked != nil {
						return taskstate.ErrSkip // the run parked: it holds no lease
					}
					t.Lease = &taskstate.Lease{Worker: w.cfg.ID, Expires: w.cfg.Now().Add(lease).UTC()}
					return nil
				})
				switch {
				case errors.Is(err, ErrFenced), errors.Is(err, taskstate.ErrSkip):
					return // mutate ended the handler, or the run parked
				case errors.Is(err, taskstate.ErrInvalidChange) && t.Status == taskstate.Cancelled:
					// Cancelled, and the broadcast did not reach this
					// worker (or not yet): the record says so all the same.
					cs.lost(ErrTaskCancelled)
					return
				case errors.Is(err, taskstate.ErrInvalidChange):
					return
				case err != nil:
					log.Warn().Err(err).Msg("lease renewal on the record failed")
				}
			}
		}
	}()
	return func() { close(done); wg.Wait() }
}

func toRPCError(err error) *taskstate.RPCError {
	var pe *ProtocolError
	if errors.As(err, &pe) {
		e := &taskstate.RPCError{Code: pe.Code, Message: pe.Message}
		if pe.Data != nil {
			e.Data, _ = json.Marshal(pe.Data)
		}
		return e
	}
	return &taskstate.RPCError{Code: vocab.CodeInternalError, Message: err.Error()}
}

// backoff is the delay before a job that hit a transient failure (store
// unreachable, no handler here) is delivered again: 1s, 2s, 4s, … up to 30s.
func backoff(delivery int) time.Duration {
	if delivery < 1 {
		delivery = 1
	}
	if delivery > 6 {
		return 30 * time.Second
	}
	return time.Second << (delivery - 1)
}
