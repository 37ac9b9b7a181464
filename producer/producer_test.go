package producer_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mcpqueue/mcpqueue/broker"
	"github.com/mcpqueue/mcpqueue/internal/testenv"
	"github.com/mcpqueue/mcpqueue/producer"
	"github.com/mcpqueue/mcpqueue/taskstate"
	"github.com/mcpqueue/mcpqueue/taskstate/natskv"
)

// recorder is an Executor that remembers what it was asked to do. Start runs
// onStart first when set; a non-nil error from it fails the start.
type recorder struct {
	mu      sync.Mutex
	started []*broker.Job
	cancels []string
	onStart func(ctx context.Context, job *broker.Job) error
	// bare: the executor does not withdraw jobs (no Withdraws), so its
	// jobs carry no record.
	bare bool
}

// Withdraws makes the recorder an executor whose jobs carry their record.
func (r *recorder) Withdraws() bool { return !r.bare }

func (r *recorder) Start(ctx context.Context, job *broker.Job) error {
	r.mu.Lock()
	r.started = append(r.started, job)
	f := r.onStart
	r.mu.Unlock()
	if f != nil {
		return f(ctx, job)
	}
	return nil
}

func (r *recorder) Cancel(_ context.Context, taskID string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.cancels = append(r.cancels, taskID)
	return nil
}

func (r *recorder) jobs() []*broker.Job {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]*broker.Job(nil), r.started...)
}

func (r *recorder) cancelled() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.cancels...)
}

// newStore returns a natskv store on its own buckets of a fresh embedded server.
func newStore(t *testing.T) *natskv.Store {
	t.Helper()
	return testenv.StartNATS(t).Connect(t).Store
}

// newProducer returns a producer with cfg over a fresh store and a recorder.
func newProducer(t *testing.T, cfg *producer.Config) (*natskv.Store, *recorder, *producer.Producer) {
	t.Helper()
	st := newStore(t)
	ex := &recorder{}
	return st, ex, producer.New(st, ex, cfg)
}

// create makes p create a task of tool, failing the test if it cannot.
func create(t *testing.T, p *producer.Producer, tool string) *taskstate.Task {
	t.Helper()
	tk, err := p.Create(t.Context(), &producer.Request{Tool: tool})
	if err != nil {
		t.Fatalf("Create: %v", err)
	}
	return tk
}

var clock = time.Date(2026, 7, 28, 12, 0, 0, 0, time.UTC)

func fixedNow() time.Time { return clock }

func get(t *testing.T, st taskstate.Store, id string) *taskstate.Task {
	t.Helper()
	tk, err := st.Get(t.Context(), id)
	if err != nil {
		t.Fatalf("Get(%s): %v", id, err)
	}
	return tk
}

