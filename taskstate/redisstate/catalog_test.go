package redisstate_test

import (
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/mcpqueue/mcpqueue/internal/redistest"
	"github.com/mcpqueue/mcpqueue/taskstate"
	"github.com/mcpqueue/mcpqueue/taskstate/redisstate"
)

// An api's store answers tools/call lookups from memory: no round trip while
// the catalog is unchanged, yet it sees a worker's new tool, a change missed
// while its pub/sub connection was down, and a tool's expiry; and a tool
// kept alive by heartbeats costs a read per TTL, not per call.
func TestCatalogCache(t *testing.T) {
	t.Parallel()
	apiClient, name := redistest.NamedClient(t)
	prefix := name + ":"
	admin := redistest.Client(t)
	redistest.DeleteKeys(t, admin, prefix)
	counter := &commandCounter{calls: map[string]int{}}
	apiClient.AddHook(counter)
	// scripts is how many Lua scripts the api's client ran since the last
	// call: each catalog read from Redis is one.
	scripts := func() int {
		calls, _ := counter.reset()
		return calls["evalsha"] + calls["eval"]
	}
	api := redisstate.New(apiClient, &redisstate.Config{Prefix: prefix})
	// Workers on a client of their own: their PublishTool reaches the api's
	// store only through Redis.
	const ttl = time.Second
	long := redisstate.New(redistest.Client(t), &redisstate.Config{Prefix: prefix, ToolRetention: time.Hour})
	short := redisstate.New(redistest.Client(t), &redisstate.Config{Prefix: prefix, ToolRetention: ttl})
	t.Cleanup(func() { _ = api.Close(); _ = long.Close(); _ = short.Close() })
	ctx := t.Context()

	publish := func(w *redisstate.Store, name string) {
		t.Helper()
		ti := &taskstate.ToolInfo{Name: name, InputSchema: json.RawMessage(`{"type":"object"}`), TaskSupport: taskstate.TaskOptional}
		if err := w.PublishTool(ctx, ti); err != nil {
			t.Fatal(err)
		}
	}
	// lookups calls Tool(name) n times and returns how many scripts ran.
	lookups := func(name string, n int) int {
		t.Helper()
		scripts()
		for range n {
			if _, err := api.Tool(ctx, name); err != nil {
				t.Fatalf("Tool(%s): %v", name, err)
			}
		}
		return scripts()
	}
	// until polls Tool(name) until it answers as want says.
	until := func(what, name string, want func(error) bool) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for {
			_, err := api.Tool(ctx, name)
			if want(err) {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: Tool(%s) still answers %v after 10s", what, name, err)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	found := func(err error) bool { return err == nil }
	gone := func(err error) bool { return errors.Is(err, taskstate.ErrNotFound) }

	publish(long, "one")
	if _, err := api.Tool(ctx, "one"); err != nil {
		t.Fatalf("first read: %v", err)
	}
	if n := lookups("one", 100); n != 0 {
		t.Fatalf("100 lookups of an unchanged catalog ran %d scripts, want 0", n)
	}

	publish(long, "two")
	until("a worker's new tool", "two", found)
	if n := lookups("two", 100); n != 0 {
		t.Fatalf("100 lookups after the new tool was seen ran %d scripts, want 0", n)
	}

	// A change made while the api's pub/sub connection is down is not
	// announced to it; the reconnection makes it read again.
	if n := redistest.KillSubscribers(t, admin, name); n != 1 {
		t.Fatalf("found %d subscriber connections to kill, want 1", n)
	}
	publish(long, "three")
	until("a tool published while the subscription was down", "three", found)
	deadline := time.Now().Add(10 * time.Second)
	for lookups("three", 100) != 0 {
		if time.Now().After(deadline) {
			t.Fatal("lookups still run scripts 10s after the reconnection")
		}
	}

	// "beat" is kept alive the way a worker's heartbeat does; "brief" is
	// not, and must disappear within its TTL, though nothing announces it.
	publish(short, "brief")
	publish(short, "beat")
	until("a short-lived tool", "beat", found)
	beat := time.Now()
	heartbeat := func() {
		if time.Since(beat) > ttl/4 {
			publish(short, "beat")
			beat = time.Now()
		}
	}
	deadline = time.Now().Add(10 * time.Second)
	for {
		heartbeat()
		_, err := api.Tool(ctx, "brief")
		if gone(err) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if time.Now().After(deadline) {
			t.Fatalf("a tool with a %s TTL still there after 10s", ttl)
		}
		time.Sleep(time.Millisecond) // pacing, not waiting for anything
	}
	// Over one and a half TTLs of lookups, the refreshed tool's deadline
	// passes about twice: a read each time, not one per call.
	calls := 0
	scripts()
	for start := time.Now(); time.Since(start) < ttl+ttl/2; calls++ {
		heartbeat()
		if _, err := api.Tool(ctx, "beat"); err != nil {
			t.Fatalf("Tool(beat) while it is refreshed: %v", err)
		}
		time.Sleep(time.Millisecond) // pacing
	}
	if n := scripts(); n > 5 || calls < 100 {
		t.Fatalf("%d lookups of a refreshed tool over %s ran %d scripts, want at most 5", calls, ttl+ttl/2, n)
	}
}
