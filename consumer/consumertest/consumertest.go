// Package consumertest unit-tests the handlers of a consumer.Mux without a
// broker. A Harness runs the real consumer.Worker over the in-memory queue,
// bus and store of broker/membroker and taskstate/memstate, and plays the
// front end's part: it creates a task record and its job for each call,
// answers the handler's input requests (Call.Ask, Call.Elicit) from a
// script, hears its progress reports and log messages, and cancels it the
// way tasks/cancel does. So a handler under test runs exactly the code path
// it runs in production — leases, fencing, timeouts, parking and all —
// only with every seam in memory.
//
// The harness speaks for a 2026-07-28 client that holds a task handle,
// declares the elicitation, sampling and roots capabilities, sends a
// progress token and asks for log messages at every level.
//
// It is for tests of handlers; this module's own suites and integration
// tests still run against the real brokers.
package consumertest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/mcpqueue/mcpqueue/backend"
	"github.com/mcpqueue/mcpqueue/broker"
	"github.com/mcpqueue/mcpqueue/broker/membroker"
	"github.com/mcpqueue/mcpqueue/consumer"
	"github.com/mcpqueue/mcpqueue/taskstate"
	"github.com/mcpqueue/mcpqueue/taskstate/memstate"
	"github.com/mcpqueue/mcpqueue/vocab"
)

// Harness runs a Mux's handlers on a consumer.Worker with in-memory seams.
type Harness struct {
	queue *membroker.Queue
	bus   *membroker.Bus
	store *memstate.Store

	ctx  context.Context // ends with Close
	stop func()
	done chan error // Run's return

	mu   sync.Mutex
	subs []broker.Subscription // the runs' notification subscriptions
}

// Start runs a worker for mux until Close. cfg tunes the worker as
// consumer.New's does (nil: defaults), except that an unset ID is
// "consumertest" and an unset ShutdownGrace is 100ms, so a test whose
// handler still waits at its end does not wait 25s for it.
func Start(ctx context.Context, mux *consumer.Mux, cfg *consumer.Config) (*Harness, error) {
	var c consumer.Config
	if cfg != nil {
		c = *cfg
	}
	if c.ID == "" {
		c.ID = "consumertest"
	}
	if c.ShutdownGrace == 0 {
		c.ShutdownGrace = 100 * time.Millisecond
	}
	h := &Harness{
		queue: membroker.NewQueue(nil),
		bus:   membroker.NewBus(),
		store: memstate.New(nil),
		done:  make(chan error, 1),
	}
	w := consumer.New(backend.Backend{Queue: h.queue, Store: h.store, Catalog: h.store, Bus: h.bus}, &c)
	run, stop := context.WithCancel(context.WithoutCancel(ctx))
	h.ctx, h.stop = run, stop
	go func() { h.done <- w.Run(run, mux) }()
	select {
	case <-w.Ready():
		return h, nil
	case err := <-h.done:
		stop()
		return nil, fmt.Errorf("consumertest: the worker did not start: %w", err)
	case <-ctx.Done():
		stop()
		if err := <-h.done; err != nil {
			return nil, fmt.Errorf("consumertest: the worker did not start: %w", err)
		}
		return nil, ctx.Err()
	}
}

// New is Start for a test: it fails t if the worker does not start, and
// closes the harness when t ends.
func New(t testing.TB, mux *consumer.Mux, cfg *consumer.Config) *Harness {
	t.Helper()
	h, err := Start(t.Context(), mux, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := h.Close(); err != nil {
			t.Errorf("consumertest: %v", err)
		}
	})
	return h
}

// With is Start, f and Close in one, for a program or an Example that has
// no testing.TB for New: it runs f with ctx on a harness for mux and closes
// the harness when f returns. It returns Start's error, else f's, else
// Close's.
func With(ctx context.Context, mux *consumer.Mux, cfg *consumer.Config, f func(ctx context.Context, h *Harness) error) (err error) {
	h, err := Start(ctx, mux, cfg)
	if err != nil {
		return err
	}
	defer func() {
		if cerr := h.Close(); err == nil {
			err = cerr
		}
	}()
	return f(ctx, h)
}

// Close stops the worker as a shutdown does (running handlers get the
// shutdown grace, then their context ends with consumer.ErrShutdown) and
// returns once it stopped.
func (h *Harness) Close() error {
	h.stop()
	h.mu.Lock()
	for _, s := range h.subs {
		_ = s.Close()
	}
	h.subs = nil
	h.mu.Unlock()
	err := <-h.done
	h.done <- err // a second Close returns at once, with the same answer
	if err != nil {
		return fmt.Errorf("consumertest: worker: %w", err)
	}
	return nil
}

// Store is the harness's task store, for a test that reads a task's record
// (taskstate.Task) beyond what an Outcome shows.
func (h *Harness) Store() taskstate.Store { return h.store }

// Option sets up one call.
type Option func(*request)

type request struct {
	owner   string
	answers map[string]any
}

// Answer scripts the client's answer to the handler's input requests asked
// with key (consumer.InputRequest.Key, the key given to Call.Elicit): an
// elicitation's consumer.ElicitResult, a sampling request's
// CreateMessageResult, a roots/list result; anything that encodes to the
// JSON the client would send. Every request of that key gets it.
func Answer(key string, answer any) Option {
	return func(r *request) { r.answers[key] = answer }
}

// Owner makes the call a principal's (consumer.Call.Owner), as an
// authenticated front end does.
func Owner(principal string) Option {
	return func(r *request) { r.owner = principal }
}

