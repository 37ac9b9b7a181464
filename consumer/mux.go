// Package consumer is the worker library. Register typed tool handlers on a
// Mux (Handle infers each tool's JSON Schema from its Go argument type); a
// handler gets a Call to report progress, log, ask the client for input and
// keep checkpoints; a Worker's Run pulls jobs, runs handlers with leases,
// cancellation and timeouts, writes outcomes, and drains on shutdown. Most
// programs hand their registrations to worker.Main instead of running a
// Worker themselves.
package consumer

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"regexp"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/google/jsonschema-go/jsonschema"

	"github.com/mcpqueue/mcpqueue/internal/paramheader"
	"github.com/mcpqueue/mcpqueue/taskstate"
	"github.com/mcpqueue/mcpqueue/vocab"
)

// Task support levels, re-exported for handler authors.
const (
	TaskForbidden = taskstate.TaskForbidden
	TaskOptional  = taskstate.TaskOptional
	TaskRequired  = taskstate.TaskRequired
)

// Tool describes a tool to register.
type Tool struct {
	Name        string
	Title       string
	Description string
	// TaskSupport defaults to TaskOptional.
	TaskSupport taskstate.TaskSupport
	// Timeout bounds one run of the handler. Zero uses the worker's default.
	Timeout time.Duration
	// Annotations are MCP tool annotations (readOnlyHint, …), passed through.
	Annotations map[string]any
	// InputSchema overrides the schema inferred from the argument type.
	InputSchema json.RawMessage
	// OutputSchema overrides the schema inferred from the result type.
	OutputSchema json.RawMessage
	// InputFirst makes every call gather its input inline (MRTR rounds) and
	// become a task only when the handler calls Continue.
	InputFirst bool

	// MaxConcurrency bounds how many calls of this tool one worker runs at
	// once (a GPU tool one at a time while the other tools use the rest of
	// Config.Concurrency). Zero: only Config.Concurrency bounds it.
	MaxConcurrency int
	// Lease is the tool's job lease: a worker that dies running it loses
	// the task after this long, and another takes it over. Zero uses
	// Config.Lease. Set it per tool, not per worker: pools that serve
	// different tools then keep their own.
	Lease time.Duration
	// MaxAttempts bounds how often a task of this tool runs (crashes, lost
	// leases) before it fails. Zero uses Config.MaxAttempts. Runs that end
	// by parking (below) do not count.
	MaxAttempts int
	// Redeliver says whether a task of this tool runs again after a run
	// that did not finish (its worker died or lost its lease): the default,
	// RedeliverAuto, follows Annotations (idempotentHint: false or
	// destructiveHint: true: not run again, the task fails saying why);
	// RedeliverAlways and RedeliverNever override them. See Redeliver.
	Redeliver Redeliver
	// ParkAfter is how long a task's run waits for its client's answers
	// before it parks: the run ends, its worker slot is free, and the task
	// waits (input_required) with no run until the last answer arrives;
	// then the handler runs again from the top, on any worker, and Ask
	// returns the stored answers without asking again. Zero uses
	// Config.ParkAfter; negative never parks (the run keeps its slot).
	ParkAfter time.Duration
	// InputTimeout bounds how long a task waits for its client's answers,
	// parked or not; then it fails saying so. Zero uses Config.InputTimeout.
	InputTimeout time.Duration
	// InlineWait caps how long the api may wait for a task of this tool to
	// finish and answer a task-capable client with the result itself
	// instead of a task handle (the api's --inline-wait, for tools it
	// knows to be short). Zero leaves it to the api; negative always hands
	// out a task handle (for a tool whose clients must get a task).
	InlineWait time.Duration
	// RateLimit bounds how often the tool starts, for a tool that calls a
	// rate-limited upstream API: at most N starts in any window of Per,
	// across every worker of every pool on the store (the limit is kept
	// there: taskstate.RateLimiter). A task over the limit waits, queued,
	// with a statusMessage saying so; it does not fail and uses no
	// attempt. Zero: no limit. A worker's Config.RateLimits overrides it.
	RateLimit Rate
}

// Mux routes jobs to handlers by tool name. Its set of tools may change
// while a Worker runs it (Replace, in dynamic.go).
type Mux struct {
	mu      sync.RWMutex
	tools   map[string]*entry
	dyn     dynamic
	updates *busCell                // Mux.ResourceUpdated's bus, set by the Worker that runs it
	mw      []func(Handler) Handler // Use
	from    *Mux                    // the Mux this one was narrowed from (Only)
}