func TestCreateWritesWorkingRecordAndStartsOneJob(t *testing.T) {
	t.Parallel()
	st, ex, p := newProducer(t, &producer.Config{TTL: 2 * time.Minute, PollInterval: 250 * time.Millisecond, Now: fixedNow})

	args := json.RawMessage(`{"title":"Q3"}`)
	meta := map[string]json.RawMessage{"progressToken": json.RawMessage(`"tok-1"`)}
	tk, err := p.Create(t.Context(), &producer.Request{Tool: "render", Arguments: args, Owner: "alice", Era: taskstate.Era20260728, Meta: meta})
	if err != nil {
		t.Fatalf("Create: %v", err)
	}
	if !taskstate.ValidID(tk.ID) {
		t.Fatalf("minted id %q is not a valid task id", tk.ID)
	}

	rec := get(t, st, tk.ID)
	if rec.Status != taskstate.Working {
		t.Errorf("status %q, want working", rec.Status)
	}
	if rec.TTLMs != 120000 || rec.PollIntervalMs != 250 {
		t.Errorf("ttlMs=%d pollIntervalMs=%d, want 120000 and 250", rec.TTLMs, rec.PollIntervalMs)
	}
	if !rec.CreatedAt.Equal(clock) || !rec.LastUpdatedAt.Equal(clock) {
		t.Errorf("createdAt=%s lastUpdatedAt=%s, want both %s (the injected clock)", rec.CreatedAt, rec.LastUpdatedAt, clock)
	}
	if rec.Tool != "render" || rec.Owner != "alice" || rec.Era != taskstate.Era20260728 || rec.Mode != taskstate.ModeTask || string(rec.Arguments) != string(args) {
		t.Errorf("record fields: %+v", rec)
	}
	if rec.Revision == 0 || rec.Revision != tk.Revision {
		t.Errorf("returned revision %d, stored %d", tk.Revision, rec.Revision)
	}

	jobs := ex.jobs()
	if len(jobs) != 1 {
		t.Fatalf("started %d jobs, want exactly 1", len(jobs))
	}
	j := jobs[0]
	// The job carries the record as created (and so the call), at its
	// revision: the worker starts from it without reading it.
	carried, err := taskstate.Decode(j.Record, j.Revision)
	if err != nil {
		t.Fatalf("the job's record: %v", err)
	}
	if j.TaskID != tk.ID || j.Tool != "render" || j.Owner != "alice" || string(j.Arguments) != string(args) || string(j.Meta["progressToken"]) != `"tok-1"` {
		t.Errorf("job %+v does not carry the call", j)
	}
	if j.Revision != rec.Revision || carried.ID != tk.ID || string(carried.Arguments) != string(args) || carried.Status != taskstate.Working {
		t.Errorf("job (revision %d) carries record %+v, want the stored one (revision %d)", j.Revision, carried, rec.Revision)
	}
	// An executor that does not withdraw jobs gets none: its workers read
	// the record anyway.
	ex.bare = true
	if _, err := p.Create(t.Context(), &producer.Request{Tool: "render", Arguments: args}); err != nil {
		t.Fatal(err)
	}
	if j := ex.jobs()[1]; j.Record != nil || j.Revision != 0 {
		t.Errorf("a job for an executor without Withdraws carries a record (revision %d)", j.Revision)
	}
	if len(ex.cancelled()) != 0 {
		t.Errorf("Create cancelled something: %v", ex.cancelled())
	}
}

func TestCreateDefaults(t *testing.T) {
	t.Parallel()
	st, _, p := newProducer(t, nil) // a nil Config is valid
	rec := get(t, st, create(t, p, "x").ID)
	if rec.TTLMs != time.Hour.Milliseconds() || rec.PollIntervalMs != 500 {
		t.Errorf("defaults: ttlMs=%d pollIntervalMs=%d, want 3600000 and 500", rec.TTLMs, rec.PollIntervalMs)
	}
	if rec.Mode != taskstate.ModeTask || rec.Status != taskstate.Working {
		t.Errorf("default mode/status: %s/%s", rec.Mode, rec.Status)
	}
}

func TestCreateStartFailureMarksTaskFailed(t *testing.T) {
	t.Parallel()
	st := newStore(t)
	boom := errors.New("queue unavailable")
	ex := &recorder{onStart: func(context.Context, *broker.Job) error { return boom }}
	p := producer.New(st, ex, &producer.Config{Now: fixedNow, StartRetry: -1})

	tk, err := p.Create(t.Context(), &producer.Request{Tool: "render"})
	if !errors.Is(err, producer.ErrStart) {
		t.Fatalf("Create error %v does not wrap producer.ErrStart", err)
	}
	if !errors.Is(err, boom) {
		t.Errorf("Create error %v does not wrap the executor's error", err)
	}
	if len(ex.jobs()) != 1 {
		t.Fatalf("start attempts: %d, want 1", len(ex.jobs()))
	}
	// No client may poll a task that will never run: the record is failed.
	rec := get(t, st, ex.jobs()[0].TaskID)
	if rec.Status != taskstate.Failed {
		t.Fatalf("record status %q after a failed start, want failed", rec.Status)
	}
	if rec.Error == nil || rec.Error.Message == "" || rec.Error.Code == 0 {
		t.Errorf("failed record has no usable error: %+v", rec.Error)
	}
	if rec.StatusMessage == "" {
		t.Errorf("failed record has no statusMessage")
	}
	if tk == nil || tk.ID != rec.ID || tk.Status != taskstate.Failed {
		t.Errorf("Create returned %+v, want the failed record", tk)
	}
}

