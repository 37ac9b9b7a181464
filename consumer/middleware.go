package consumer

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/rs/zerolog"

	"github.com/mcpqueue/mcpqueue/taskstate"
	"github.com/mcpqueue/mcpqueue/vocab"
)

// Handler is one run of a Mux's entry in untyped form: what a middleware
// (Mux.Use) wraps. It returns the result as the worker writes it to the
// task, encoded: for a tool an MCP CallToolResult object, for a prompt a
// GetPromptResult, for a resource read a ReadResourceResult, for a
// completion a CompleteResult. It is JSON rather than *Result because the
// entries differ in what they return, and because HandleRaw's results are
// relayed byte for byte (content blocks and fields that Result does not
// model); a middleware that needs the fields decodes them
// (json.Unmarshal into a Result, for a tool).
//
// The error is the handler's own, not yet turned into an outcome; the
// worker does that after the chain returns:
//
//   - a ToolError (*ToolExecutionError) completes a tool's task with a
//     result whose isError is true and whose text is the error's message;
//   - a Retryable error (*RetryableError) runs the job again while the
//     tool's attempts last;
//   - a *ProtocolError fails the task with that JSON-RPC error, and any
//     other error fails it with an internal error (-32603) and its message.
//
// ErrInputRequired and ErrParked are no failures: the run ended to wait for
// the client's answers, and runs again once they are in. Whatever a chain
// returns for a run that parked is discarded.
type Handler func(ctx context.Context, req *Request) (json.RawMessage, error)

// Request is what a middleware knows of the run it wraps: which entry of
// the Mux runs, for which task, whose and how often. It is a read-only
// view; the handler at the end of the chain runs the call it was
// dispatched for, whatever Request it is passed.
type Request struct {
	kind string
	cs   *callState
}

// Kind is the kind of the entry that runs: taskstate.KindTool (""),
// taskstate.KindPrompt, taskstate.KindResource, taskstate.KindTemplate or
// taskstate.KindCompletion.
func (r *Request) Kind() string { return r.kind }

// Name names the entry within its kind: a tool's or prompt's name, a
// resource's URI, a template's URI template, the catalog key a completion
// belongs to.
func (r *Request) Name() string { return r.cs.tool }

// TaskID is the id of the task the run belongs to.
func (r *Request) TaskID() string { return r.cs.taskID }

// Owner is the principal that created the task ("" without authentication).
func (r *Request) Owner() string { return r.cs.owner }

// Attempt counts runs of the task, starting at 1 (more after a crash or a
// Retryable error).
func (r *Request) Attempt() int { return r.cs.attempt }

// Arguments are the call's arguments as the client sent them (a JSON
// object, or empty); a resource read's are {"uri": …}. They are the bytes
// the handler decodes: do not modify them.
func (r *Request) Arguments() json.RawMessage { return r.cs.args }

// Logger returns the worker's logger with the task's fields, as
// Call.Logger does.
func (r *Request) Logger() *zerolog.Logger { return r.cs.Logger() }

// Use adds middleware to m: every run of every entry m dispatches (tools,
// prompts, resource reads and completions, registered before Use or after
// it) passes through mw. The first middleware Use is given is the
// outermost: it sees the run first and its outcome last, as in a chain of
// net/http handlers.
//
// A middleware is called once per run, to wrap that run's Handler: set up
// what it shares between runs (a counter, a metric) outside it. It passes
// ctx on to next, or a context derived from it, so that cancellation, the
// tool's timeout and a lost lease still reach the handler. It may return
// without calling next (refuse the call): the task then ends as its error
// says (see Handler). It runs inside the worker's own recovery of panics,
// which fails the task with an internal error; a middleware that recovers
// a panic itself decides the outcome instead, a ToolError say.
//
// A Mux made by Only from m runs m's middleware, and then its own; entries
// Replace installs in m run m's middleware, and then those the Mux they
// came from had at the time of Replace. A nil middleware panics.
func (m *Mux) Use(mw ...func(Handler) Handler) {
	for _, f := range mw {
		if f == nil {
			panic("consumer: Use of a nil middleware")
		}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.mw = append(m.mw, mw...)
}

// middleware is the chain of m: the middleware of the Mux it was narrowed
// from (Only) first, then its own.
func (m *Mux) middleware() []func(Handler) Handler {
	m.mu.RLock()
	own, from := m.mw, m.from
	m.mu.RUnlock()
	if from == nil {
		return own
	}
	return append(from.middleware(), own...)
}

// wrap returns run passed through mw, the first outermost.
func wrap(kind string, mw []func(Handler) Handler, run func(ctx context.Context, cs *callState) (json.RawMessage, error)) func(ctx context.Context, cs *callState) (json.RawMessage, error) {
	if len(mw) == 0 {
		return run
	}
	return func(ctx context.Context, cs *callState) (json.RawMessage, error) {
		h := Handler(func(ctx context.Context, _ *Request) (json.RawMessage, error) { return run(ctx, cs) })
		for i := len(mw) - 1; i >= 0; i-- {
			h = mw[i](h)
		}
		res, err := h(ctx, &Request{kind: kind, cs: cs})
		if res == nil && err == nil {
			return nil, &ProtocolError{Code: vocab.CodeInternalError, Message: fmt.Sprintf("%q: a middleware returned neither a result nor an error", taskstate.CatalogKey(kind, cs.tool))}
		}
		return res, err
	}
}