type entry struct {
	info    taskstate.ToolInfo
	timeout time.Duration
	// The tool's own settings (Tool); zero takes the worker's.
	maxConcurrency, maxAttempts    int
	lease, parkAfter, inputTimeout time.Duration
	rate                           Rate // Tool.RateLimit
	// noRepeat is why an unfinished run of the tool is not run again
	// ("idempotentHint: false"); "": it is (Redeliver, redeliver.go).
	noRepeat string
	// run decodes the arguments, calls the handler and encodes its result.
	run func(ctx context.Context, cs *callState) (json.RawMessage, error)
}

// NewMux returns an empty Mux.
func NewMux() *Mux { return &Mux{tools: map[string]*entry{}, updates: &busCell{}} }

var toolName = regexp.MustCompile(`^[A-Za-z0-9_.-]{1,128}$`)

// Handle registers h as tool t. In is decoded from the call's arguments;
// its JSON Schema (inferred from the Go type) is published as the tool's
// inputSchema and enforced by the front end before anything is enqueued.
// Out is returned as the result: *Result as is, anything else as
// structuredContent with a JSON text copy. Registration mistakes panic.
//
// A field tagged `mcpheader:"Region"` (a string, integer or boolean, at any
// depth of nested structs) is marked "x-mcp-header": "Region" in the
// schema: 2026-07-28 clients then send its value in the Mcp-Param-Region
// header too (SEP-2243), so proxies and load balancers can route on it, and
// the front end refuses a call whose header disagrees with its arguments
// (-32020, HTTP 400) before anything is enqueued. An explicit InputSchema
// may carry the marks itself; invalid marks panic like any other mistake.
func Handle[In, Out any](m *Mux, t Tool, h func(ctx context.Context, call *Call[In]) (Out, error)) {
	t = checkTool(t)
	in := t.InputSchema
	if in == nil {
		in = mustHeaderTags(t.Name, mustSchema[In](t.Name, "input"), reflect.TypeFor[In]())
	} else if _, err := paramheader.Params(in); err != nil {
		panic(fmt.Sprintf("consumer: tool %q: %v", t.Name, err))
	}
	out := t.OutputSchema
	if out == nil && reflect.TypeFor[Out]() != reflect.TypeFor[*Result]() {
		out = mustSchema[Out](t.Name, "output")
	}
	m.add(t.Name, toolEntry(t, in, out, func(ctx context.Context, cs *callState) (json.RawMessage, error) {
		call, err := decodeCall[In](cs, "arguments")
		if err != nil {
			return nil, err
		}
		res, err := h(ctx, call)
		if err != nil {
			return nil, err
		}
		r, err := toResult(res)
		if err != nil {
			return nil, err
		}
		return json.Marshal(r)
	}))
}

// decodeCall is the Call of cs with its arguments decoded into In: absent
// or null arguments leave the zero value, undecodable ones are an
// invalid-params error naming what they are ("arguments").
func decodeCall[In any](cs *callState, what string) (*Call[In], error) {
	call := &Call[In]{callState: cs}
	if len(cs.args) > 0 && string(cs.args) != "null" {
		if err := json.Unmarshal(cs.args, &call.Args); err != nil {
			return nil, &ProtocolError{Code: vocab.CodeInvalidParams, Message: "invalid " + what + ": " + err.Error()}
		}
	}
	return call, nil
}

// checkTool validates t and fills in its defaults; mistakes panic.
func checkTool(t Tool) Tool {
	if !toolName.MatchString(t.Name) {
		panic(fmt.Sprintf("consumer: invalid tool name %q", t.Name))
	}
	if t.TaskSupport == "" {
		t.TaskSupport = TaskOptional
	}
	if t.MaxConcurrency < 0 || t.Lease < 0 || t.MaxAttempts < 0 || t.Timeout < 0 || t.InputTimeout < 0 {
		panic(fmt.Sprintf("consumer: tool %q: negative MaxConcurrency, Lease, MaxAttempts, Timeout or InputTimeout", t.Name))
	}
	if err := t.RateLimit.Check(); err != nil {
		panic(fmt.Sprintf("consumer: tool %q: %v", t.Name, err))
	}
	if _, err := noRepeat(t); err != nil {
		panic(fmt.Sprintf("consumer: tool %q: %v", t.Name, err))
	}
	return t
}

