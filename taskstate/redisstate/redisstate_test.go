package redisstate_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/mcpqueue/mcpqueue/internal/redistest"
	"github.com/mcpqueue/mcpqueue/taskstate"
	"github.com/mcpqueue/mcpqueue/taskstate/redisstate"
	"github.com/mcpqueue/mcpqueue/taskstate/statetest"
)

const (
	toolTTL    = 2 * time.Second
	sessionTTL = 2 * time.Second
)

// newStore returns a store under its own key prefix; its keys are deleted
// when the subtest ends.
func newStore(c redis.UniversalClient) statetest.NewStoreFunc {
	return func(t *testing.T) (taskstate.Store, taskstate.Catalog) {
		prefix := redistest.Name(t) + ":"
		redistest.DeleteKeys(t, c, prefix)
		s := redisstate.New(c, &redisstate.Config{Prefix: prefix, ToolRetention: toolTTL, SessionTTL: sessionTTL})
		t.Cleanup(func() { _ = s.Close() })
		return s, s
	}
}

// prefixedStore returns a store on c under a fresh key prefix, closed and
// its keys deleted when tb ends.
func prefixedStore(tb testing.TB, c redis.UniversalClient) (*redisstate.Store, string) {
	tb.Helper()
	prefix := redistest.Name(tb) + ":"
	redistest.DeleteKeys(tb, c, prefix)
	s := redisstate.New(c, &redisstate.Config{Prefix: prefix})
	tb.Cleanup(func() { _ = s.Close() })
	return s, prefix
}

func TestContract(t *testing.T) {
	t.Parallel()
	c := redistest.Client(t)
	statetest.Run(t, statetest.Features{Sessions: true, Blobs: true, Feed: true, ActiveCount: true, Lease: true, RateLimit: true, Schedules: true, Outbox: true}, newStore(c), &statetest.Options{ToolRetention: toolTTL, SessionTTL: sessionTTL, Twin: twin})
}

// Two stores on separate clients, as an api replica and a worker: writes
// through one reach watchers of the other.
func TestWatchAcrossStores(t *testing.T) {
	t.Parallel()
	prefix := redistest.Name(t) + ":"
	a := redisstate.New(redistest.Client(t), &redisstate.Config{Prefix: prefix})
	b := redisstate.New(redistest.Client(t), &redisstate.Config{Prefix: prefix})
	redistest.DeleteKeys(t, redistest.Client(t), prefix)
	t.Cleanup(func() { _ = a.Close(); _ = b.Close() })

	task, ch := createWatched(t, a, b)
	done := setStatus(t, a, task.ID, taskstate.Completed)
	if v := recv(t, ch); v.Revision != done.Revision || v.Status != taskstate.Completed {
		t.Fatalf("got revision %d (%s), want %d (completed)", v.Revision, v.Status, done.Revision)
	}
	if _, ok := <-ch; ok {
		t.Fatal("watch still open after the terminal version")
	}
}

