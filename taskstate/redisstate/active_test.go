package redisstate_test

import (
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/mcpqueue/mcpqueue/internal/redistest"
	"github.com/mcpqueue/mcpqueue/taskstate"
	"github.com/mcpqueue/mcpqueue/taskstate/redisstate"
)

// scanActiveIDs returns the ids an active Scan of s visits, sorted.
func scanActiveIDs(t *testing.T, s *redisstate.Store) []string {
	t.Helper()
	var got []string
	if err := s.Scan(t.Context(), true, func(task *taskstate.Task) bool {
		got = append(got, task.ID)
		return true
	}); err != nil {
		t.Fatalf("Scan(active): %v", err)
	}
	slices.Sort(got)
	return got
}

// populate writes total tasks to s, live of them active and the others
// finished through Update, and returns the active ids, sorted.
func populate(tb testing.TB, s *redisstate.Store, total, live int) []string {
	tb.Helper()
	ctx := tb.Context()
	tasks := make([]*taskstate.Task, total)
	var active []string
	for i := range tasks {
		tasks[i] = newTask()
		if i < live {
			active = append(active, tasks[i].ID)
		}
	}
	slices.Sort(active)
	// Eight writers, to keep it short.
	const writers = 8
	var wg sync.WaitGroup
	errs := make(chan error, writers)
	for w := range writers {
		wg.Go(func() {
			for i := w; i < total; i += writers {
				if err := s.Create(ctx, tasks[i]); err != nil {
					errs <- err
					return
				}
				if i < live {
					continue
				}
				if _, err := taskstate.Mutate(ctx, s, tasks[i].ID, time.Now, func(t *taskstate.Task) error {
					t.Status = taskstate.Completed
					return nil
				}); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		tb.Fatal(err)
	}
	return active
}

// With thousands of retained terminal records, an active Scan after the
// first (reconciling) one, which found every active record indexed, reads
// the active index alone: no SCAN, and Redis work in proportion to the
// active records only.
func TestActiveScanReadsIndex(t *testing.T) {
	t.Parallel()
	const total, live = 2000, 10
	counter := &commandCounter{calls: map[string]int{}}
	c := redistest.Client(t)
	c.AddHook(counter)
	s, prefix := prefixedStore(t, c)
	ctx := t.Context()

	active := populate(t, s, total, live)
	// The scripts alone keep the index: only the active records are in it.
	members, err := c.SMembers(ctx, prefix+"active").Result()
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(members)
	if !slices.Equal(members, active) {
		t.Fatalf("active index holds %d ids after the writes, want the %d active ones", len(members), live)
	}

	counter.reset()
	if got := scanActiveIDs(t, s); !slices.Equal(got, active) {
		t.Fatalf("first Scan(active) visited %v, want %v", got, active)
	}
	if calls, _ := counter.reset(); calls["scan"] == 0 {
		t.Fatalf("first Scan(active) sent no SCAN (%v), want a reconciling walk", calls)
	}
	for range 3 {
		if got := scanActiveIDs(t, s); !slices.Equal(got, active) {
			t.Fatalf("Scan(active) visited %v, want %v", got, active)
		}
		calls, args := counter.reset()
		if calls["scan"] != 0 || calls["sscan"] == 0 {
			t.Fatalf("Scan(active) after the first sent %v, want SSCAN and no SCAN", calls)
		}
		// A few commands whose arguments name the 10 active ids, not the
		// 2000 records.
		if args > 100 {
			t.Fatalf("Scan(active) sent %d arguments (%v) for %d active of %d records", args, calls, live, total)
		}
	}
}

// The index heals: an active record an older version wrote (not in the
// index) is found at the next reconciliation; members whose record was
// deleted by hand or finished by an older version leave it.
func TestActiveIndexRepair(t *testing.T) {
	t.Parallel()
	c := redistest.Client(t)
	s, prefix := prefixedStore(t, c)
	ctx := t.Context()
	index := prefix + "active"

	// writeOld stores a version as an older version's scripts do: the
	// record hash, a TTL when terminal, and no index.
	writeOld := func(task *taskstate.Task, rev int64, ttl time.Duration) {
		t.Helper()
		b, err := taskstate.Encode(task)
		if err != nil {
			t.Fatal(err)
		}
		key := prefix + "task:" + task.ID
		if err := c.HSet(ctx, key, "v", b, "r", rev).Err(); err != nil {
			t.Fatal(err)
		}
		if ttl > 0 {
			err = c.PExpire(ctx, key, ttl).Err()
		} else {
			err = c.Persist(ctx, key).Err()
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	create := func() *taskstate.Task {
		t.Helper()
		task := newTask()
		if err := s.Create(ctx, task); err != nil {
			t.Fatal(err)
		}
		return task
	}
	finished := func(task *taskstate.Task) *taskstate.Task {
		done := *task
		done.Status = taskstate.Completed
		return &done
	}
	members := func() []string {
		t.Helper()
		m, err := c.SMembers(ctx, index).Result()
		if err != nil {
			t.Fatal(err)
		}
		slices.Sort(m)
		return m
	}
	sorted := func(ids ...string) []string { slices.Sort(ids); return ids }

	kept := create()
	before := newTask() // written by an older version before this store's first Scan
	writeOld(before, 1, 0)
	if got, want := scanActiveIDs(t, s), sorted(kept.ID, before.ID); !slices.Equal(got, want) {
		t.Fatalf("first Scan(active) visited %v, want %v", got, want)
	}
	if got, want := members(), sorted(kept.ID, before.ID); !slices.Equal(got, want) {
		t.Fatalf("index after the reconciling Scan holds %v, want %v", got, want)
	}

	// The first Scan found an unindexed record: later ones read the index
	// and take a sweep step each; repairs of members happen there.
	after := newTask() // an older version's task after the reconciliation
	writeOld(after, 1, 0)
	gone := create()
	if err := c.Del(ctx, prefix+"task:"+gone.ID).Err(); err != nil {
		t.Fatal(err)
	}
	expiring := create() // finished by an older version, retained 60s
	writeOld(finished(expiring), 2, time.Minute)
	forever := create() // finished by an older version, retained forever
	writeOld(finished(forever), 2, 0)
	purged := create() // finished by an older version, then purged
	writeOld(finished(purged), 2, 0)
	if err := s.Delete(ctx, purged.ID); err != nil {
		t.Fatal(err)
	}
	if got, want := members(), sorted(kept.ID, before.ID, gone.ID, expiring.ID, forever.ID); !slices.Equal(got, want) {
		t.Fatalf("index before the repairing Scan holds %v, want %v", got, want)
	}
	// The sweep may have met the older version's task already.
	withAfter := sorted(kept.ID, before.ID, after.ID)
	if got := scanActiveIDs(t, s); !slices.Equal(got, sorted(kept.ID, before.ID)) && !slices.Equal(got, withAfter) {
		t.Fatalf("Scan(active) after the first visited %v, want %v (and perhaps %s)", got, sorted(kept.ID, before.ID), after.ID)
	}
	if got := members(); !slices.Equal(got, sorted(kept.ID, before.ID)) && !slices.Equal(got, withAfter) {
		t.Fatalf("index after the repairing Scan holds %v, want %v (and perhaps %s)", got, sorted(kept.ID, before.ID), after.ID)
	}

	// The sweep meets every key within (keys ÷ step) scans, a step being
	// about 500 keys (the database is shared with other tests: count it),
	// and a whole sweep that finds nothing new ends it.
	keys, err := c.DBSize(ctx).Result()
	if err != nil {
		t.Fatal(err)
	}
	bound := 4*int(keys)/500 + 20
	for n := 1; !slices.Equal(members(), withAfter); n++ {
		if n > bound {
			t.Fatalf("%d active scans over %d keys did not index the older version's task %s: index %v", bound, keys, after.ID, members())
		}
		scanActiveIDs(t, s)
	}
	if got := scanActiveIDs(t, s); !slices.Equal(got, withAfter) {
		t.Fatalf("Scan(active) after the sweep indexed it visited %v, want %v", got, withAfter)
	}
	for n := 1; redisstate.Sweeping(s); n++ {
		if n > 2*bound {
			t.Fatalf("the sweep still runs after %d scans with nothing left to index", n)
		}
		scanActiveIDs(t, s)
	}

	// A reconciliation (the first Scan of a Store) indexes at once.
	late := newTask()
	writeOld(late, 1, 0)
	redisstate.ReconcileNext(s)
	if got, want := scanActiveIDs(t, s), sorted(kept.ID, before.ID, after.ID, late.ID); !slices.Equal(got, want) {
		t.Fatalf("Scan(active) after a reconciliation visited %v, want %v", got, want)
	}
}
