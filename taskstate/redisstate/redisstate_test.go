package redisstate_test

import (
	"bufio"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/mcpqueue/mcpqueue/internal/redistest"
	"github.com/mcpqueue/mcpqueue/taskstate"
	"github.com/mcpqueue/mcpqueue/taskstate/redisstate"
	"github.com/mcpqueue/mcpqueue/taskstate/statetest"
)

const toolTTL = 2 * time.Second

// newStore returns a store under its own key prefix; its keys are deleted
// when the subtest ends.
func newStore(c redis.UniversalClient) statetest.NewStoreFunc {
	return func(t *testing.T) (taskstate.Store, taskstate.Catalog) {
		prefix := redistest.Name(t) + ":"
		redistest.DeleteKeys(t, c, prefix)
		s := redisstate.New(c, &redisstate.Config{Prefix: prefix, ToolTTL: toolTTL})
		t.Cleanup(func() { _ = s.Close() })
		return s, s
	}
}

func TestContract(t *testing.T) {
	t.Parallel()
	c := redistest.Client(t)
	statetest.Run(t, newStore(c), &statetest.Options{ToolTTL: toolTTL})
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
	ctx := t.Context()

	task := newTask()
	if err := a.Create(ctx, task); err != nil {
		t.Fatal(err)
	}
	ch, err := b.Watch(ctx, task.ID)
	if err != nil {
		t.Fatal(err)
	}
	if v := recv(t, ch); v.Revision != task.Revision {
		t.Fatalf("first version has revision %d, want %d", v.Revision, task.Revision)
	}
	done, err := taskstate.Mutate(ctx, a, task.ID, time.Now, func(t *taskstate.Task) error {
		t.Status = taskstate.Completed
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
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
	prefix := redistest.Name(t) + ":"
	redistest.DeleteKeys(t, c, prefix)
	s := redisstate.New(c, &redisstate.Config{Prefix: prefix})
	t.Cleanup(func() { _ = s.Close() })
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
		if _, err := taskstate.Mutate(ctx, s, task.ID, time.Now, func(t *taskstate.Task) error { t.Status = st; return nil }); err != nil {
			t.Fatal(err)
		}
		if d := pttl(); d != -1 {
			t.Fatalf("active record (%s) has expiry %s, want none", st, d)
		}
	}
	if _, err := taskstate.Mutate(ctx, s, task.ID, time.Now, func(t *taskstate.Task) error { t.Status = taskstate.Failed; return nil }); err != nil {
		t.Fatal(err)
	}
	if d := pttl(); d <= 59*time.Second || d > 60*time.Second {
		t.Fatalf("terminal record expires in %s, want its 60s TTL", d)
	}
}

// When the pub/sub connection is killed, go-redis reconnects and the
// watch re-reads the record: a version written while it was down still
// arrives.
func TestWatchSurvivesReconnect(t *testing.T) {
	t.Parallel()
	name := redistest.Name(t)
	c := redis.NewClient(&redis.Options{Addr: redistest.Addr(), ClientName: name})
	t.Cleanup(func() { _ = c.Close() })
	admin := redistest.Client(t)
	prefix := name + ":"
	redistest.DeleteKeys(t, admin, prefix)
	s := redisstate.New(c, &redisstate.Config{Prefix: prefix})
	t.Cleanup(func() { _ = s.Close() })
	ctx := t.Context()

	task := newTask()
	if err := s.Create(ctx, task); err != nil {
		t.Fatal(err)
	}
	ch, err := s.Watch(ctx, task.ID)
	if err != nil {
		t.Fatal(err)
	}
	recv(t, ch)

	// Kill the store's subscriber connection (named after this test, in
	// pub/sub mode), then write the terminal version.
	killed := 0
	list, err := admin.ClientList(ctx).Result()
	if err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(strings.NewReader(list))
	for sc.Scan() {
		f := fields(sc.Text())
		if f["name"] == name && f["sub"] != "0" {
			if err := admin.Do(ctx, "CLIENT", "KILL", "ID", f["id"]).Err(); err != nil {
				t.Fatal(err)
			}
			killed++
		}
	}
	if killed != 1 {
		t.Fatalf("found %d subscriber connections to kill, want 1", killed)
	}
	done, err := taskstate.Mutate(ctx, s, task.ID, time.Now, func(t *taskstate.Task) error {
		t.Status = taskstate.Completed
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if v := recv(t, ch); v.Revision != done.Revision {
		t.Fatalf("after reconnect got revision %d, want %d", v.Revision, done.Revision)
	}
}

func fields(line string) map[string]string {
	m := map[string]string{}
	for _, kv := range strings.Fields(line) {
		k, v, _ := strings.Cut(kv, "=")
		m[k] = v
	}
	return m
}

func newTask() *taskstate.Task {
	now := time.Now().UTC()
	return &taskstate.Task{
		ID: taskstate.NewID(), Tool: "echo", Era: taskstate.Era20260728, Mode: taskstate.ModeTask,
		Status: taskstate.Working, CreatedAt: now, LastUpdatedAt: now, TTLMs: 60_000,
	}
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