// clientMeta is the request context the harness's client sends.
var clientMeta = map[string]json.RawMessage{
	vocab.MetaProgressToken: json.RawMessage(`"consumertest"`),
	vocab.MetaLogLevel:      json.RawMessage(`"debug"`),
	vocab.MetaClientCaps:    json.RawMessage(`{"elicitation":{},"sampling":{},"roots":{}}`),
}

// Call runs tool with args (encoded to JSON, as a client sends them) and
// waits for its outcome (Run.Wait).
func (h *Harness) Call(ctx context.Context, tool string, args any, opts ...Option) (*Outcome, error) {
	r, err := h.Start(ctx, tool, args, opts...)
	if err != nil {
		return nil, err
	}
	return r.Wait(ctx)
}

// Start creates a task of tool with args and queues its job, as the front
// end does for tools/call, and returns the run without waiting for it.
// The tool must be registered on the harness's Mux: a job of another tool
// waits forever, as it would for a tool no worker serves.
func (h *Harness) Start(ctx context.Context, tool string, args any, opts ...Option) (*Run, error) {
	b, err := json.Marshal(args)
	if err != nil {
		return nil, fmt.Errorf("consumertest: arguments of %s: %w", tool, err)
	}
	req := &request{answers: map[string]any{}}
	for _, o := range opts {
		o(req)
	}
	now := time.Now().UTC()
	t := &taskstate.Task{
		ID: taskstate.NewID(), Tool: tool, Arguments: b, Owner: req.owner,
		Era: taskstate.Era20260728, Mode: taskstate.ModeTask, Status: taskstate.Working,
		CreatedAt: now, LastUpdatedAt: now, TTLMs: time.Hour.Milliseconds(), PollIntervalMs: 500,
		Meta: clientMeta,
	}
	r, err := newRun(h, t.ID, req.answers)
	if err != nil {
		return nil, err
	}
	sub, err := h.bus.Subscribe(ctx, broker.TopicNotify, t.ID, r.heard)
	if err != nil {
		return nil, fmt.Errorf("consumertest: %w", err)
	}
	h.mu.Lock()
	h.subs = append(h.subs, sub)
	h.mu.Unlock()
	if err := h.store.Create(ctx, t); err != nil {
		return nil, fmt.Errorf("consumertest: %w", err)
	}
	// The answerer watches from the created version on.
	updates, err := h.store.Watch(h.ctx, t.ID)
	if err != nil {
		return nil, fmt.Errorf("consumertest: %w", err)
	}
	go r.answer(updates)
	job := &broker.Job{TaskID: t.ID, Tool: tool, Arguments: b, Owner: req.owner, Meta: clientMeta}
	if err := h.queue.Enqueue(ctx, job); err != nil {
		return nil, fmt.Errorf("consumertest: %w", err)
	}
	return r, nil
}

// Outcome is where a call ended, or where it waits.
type Outcome struct {
	// Status is completed, failed or cancelled; or input_required when the
	// handler waits for an answer the script does not hold (Requests says
	// which; Run.Answer gives it).
	Status        taskstate.Status
	StatusMessage string
	// Result is a completed call's tool result; a handler's
	// consumer.ToolError is one with IsError set and the error's message
	// as its text.
	Result *consumer.Result
	// Error is a failed call's JSON-RPC error (a timeout, a panic, a
	// consumer.ProtocolError, any other error).
	Error *taskstate.RPCError
	// Requests are the input requests still outstanding, by the key the
	// client sees.
	Requests map[string]json.RawMessage
	// Record is the task record the outcome was read from.
	Record *taskstate.Task

	raw json.RawMessage
}

// Decode decodes a completed call's structured content (the Out of
// consumer.Handle) into v.
func (o *Outcome) Decode(v any) error {
	if o.Result == nil {
		return fmt.Errorf("consumertest: the call has no result (status %s)", o.Status)
	}
	var r struct {
		StructuredContent json.RawMessage `json:"structuredContent"`
	}
	if err := json.Unmarshal(o.raw, &r); err != nil || r.StructuredContent == nil {
		return fmt.Errorf("consumertest: the result has no structured content: %s", o.raw)
	}
	return json.Unmarshal(r.StructuredContent, v)
}

// Text is the text of the result's text content, joined by newlines.
func (o *Outcome) Text() string {
	if o.Result == nil {
		return ""
	}
	var s string
	for _, c := range o.Result.Content {
		if c.Text != nil {
			if s != "" {
				s += "\n"
			}
			s += *c.Text
		}
	}
	return s
}

// outcome reads what t says; a result kept in a blob is read from it.
func (h *Harness) outcome(ctx context.Context, t *taskstate.Task) (*Outcome, error) {
	o := &Outcome{Status: t.Status, StatusMessage: t.StatusMessage, Error: t.Error, Record: t, raw: t.Result}
	if t.Status == taskstate.InputRequired {
		o.Requests = t.InputRequests
	}
	if t.ResultRef != nil {
		b, err := taskstate.ReadBlob(ctx, h.store, t.ResultRef.Key)
		if err != nil {
			return nil, fmt.Errorf("consumertest: the result of %s: %w", t.ID, err)
		}
		o.raw = b
	}
	if t.Status == taskstate.Completed && o.raw != nil {
		o.Result = new(consumer.Result)
		if err := json.Unmarshal(o.raw, o.Result); err != nil {
			return nil, fmt.Errorf("consumertest: the result of %s: %w", t.ID, err)
		}
	}
	return o, nil
}

// errNoRecord: the record a run waits on is gone.
var errNoRecord = errors.New("consumertest: the task record is gone")
