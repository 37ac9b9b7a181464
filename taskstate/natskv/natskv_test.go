package natskv_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/mcpqueue/mcpqueue/internal/natstest"
	"github.com/mcpqueue/mcpqueue/taskstate"
	"github.com/mcpqueue/mcpqueue/taskstate/natskv"
	"github.com/mcpqueue/mcpqueue/taskstate/statetest"
)

const (
	toolTTL    = 2 * time.Second
	sessionTTL = 2 * time.Second
)

// newStore returns a store on its own buckets of srv.
func newStore(srv *natstest.Server, memory bool) statetest.NewStoreFunc {
	return func(t *testing.T) (taskstate.Store, taskstate.Catalog) {
		_, js := srv.Connect(t)
		name := natstest.Name(t)
		ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
		defer cancel()
		s, err := natskv.New(ctx, js, &natskv.Config{
			TaskBucket:    name + "_tasks",
			ToolBucket:    name + "_tools",
			ToolRetention: toolTTL,
			SessionTTL:    sessionTTL,
			Memory:        memory,
		})
		if err != nil {
			t.Fatalf("natskv.New: %v", err)
		}
		t.Cleanup(func() { _ = s.Close() })
		return s, s
	}
}

// memoryStore returns a store in memory on its own server, the server's
// JetStream and the name the store's buckets start with.
func memoryStore(t *testing.T) (*natskv.Store, jetstream.JetStream, string) {
	t.Helper()
	srv := natstest.Start(t)
	_, js := srv.Connect(t)
	name := natstest.Name(t)
	s, err := natskv.New(t.Context(), js, &natskv.Config{TaskBucket: name + "_tasks", ToolBucket: name + "_tools", Memory: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s, js, name
}

func TestContractFileStorage(t *testing.T) {
	t.Parallel()
	srv := natstest.Start(t)
	statetest.Run(t, statetest.Features{Sessions: true, Blobs: true, Feed: true, ActiveCount: true, Lease: true, RateLimit: true, Schedules: true, Outbox: true}, newStore(srv, false), &statetest.Options{ToolRetention: toolTTL, SessionTTL: sessionTTL, Twin: twin(srv)})
}

// Create publishes the owner-index entry with the record, so List may
// meet an entry whose record is still being written. It must leave such an
// entry alone, or the task would never be listed.
func TestListKeepsEntryOfCreateUnderWay(t *testing.T) {
	t.Parallel()
	s, js, name := memoryStore(t)
	ctx := t.Context()
	now := time.Now().UTC()
	task := &taskstate.Task{
		ID: taskstate.NewID(), Tool: "echo", Owner: "alice", Era: taskstate.Era20260728, Mode: taskstate.ModeTask,
		Status: taskstate.Working, CreatedAt: now, LastUpdatedAt: now, TTLMs: 60_000,
	}
	if err := s.Create(ctx, task); err != nil {
		t.Fatal(err)
	}
	// Take the record away, leaving the index entry: the state between
	// Create's two writes.
	kv, err := js.KeyValue(ctx, name+"_tasks")
	if err != nil {
		t.Fatal(err)
	}
	if err := kv.Purge(ctx, task.ID); err != nil {
		t.Fatal(err)
	}
	if got, _, err := s.List(ctx, "alice", "", 10); err != nil || len(got) != 0 {
		t.Fatalf("List without the record = %d tasks, %v; want none", len(got), err)
	}
	// The record arrives.
	b, err := taskstate.Encode(task)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kv.Put(ctx, task.ID, b); err != nil {
		t.Fatal(err)
	}
	got, _, err := s.List(ctx, "alice", "", 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0].ID != task.ID {
		t.Fatalf("List once the record is written = %d tasks, want the task", len(got))
	}
}

// Create publishes the record and its index entries in one flight; when an
// entry cannot be written, the record is taken back and Create fails, so no
// task exists that tasks/list, the active count and the reaper cannot see.
func TestCreateWithoutIndexLeavesNoRecord(t *testing.T) {
	t.Parallel()
	s, js, name := memoryStore(t)
	ctx := t.Context()
	if err := js.DeleteStream(ctx, "KV_"+name+"_tasks_owners"); err != nil {
		t.Fatal(err)
	}
	task := newTask()
	task.Owner = "alice"
	if err := s.Create(ctx, task); err == nil {
		t.Fatal("Create with the owner bucket gone succeeded")
	}
	if got, err := s.Get(ctx, task.ID); !errors.Is(err, taskstate.ErrNotFound) {
		t.Fatalf("after the failed Create, Get = %v, %v; want ErrNotFound", got, err)
	}
}

// A tool another process has just published is found at once, even while
// this store's catalog watcher is behind: a miss is read from the bucket
// before it is called unknown. Many names in a row, so a cache that only
// follows its watcher misses one of them.
func TestToolPublishedElsewhereIsFoundAtOnce(t *testing.T) {
	t.Parallel()
	srv := natstest.Start(t)
	name := natstest.Name(t)
	open := func() *natskv.Store {
		_, js := srv.Connect(t)
		s, err := natskv.New(t.Context(), js, &natskv.Config{TaskBucket: name + "_tasks", ToolBucket: name + "_tools", Memory: true})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = s.Close() })
		return s
	}
	api, worker := open(), open()
	if _, err := api.Tools(t.Context()); err != nil { // the api's cache and watcher are running
		t.Fatal(err)
	}
	for i := range 50 {
		tool := &taskstate.ToolInfo{Name: fmt.Sprintf("tool_%d", i)}
		if err := worker.PublishTool(t.Context(), tool); err != nil {
			t.Fatal(err)
		}
		if got, err := api.Tool(t.Context(), tool.Name); err != nil || got.Name != tool.Name {
			t.Fatalf("Tool(%s) right after another store published it = %v, %v", tool.Name, got, err)
		}
	}
	if _, err := api.Tool(t.Context(), "never_published"); !errors.Is(err, taskstate.ErrNotFound) {
		t.Fatalf("Tool(never_published) = %v, want ErrNotFound", err)
	}
}