// Retention: an active record has no expiry however often it is written; a
// terminal one expires after its own TTL.
func TestExpiryOnlyWhenTerminal(t *testing.T) {
	t.Parallel()
	c := redistest.Client(t)
	s, prefix := prefixedStore(t, c)
	ctx := t.Context()

	task := newTask()
	task.TTLMs = 60_000
	if err := s.Create(ctx, task); err != nil {
		t.Fatal(err)
	}
	key := prefix + "task:" + task.ID
	pttl := func() time.Duration {
		t.Helper()
		d, err := c.PTTL(ctx, key).Result()
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	for _, st := range []taskstate.Status{taskstate.Working, taskstate.InputRequired, taskstate.Working} {
		setStatus(t, s, task.ID, st)
		if d := pttl(); d != -1 {
			t.Fatalf("active record (%s) has expiry %s, want none", st, d)
		}
	}
	setStatus(t, s, task.ID, taskstate.Failed)
	if d := pttl(); d <= 59*time.Second || d > 60*time.Second {
		t.Fatalf("terminal record expires in %s, want its 60s TTL", d)
	}
}

// The owner index never outlives what it lists: an entry leaves once its
// record's retention ends (pruned by the next Create or List of the owner),
// and when every entry is expiring the index keys expire with the last one,
// so an owner who never comes back leaves nothing behind.
func TestOwnerIndexRetention(t *testing.T) {
	t.Parallel()
	c := redistest.Client(t)
	s, prefix := prefixedStore(t, c)
	ctx := t.Context()

	owned := func(owner string, ttl time.Duration) *taskstate.Task {
		t.Helper()
		task := newTask()
		task.Owner = owner
		task.TTLMs = ttl.Milliseconds()
		if err := s.Create(ctx, task); err != nil {
			t.Fatal(err)
		}
		return task
	}
	// indexKeys returns the one owner's index keys there are (tasks and
	// expiring sets), or none.
	indexKeys := func() []string {
		t.Helper()
		keys, err := c.Keys(ctx, prefix+"owner:*:tasks").Result()
		if err != nil {
			t.Fatal(err)
		}
		switch len(keys) {
		case 0:
			return nil
		case 1:
			return []string{keys[0], strings.TrimSuffix(keys[0], "tasks") + "expiring"}
		}
		t.Fatalf("index keys of several owners: %v", keys)
		return nil
	}
	// pttl is the tasks set's expiry, checking the expiring set's matches.
	pttl := func(keys []string) time.Duration {
		t.Helper()
		// Both in one MULTI, so no time passes between them however
		// loaded the machine is.
		var dc, ec *redis.DurationCmd
		if _, err := c.TxPipelined(ctx, func(p redis.Pipeliner) error {
			dc, ec = p.PTTL(ctx, keys[0]), p.PTTL(ctx, keys[1])
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		d, e := dc.Val(), ec.Val()
		if d > 0 && (e < d-10*time.Millisecond || e > d+10*time.Millisecond) || d == -1 && e >= 0 {
			t.Fatalf("tasks set expires in %s, expiring set in %s", d, e)
		}
		return d
	}
	card := func(keys []string) int64 {
		t.Helper()
		n, err := c.ZCard(ctx, keys[0]).Result()
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	gone := func(task *taskstate.Task) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for {
			_, err := s.Get(ctx, task.ID)
			if errors.Is(err, taskstate.ErrNotFound) {
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if time.Now().After(deadline) {
				t.Fatal("terminal record still there after 10s")
			}
			time.Sleep(20 * time.Millisecond)
		}
	}

	// An owner whose only task expires leaves no keys.
	lone := owned("bob", time.Second)
	keys := indexKeys()
	if keys == nil {
		t.Fatal("no index keys after bob's first task")
	}
	if d := pttl(keys); d != -1 {
		t.Fatalf("index of an active task expires in %s, want never", d)
	}
	setStatus(t, s, lone.ID, taskstate.Completed)
	if d := pttl(keys); d <= 0 || d > time.Second+10*time.Millisecond {
		t.Fatalf("index of one task with a 1s retention expires in %s", d)
	}
	gone(lone)
	deadline := time.Now().Add(10 * time.Second)
	for len(indexKeys()) != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("index keys %v still there 10s after their last task expired", indexKeys())
		}
		time.Sleep(20 * time.Millisecond)
	}

	// While any task has no retention, the index has none either.
	long := owned("alice", time.Minute)
	short := owned("alice", time.Second)
	keys = indexKeys()
	setStatus(t, s, short.ID, taskstate.Completed)
	if d := pttl(keys); d != -1 {
		t.Fatalf("index with an active task expires in %s, want never", d)
	}
	setStatus(t, s, long.ID, taskstate.Completed)
	if d := pttl(keys); d <= 59*time.Second || d > time.Minute+10*time.Millisecond {
		t.Fatalf("index of tasks retained up to 60s expires in %s, want about 60s", d)
	}
	// An expired task's entry goes with the owner's next Create.
	gone(short)
	next := owned("alice", time.Minute)
	if n := card(keys); n != 2 {
		t.Fatalf("index holds %d entries after the expired task's owner created another, want 2", n)
	}
	if d := pttl(keys); d != -1 {
		t.Fatalf("index with an active task expires in %s, want never", d)
	}
	got, _, err := s.List(ctx, "alice", "", 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].ID != long.ID || got[1].ID != next.ID {
		t.Fatalf("List = %d tasks, want the two that are left", len(got))
	}

	// An entry whose record vanished early (evicted, deleted by hand) goes
	// with the next List.
	if err := c.Del(ctx, prefix+"task:"+next.ID).Err(); err != nil {
		t.Fatal(err)
	}
	if got, _, err = s.List(ctx, "alice", "", 10); err != nil || len(got) != 1 || got[0].ID != long.ID {
		t.Fatalf("List after a record vanished = %d tasks, %v; want one", len(got), err)
	}
	if n := card(keys); n != 1 {
		t.Fatalf("index holds %d entries after List met a vanished record, want 1", n)
	}
	if d := pttl(keys); d <= 58*time.Second || d > time.Minute+10*time.Millisecond {
		t.Fatalf("index of one task retained for 60s expires in %s, want about 60s", d)
	}
}

// When the pub/sub connection is killed, go-redis reconnects and the
// watch re-reads the record: a version written while it was down still
// arrives.
func TestWatchSurvivesReconnect(t *testing.T) {
	t.Parallel()
	c, name := redistest.NamedClient(t)
	admin := redistest.Client(t)
	prefix := name + ":"
	redistest.DeleteKeys(t, admin, prefix)
	s := redisstate.New(c, &redisstate.Config{Prefix: prefix})
	t.Cleanup(func() { _ = s.Close() })
	task, ch := createWatched(t, s, s)

	// Kill the store's subscriber connection (named after this test, in
	// pub/sub mode), then write the terminal version.
	if n := redistest.KillSubscribers(t, admin, name); n != 1 {
		t.Fatalf("found %d subscriber connections to kill, want 1", n)
	}
	done := setStatus(t, s, task.ID, taskstate.Completed)
	if v := recv(t, ch); v.Revision != done.Revision {
		t.Fatalf("after reconnect got revision %d, want %d", v.Revision, done.Revision)
	}
}

func newTask() *taskstate.Task {
	now := time.Now().UTC()
	return &taskstate.Task{
		ID: taskstate.NewID(), Tool: "echo", Era: taskstate.Era20260728, Mode: taskstate.ModeTask,
		Status: taskstate.Working, CreatedAt: now, LastUpdatedAt: now, TTLMs: 60_000,
	}
}

// createWatched creates a new task through w and watches it through r,
// checking that the first version the watch delivers is the one created.
func createWatched(t *testing.T, w, r *redisstate.Store) (*taskstate.Task, <-chan *taskstate.Task) {
	t.Helper()
	task := newTask()
	if err := w.Create(t.Context(), task); err != nil {
		t.Fatal(err)
	}
	ch, err := r.Watch(t.Context(), task.ID)
	if err != nil {
		t.Fatal(err)
	}
	if v := recv(t, ch); v.Revision != task.Revision {
		t.Fatalf("first version has revision %d, want %d", v.Revision, task.Revision)
	}
	return task, ch
}

// setStatus moves task id of s to st and returns the version it wrote.
func setStatus(tb testing.TB, s taskstate.Store, id string, st taskstate.Status) *taskstate.Task {
	tb.Helper()
	v, err := taskstate.Mutate(tb.Context(), s, id, time.Now, func(t *taskstate.Task) error { t.Status = st; return nil })
	if err != nil {
		tb.Fatal(err)
	}
	return v
}

// commandCounter is a go-redis hook that counts the commands a client sends
// and the arguments they carry (keys and ids included).
type commandCounter struct {
	mu    sync.Mutex
	calls map[string]int
	args  int
}

func (c *commandCounter) DialHook(next redis.DialHook) redis.DialHook { return next }

func (c *commandCounter) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		c.count(cmd)
		return next(ctx, cmd)
	}
}

func (c *commandCounter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		for _, cmd := range cmds {
			c.count(cmd)
		}
		return next(ctx, cmds)
	}
}

func (c *commandCounter) count(cmd redis.Cmder) {
	c.mu.Lock()
	c.calls[cmd.Name()]++
	c.args += len(cmd.Args())
	c.mu.Unlock()
}

// reset returns the counts so far and starts again from zero.
func (c *commandCounter) reset() (calls map[string]int, args int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	calls, args = c.calls, c.args
	c.calls, c.args = map[string]int{}, 0
	return calls, args
}

func recv(t *testing.T, ch <-chan *taskstate.Task) *taskstate.Task {
	t.Helper()
	select {
	case v, ok := <-ch:
		if !ok {
			t.Fatal("watch closed")
		}
		return v
	case <-time.After(10 * time.Second):
		t.Fatal("no version within 10s")
		return nil
	}
}
