package natskv_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/mcpqueue/mcpqueue/internal/natstest"
	"github.com/mcpqueue/mcpqueue/taskstate"
	"github.com/mcpqueue/mcpqueue/taskstate/natskv"
)

// What the reaper's pass (an active Scan) and the api's cap (CountActive)
// read grows with the tasks in flight, not with the finished records the
// bucket retains: after the first active Scan (which walks every record
// once, to index those written before the index), an active Scan and a
// CountActive over 2000 records, 5 of them active, receive a few messages
// and a few KiB — a small fraction of what the first Scan received.
func TestActiveReadsInFlightNotHistory(t *testing.T) {
	t.Parallel()
	srv := natstest.Start(t)
	nc, js := srv.Connect(t)
	name := natstest.Name(t)
	ctx := t.Context()
	s, err := natskv.New(ctx, js, &natskv.Config{TaskBucket: name + "_tasks", ToolBucket: name + "_tools", Memory: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	const total, live = 2000, 5
	writeHistory(t, s, total, live)

	received := func(f func()) (msgs, bytes uint64) {
		t.Helper()
		if err := nc.Flush(); err != nil {
			t.Fatal(err)
		}
		before := nc.Stats()
		f()
		after := nc.Stats()
		return after.InMsgs - before.InMsgs, after.InBytes - before.InBytes
	}
	scan := func() {
		t.Helper()
		n := 0
		if err := s.Scan(ctx, true, func(*taskstate.Task) bool { n++; return true }); err != nil {
			t.Fatal(err)
		}
		if n != live {
			t.Fatalf("Scan(active) visited %d records, want the %d active of %d", n, live, total)
		}
	}
	firstMsgs, firstBytes := received(scan)
	if firstMsgs < total {
		t.Fatalf("the first Scan(active) received %d messages for %d records: it should walk them all once (index repair)", firstMsgs, total)
	}
	for range 3 {
		msgs, bytes := received(scan)
		t.Logf("Scan(active): %d messages, %d bytes (the first: %d, %d bytes)", msgs, bytes, firstMsgs, firstBytes)
		if msgs > 4*live+8 || bytes > firstBytes/20 {
			t.Fatalf("Scan(active) after the first received %d messages, %d bytes for %d active of %d records (the first: %d, %d bytes)",
				msgs, bytes, live, total, firstMsgs, firstBytes)
		}
	}
	msgs, bytes := received(func() {
		if n, err := s.CountActive(ctx, "alice", 1000); err != nil || n != live {
			t.Fatalf("CountActive(alice) = %d, %v; want %d", n, err, live)
		}
	})
	t.Logf("CountActive: %d messages, %d bytes", msgs, bytes)
	if msgs > 2 || bytes > firstBytes/20 {
		t.Fatalf("CountActive received %d messages, %d bytes for %d active of %d records (a full Scan: %d bytes)", msgs, bytes, live, total, firstBytes)
	}
}

// writeHistory creates total tasks of alice, all but live of them then
// completed, 16 writers at a time.
func writeHistory(tb testing.TB, s taskstate.Store, total, live int) {
	tb.Helper()
	ctx, cancel := context.WithCancel(tb.Context())
	defer cancel()
	ids := make(chan int)
	errs := make(chan error, 16)
	var wg sync.WaitGroup
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range ids {
				task := newTask()
				task.Owner = "alice"
				err := s.Create(ctx, task)
				if err == nil && i >= live {
					_, err = taskstate.Mutate(ctx, s, task.ID, time.Now, func(t *taskstate.Task) error {
						t.Status = taskstate.Completed
						return nil
					})
				}
				if err != nil {
					errs <- err
					cancel()
					return
				}
			}
		}()
	}
feed:
	for i := range total {
		select {
		case ids <- i:
		case <-ctx.Done():
			break feed
		}
	}
	close(ids)
	wg.Wait()
	close(errs)
	for err := range errs {
		tb.Fatal(err)
	}
}
