// Package testenv is the NATS test environment this module's tests share:
// an embedded server with a test's own stream, subjects and buckets, one
// connection and its seams per process role (an api's, a worker's), a
// worker run for the length of a test, and the write counters that tell a
// test nothing was enqueued or written. It is for _test files only (the
// layout test refuses it anywhere else), and it is real NATS: handler
// authors' broker-free tests use consumer/consumertest instead.
package testenv

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/mcpqueue/mcpqueue/broker/natsbroker"
	"github.com/mcpqueue/mcpqueue/consumer"
	"github.com/mcpqueue/mcpqueue/internal/natstest"
	"github.com/mcpqueue/mcpqueue/taskstate"
	"github.com/mcpqueue/mcpqueue/taskstate/natskv"
)

// NATS is an embedded server and the names of one test on it.
type NATS struct {
	Server *natstest.Server
	// Name is the test's own name (natstest.Name), which the stream,
	// subjects and buckets derive from.
	Name string
	// Broker is the queue and bus configuration: stream <Name>_JOBS,
	// subjects <Name>.jobs, bus <Name>.bus, in memory.
	Broker natsbroker.Config
	// KV is the store configuration: buckets <Name>_tasks and
	// <Name>_tools, in memory.
	KV natskv.Config
}

// StartNATS starts an embedded server for t (stopped when t ends).
func StartNATS(t testing.TB) *NATS {
	t.Helper()
	name := natstest.Name(t)
	return &NATS{
		Server: natstest.Start(t),
		Name:   name,
		Broker: natsbroker.Config{Stream: name + "_JOBS", Subject: name + ".jobs", BusPrefix: name + ".bus", Memory: true},
		KV:     natskv.Config{TaskBucket: name + "_tasks", ToolBucket: name + "_tools", Memory: true},
	}
}

// Seams are one process's connection to the server and the seams on it,
// as an api or a worker holds them.
type Seams struct {
	Conn  *nats.Conn
	JS    jetstream.JetStream
	Queue *natsbroker.Queue
	Store *natskv.Store // closed when the test ends
	Bus   *natsbroker.Bus

	n *NATS
}

// Connect opens a connection of its own and the test's seams on it.
func (n *NATS) Connect(t testing.TB) *Seams {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	nc, js := n.Server.Connect(t)
	bcfg, kcfg := n.Broker, n.KV
	q, err := natsbroker.NewQueue(ctx, js, &bcfg)
	if err != nil {
		t.Fatal(err)
	}
	st, err := natskv.New(ctx, js, &kcfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	return &Seams{Conn: nc, JS: js, Queue: q, Store: st, Bus: natsbroker.NewBus(nc, &bcfg), n: n}
}

// Counts returns how many messages were ever written to the job stream and
// to the task bucket. Equal counts before and after a request mean it
// enqueued nothing and changed no record.
func (s *Seams) Counts(t testing.TB) (jobs, records uint64) {
	t.Helper()
	_, jobInfo := Stream(t, s.JS, s.n.Broker.Stream)
	_, taskInfo := Stream(t, s.JS, "KV_"+s.n.KV.TaskBucket)
	return jobInfo.State.LastSeq, taskInfo.State.LastSeq
}

// Stream returns the stream called name and its state now, failing t if there is
// none.
func Stream(t testing.TB, js jetstream.JetStream, name string) (jetstream.Stream, *jetstream.StreamInfo) {
	t.Helper()
	st, err := js.Stream(t.Context(), name)
	if err != nil {
		t.Fatalf("stream %s: %v", name, err)
	}
	info, err := st.Info(t.Context())
	if err != nil {
		t.Fatalf("stream %s info: %v", name, err)
	}
	return st, info
}

// RunWorker runs w with mux until stop is called or t ends, whichever
// comes first; stop ends it as a shutdown does and returns once Run has.
// An error from Run fails t.
func RunWorker(t testing.TB, w *consumer.Worker, mux *consumer.Mux) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx, mux) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("worker Run: %v", err)
			}
		})
	}
	t.Cleanup(stop)
	return stop
}

// WaitTools waits until cat (another process's view of the catalog) holds
// every entry of mux, which a worker publishes when it starts.
func WaitTools(t testing.TB, cat taskstate.Catalog, mux *consumer.Mux) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for _, tool := range mux.Tools() {
		for {
			if _, err := cat.Tool(t.Context(), tool.Key()); err == nil {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("catalog entry %s never arrived", tool.Key())
			}
			time.Sleep(10 * time.Millisecond) // the catalog offers no event for this
		}
	}
}

// Eventually checks cond every 20 ms until it holds, and fails t naming
// what did not happen when within passes first. It is for conditions no
// event announces (a log line, a counter, another process's view).
func Eventually(t testing.TB, within time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("not within %s: %s", within, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