// A publish that fails for a moment (a broker restarting, a stream leader
// election) is retried within StartRetry; the task starts normally, once.
func TestCreateRetriesFailedStart(t *testing.T) {
	t.Parallel()
	st := newStore(t)
	var failures atomic.Int32
	ex := &recorder{onStart: func(context.Context, *broker.Job) error {
		if failures.Add(1) <= 2 {
			return errors.New("nats: no response from stream")
		}
		return nil
	}}
	p := producer.New(st, ex, &producer.Config{StartRetry: time.Minute})
	tk := create(t, p, "render")
	jobs := ex.jobs()
	if len(jobs) != 3 || jobs[0].DedupeKey() != tk.ID || jobs[2].DedupeKey() != tk.ID {
		t.Fatalf("start attempts %d, want 3 under the task id", len(jobs))
	}
	if rec := get(t, st, tk.ID); rec.Status != taskstate.Working {
		t.Fatalf("record %s after a retried start, want working", rec.Status)
	}
}

// lossyStore is a store whose records vanish once lost is set, as records
// the Redis primary had not yet replicated vanish in a failover.
type lossyStore struct {
	*natskv.Store
	lost atomic.Bool
}

func (s *lossyStore) Get(ctx context.Context, id string) (*taskstate.Task, error) {
	if s.lost.Load() {
		return nil, taskstate.ErrNotFound
	}
	return s.Store.Get(ctx, id)
}

// A start that needed retries may have spanned a failover that lost the
// record: Create checks the record is still there before acknowledging.
func TestCreateRetriedStartChecksTheRecord(t *testing.T) {
	t.Parallel()
	st := &lossyStore{Store: newStore(t)}
	var tries atomic.Int32
	ex := &recorder{onStart: func(context.Context, *broker.Job) error {
		if tries.Add(1) == 1 {
			st.lost.Store(true) // the primary dies with the record
			return errors.New("redis: connection refused")
		}
		return nil
	}}
	p := producer.New(st, ex, &producer.Config{StartRetry: time.Minute})
	if _, err := p.Create(t.Context(), &producer.Request{Tool: "render"}); err == nil || !strings.Contains(err.Error(), "task record is gone") {
		t.Fatalf("Create after the record was lost: %v, want an error", err)
	}
	st.lost.Store(false)
	tries.Store(0)
	ex.onStart = func(context.Context, *broker.Job) error {
		if tries.Add(1) == 1 {
			return errors.New("redis: connection refused")
		}
		return nil
	}
	if _, err := p.Create(t.Context(), &producer.Request{Tool: "render"}); err != nil {
		t.Fatalf("Create with the record kept: %v", err)
	}
}

// The caller's ctx may be what makes the start fail (client gone, deadline):
// the failure must be recorded all the same.
func TestCreateStartFailureRecordedWhenCallerContextEnds(t *testing.T) {
	t.Parallel()
	st := newStore(t)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	ex := &recorder{onStart: func(ctx context.Context, _ *broker.Job) error {
		cancel()
		return ctx.Err()
	}}
	p := producer.New(st, ex, nil)
	if _, err := p.Create(ctx, &producer.Request{Tool: "render"}); !errors.Is(err, producer.ErrStart) {
		t.Fatalf("Create error %v does not wrap producer.ErrStart", err)
	}
	rec := get(t, st, ex.jobs()[0].TaskID)
	if rec.Status != taskstate.Failed || rec.Error == nil {
		t.Fatalf("record %s %+v, want failed with an error", rec.Status, rec.Error)
	}
}