// toolEntry is the entry of tool t with these schemas and run.
func toolEntry(t Tool, in, out json.RawMessage, run func(ctx context.Context, cs *callState) (json.RawMessage, error)) *entry {
	var ann json.RawMessage
	if t.Annotations != nil {
		ann, _ = json.Marshal(t.Annotations)
	}
	why, _ := noRepeat(t) // checkTool refused the errors
	return &entry{
		info: taskstate.ToolInfo{
			Name: t.Name, Title: t.Title, Description: t.Description,
			InputSchema: in, OutputSchema: out, Annotations: ann,
			TaskSupport: t.TaskSupport, TimeoutMs: t.Timeout.Milliseconds(), InputFirst: t.InputFirst,
			InlineWaitMs: inlineWaitMs(t.InlineWait),
		},
		timeout:        t.Timeout,
		maxConcurrency: t.MaxConcurrency, maxAttempts: t.MaxAttempts, lease: t.Lease,
		parkAfter: t.ParkAfter, inputTimeout: t.InputTimeout,
		noRepeat: why, rate: t.RateLimit,
		run: run,
	}
}

// add registers e under key; a key registered already panics.
func (m *Mux) add(key string, e *entry) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, dup := m.tools[key]; dup {
		kind, name, _ := strings.Cut(key, "/")
		if name == "" {
			kind, name = "tool", key
		}
		panic(fmt.Sprintf("consumer: %s %q registered twice", kind, name))
	}
	m.tools[key] = e
	m.changedLocked()
}

func mustSchema[T any](tool, which string) json.RawMessage {
	s, err := jsonschema.For[T](nil)
	if err != nil {
		panic(fmt.Sprintf("consumer: tool %q: cannot infer %s schema: %v", tool, which, err))
	}
	if which == "input" && s.Type != "object" {
		panic(fmt.Sprintf("consumer: tool %q: input type must be a struct or map (schema type object), got %q", tool, s.Type))
	}
	if which == "output" && s.Type != "object" {
		return nil // MCP output schemas describe objects only
	}
	b, err := json.Marshal(s)
	if err != nil {
		panic(fmt.Sprintf("consumer: tool %q: %v", tool, err))
	}
	return b
}

// mustHeaderTags marks the properties of fields tagged `mcpheader:"Name"`
// with x-mcp-header (SEP-2243: the client mirrors their values in the
// Mcp-Param-Name header, which the front end checks against the arguments).
func mustHeaderTags(tool string, schema json.RawMessage, t reflect.Type) json.RawMessage {
	out, err := paramheader.Tag(schema, t)
	if err != nil {
		panic(fmt.Sprintf("consumer: tool %q: %v", tool, err))
	}
	return out
}

func toResult(out any) (*Result, error) {
	if r, ok := out.(*Result); ok {
		if r == nil {
			return &Result{Content: []Content{}}, nil
		}
		if r.Content == nil {
			r.Content = []Content{}
		}
		return r, nil
	}
	b, err := json.Marshal(out)
	if err != nil {
		return nil, fmt.Errorf("consumer: encode result: %w", err)
	}
	return &Result{Content: []Content{Text(string(b))}, StructuredContent: json.RawMessage(b)}, nil
}

// Only returns a Mux with just the named tools of m (catalog keys: a
// tool's name, "prompt/<name>" for a prompt, "resource/<uri>",
// "template/<uri template>"), for a worker that serves part of what its
// binary registers (--tools). A prompt or template keeps the completion
// handler registered beside it. A name m does not register is an error.
//
// The narrowed Mux follows m's later Replace calls, narrowed to the same
// names.
func (m *Mux) Only(names ...string) (*Mux, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := NewMux()
	out.updates, out.from = m.updates, m
	for _, n := range names {
		e, ok := m.tools[n]
		if !ok {
			return nil, fmt.Errorf("consumer: %q is not registered here (registered: %s)", n, strings.Join(m.keysLocked(), ", "))
		}
		out.tools[n] = e
		if c, ok := m.tools[taskstate.CompletionKey(n)]; ok {
			out.tools[taskstate.CompletionKey(n)] = c
		}
	}
	m.followLocked(out, names)
	return out, nil
}

func (m *Mux) keysLocked() []string {
	out := make([]string, 0, len(m.tools))
	for k := range m.tools {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// Tools returns what the Mux publishes to the catalog (tools and prompts),
// sorted by catalog key.
func (m *Mux) Tools() []taskstate.ToolInfo {
	m.mu.RLock()
	defer m.mu.RUnlock()
	out := make([]taskstate.ToolInfo, 0, len(m.tools))
	for _, e := range m.tools {
		out = append(out, e.info)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Key() < out[j].Key() })
	return out
}

// inlineWaitMs is Tool.InlineWait as the catalog keeps it: ms, -1 for never.
func inlineWaitMs(d time.Duration) int64 {
	if d < 0 {
		return -1
	}
	return d.Milliseconds()
}