func TestCreateWithSameIDIsIdempotent(t *testing.T) {
	t.Parallel()
	now := clock
	st, ex, p := newProducer(t, &producer.Config{Now: func() time.Time { return now }})
	id := taskstate.NewID()

	first, err := p.Create(t.Context(), &producer.Request{ID: id, Tool: "render", Arguments: json.RawMessage(`{"a":1}`)})
	if err != nil {
		t.Fatalf("first Create: %v", err)
	}
	now = clock.Add(time.Minute) // a retry later, with different arguments
	second, err := p.Create(t.Context(), &producer.Request{ID: id, Tool: "render", Arguments: json.RawMessage(`{"a":2}`)})
	if err != nil {
		t.Fatalf("second Create: %v", err)
	}
	if second.ID != id || second.Revision != first.Revision || !second.CreatedAt.Equal(first.CreatedAt) || string(second.Arguments) != `{"a":1}` {
		t.Errorf("second Create returned %+v, want the existing record %+v", second, first)
	}
	if n := len(ex.jobs()); n != 1 {
		t.Fatalf("started %d jobs for one id, want 1", n)
	}
	if rec := get(t, st, id); rec.Revision != first.Revision {
		t.Errorf("the retry rewrote the record (revision %d → %d)", first.Revision, rec.Revision)
	}
}

func TestConcurrentCreatesWithSameIDStartOneJob(t *testing.T) {
	t.Parallel()
	_, ex, p := newProducer(t, nil)
	id := taskstate.NewID()
	const n = 8
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for range n {
		wg.Go(func() {
			tk, err := p.Create(context.Background(), &producer.Request{ID: id, Tool: "render"})
			if err == nil && tk.ID != id {
				err = errors.New("wrong id " + tk.ID)
			}
			errs <- err
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Errorf("Create: %v", err)
		}
	}
	if got := len(ex.jobs()); got != 1 {
		t.Fatalf("%d concurrent creates of one id started %d jobs, want 1", n, got)
	}
}

func TestCancelWorkingTask(t *testing.T) {
	t.Parallel()
	st, ex, p := newProducer(t, nil)
	tk := create(t, p, "render")
	got, err := p.Cancel(t.Context(), tk.ID, "user asked")
	if err != nil {
		t.Fatalf("Cancel: %v", err)
	}
	rec := get(t, st, tk.ID)
	if rec.Status != taskstate.Cancelled || rec.StatusMessage != "user asked" {
		t.Errorf("record %s %q, want cancelled with the reason", rec.Status, rec.StatusMessage)
	}
	if got.Status != taskstate.Cancelled || got.Revision != rec.Revision {
		t.Errorf("Cancel returned %s rev %d, stored %s rev %d", got.Status, got.Revision, rec.Status, rec.Revision)
	}
	if c := ex.cancelled(); len(c) != 1 || c[0] != tk.ID {
		t.Errorf("executor cancels %v, want [%s]", c, tk.ID)
	}
}

func TestCancelInputRequiredTaskClearsRequests(t *testing.T) {
	t.Parallel()
	st, ex, p := newProducer(t, nil)
	tk := create(t, p, "ask")
	_, err := taskstate.Mutate(t.Context(), st, tk.ID, time.Now, func(t *taskstate.Task) error {
		t.Status = taskstate.InputRequired
		t.InputRequests = map[string]json.RawMessage{"k-1": json.RawMessage(`{"method":"elicitation/create","params":{}}`)}
		t.Lease = &taskstate.Lease{Worker: "w1", Expires: time.Now().Add(time.Minute)}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.Cancel(t.Context(), tk.ID, "stop"); err != nil {
		t.Fatalf("Cancel: %v", err)
	}
	rec := get(t, st, tk.ID)
	if rec.Status != taskstate.Cancelled || len(rec.InputRequests) != 0 || rec.Lease != nil {
		t.Errorf("record after cancel: status=%s inputRequests=%v lease=%v", rec.Status, rec.InputRequests, rec.Lease)
	}
	if len(ex.cancelled()) != 1 {
		t.Errorf("executor cancels %v", ex.cancelled())
	}
}

func TestCancelTerminalTaskIsErrTerminalAndChangesNothing(t *testing.T) {
	t.Parallel()
	for _, end := range []taskstate.Status{taskstate.Completed, taskstate.Failed, taskstate.Cancelled} {
		t.Run(string(end), func(t *testing.T) {
			t.Parallel()
			st, ex, p := newProducer(t, nil)
			tk := create(t, p, "render")
			done, err := taskstate.Mutate(t.Context(), st, tk.ID, time.Now, func(t *taskstate.Task) error {
				t.Status = end
				t.StatusMessage = "ended"
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			_, err = p.Cancel(t.Context(), tk.ID, "too late")
			if !errors.Is(err, producer.ErrTerminal) {
				t.Fatalf("Cancel of a %s task: %v, want ErrTerminal", end, err)
			}
			rec := get(t, st, tk.ID)
			if rec.Revision != done.Revision || rec.Status != end || rec.StatusMessage != "ended" {
				t.Errorf("record changed: %s %q rev %d, want %s %q rev %d", rec.Status, rec.StatusMessage, rec.Revision, end, "ended", done.Revision)
			}
			if c := ex.cancelled(); len(c) != 0 {
				t.Errorf("executor told to cancel a terminal task: %v", c)
			}
		})
	}
}

func TestCancelUnknownTask(t *testing.T) {
	t.Parallel()
	_, ex, p := newProducer(t, nil)
	for _, id := range []string{taskstate.NewID(), "not a valid id"} {
		if _, err := p.Cancel(t.Context(), id, "x"); !errors.Is(err, taskstate.ErrNotFound) {
			t.Errorf("Cancel(%q): %v, want taskstate.ErrNotFound", id, err)
		}
	}
	if c := ex.cancelled(); len(c) != 0 {
		t.Errorf("executor told to cancel unknown tasks: %v", c)
	}
}

// QueueExecutor is the seam's stock implementation: Start enqueues the job,
// Cancel broadcasts the id on the cancel topic.
func TestQueueExecutor(t *testing.T) {
	t.Parallel()
	q := &fakeQueue{}
	b := &fakeBus{}
	ex := producer.QueueExecutor{Queue: q, Bus: b}
	job := &broker.Job{TaskID: "T", Tool: "x"}
	if err := ex.Start(t.Context(), job); err != nil || len(q.jobs) != 1 || q.jobs[0] != job {
		t.Fatalf("Start: %v, enqueued %v", err, q.jobs)
	}
	if err := ex.Cancel(t.Context(), "T"); err != nil || len(b.pubs) != 1 || b.pubs[0] != "cancel/T" {
		t.Fatalf("Cancel: %v, published %v", err, b.pubs)
	}
}

type fakeQueue struct{ jobs []*broker.Job }

func (q *fakeQueue) Enqueue(_ context.Context, j *broker.Job) error {
	q.jobs = append(q.jobs, j)
	return nil
}
func (q *fakeQueue) Consumer(context.Context, broker.ConsumerOptions) (broker.Consumer, error) {
	return nil, errors.New("not used")
}

type fakeBus struct{ pubs []string }

func (b *fakeBus) Publish(_ context.Context, topic broker.Topic, id string, _ []byte) error {
	b.pubs = append(b.pubs, string(topic)+"/"+id)
	return nil
}
func (b *fakeBus) Subscribe(context.Context, broker.Topic, string, func(string, []byte)) (broker.Subscription, error) {
	return nil, errors.New("not used")
}
