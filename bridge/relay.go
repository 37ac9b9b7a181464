package bridge

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"

	"github.com/mcpqueue/mcpqueue/consumer"
	"github.com/mcpqueue/mcpqueue/internal/mcpwire"
	"github.com/mcpqueue/mcpqueue/vocab"
)

// Options tune the relay of one server. The zero value of every field but
// Name is a documented default.
type Options struct {
	// Name names the server in logs, in the errors of calls it fails and
	// in the Mux group its tools join ("mcp:" + Name). Empty: the name the
	// server gives in initialize (serverInfo.name).
	Name string
	// Prefix is put before every tool and prompt name, so two servers
	// with a tool of the same name can share a worker.
	Prefix string
	// Sessions is how many sessions (child processes) run calls at once;
	// it is also every relayed tool's MaxConcurrency. Default 1.
	Sessions int
	// Timeout bounds one call (the tools' consumer.Tool.Timeout). Zero:
	// the worker's.
	Timeout time.Duration
	// ToolTimeouts bound one call of the named tools (the server's names,
	// without Prefix), instead of Timeout (task gateway).
	ToolTimeouts map[string]time.Duration
	// StartTimeout bounds starting a session: the handshake and the first
	// lists. Default 60s (npx may download the server first).
	StartTimeout time.Duration
	// CancelGrace is how long a session whose call was cancelled may take
	// to answer it before it is closed rather than reused. Default 2s.
	CancelGrace time.Duration
	// Roots relays the server's roots/list requests to the client of the
	// call running on the session (the bridge then declares the roots
	// capability). Off by default: roots describe a client, while a
	// session serves one client's call after another's, and servers ask for
	// roots when a session starts (to configure themselves), not for a call
	// of theirs. Off, the server gets -32601 and keeps its own configuration.
	Roots bool
	// LogLevel is the level the server is asked to log at
	// (logging/setLevel), "off" for none. Default "info".
	LogLevel string
	Logger   zerolog.Logger
}

// Relay serves one MCP server's tools and prompts in a consumer.Mux.
type Relay struct {
	opts  Options
	dial  Dialer
	mux   *consumer.Mux
	log   zerolog.Logger
	pool  *pool
	calls atomic.Int64 // numbers progress tokens

	refreshMu sync.Mutex
	listed    []byte          // what the Mux holds now (tools and prompts as listed)
	skipped   map[string]bool // tools not relayed, warned about once
}

// Serve starts a session with the server dial reaches, lists its tools and
// prompts and registers them in mux (Mux.Replace, group "mcp:" + name), so
// a Worker running mux serves them, also while the server's lists change.
// ctx bounds the start only; the relay runs until Close. A name that clashes
// with a tool mux has already is an error: set Options.Prefix.
func Serve(ctx context.Context, mux *consumer.Mux, dial Dialer, opts *Options) (*Relay, error) {
	r := &Relay{dial: dial, mux: mux, skipped: map[string]bool{}}
	if opts != nil {
		r.opts = *opts
	}
	if r.opts.Sessions <= 0 {
		r.opts.Sessions = 1
	}
	if r.opts.StartTimeout <= 0 {
		r.opts.StartTimeout = time.Minute
	}
	if r.opts.CancelGrace <= 0 {
		r.opts.CancelGrace = 2 * time.Second
	}
	if r.opts.LogLevel == "" {
		r.opts.LogLevel = "info"
	}
	r.log = r.opts.Logger
	r.pool = newPool(r.opts.Sessions, r.opts.CancelGrace, r.open)
	s, err := r.open(ctx)
	if err != nil {
		return nil, err
	}
	if err := r.refresh(ctx, s); err != nil {
		s.retire()
		return nil, err
	}
	r.pool.put(s)
	return r, nil
}

// Name is the server's name (Options.Name, or the one it gave).
func (r *Relay) Name() string { return r.opts.Name }

// Close stops the server's sessions (calls still running fail); call it
// once the Worker running the Mux has returned.
func (r *Relay) Close() error {
	r.pool.close()
	return nil
}

// open starts a session: dial, handshake.
func (r *Relay) open(ctx context.Context) (*session, error) {
	ctx, cancel := context.WithTimeout(ctx, r.opts.StartTimeout)
	defer cancel()
	name := r.opts.Name
	if name == "" {
		name = "(starting)"
	}
	conn, err := r.dial(ctx)
	if err != nil {
		return nil, fmt.Errorf("mcp server %q: start: %w", name, err)
	}
	s := newSession(conn, name, r.log.With().Str("server", name).Logger(), r.listChanged, r.opts.Roots)
	if err := s.initialize(ctx, r.opts.LogLevel); err != nil {
		s.retire()
		if !s.alive() && !errors.Is(ctx.Err(), context.DeadlineExceeded) {
			return nil, s.err
		}
		return nil, fmt.Errorf("mcp server %q: %w", name, err)
	}
	if r.opts.Name == "" {
		r.opts.Name = s.init.ServerInfo.Name
		if r.opts.Name == "" {
			r.opts.Name = "mcp"
		}
	}
	s.rename(r.opts.Name, r.log.With().Str("server", r.opts.Name).Logger())
	s.ready.Store(true)
	s.logger().Info().Str("protocol", s.init.ProtocolVersion).Str("server_version", s.init.ServerInfo.Version).Msg("mcp session started")
	return s, nil
}

// listChanged reads the lists again after the server said they changed.
func (r *Relay) listChanged(s *session, kind string) {
	ctx, cancel := context.WithTimeout(context.Background(), r.opts.StartTimeout)
	defer cancel()
	s.logger().Info().Str("list", kind).Msg("the server's list changed; reading it again")
	if err := r.refresh(ctx, s); err != nil {
		s.logger().Error().Err(err).Msg("the server's changed lists could not be applied; serving the old ones")
	}
}

// refresh lists the server's tools and prompts on s and, if they changed,
// registers the new set.
func (r *Relay) refresh(ctx context.Context, s *session) error {
	r.refreshMu.Lock()
	defer r.refreshMu.Unlock()
	tools, err := list[mcpwire.Tool](ctx, s, "tools/list", "tools", len(s.init.Capabilities.Tools) > 0)
	if err != nil {
		return err
	}
	prompts, err := list[mcpwire.Prompt](ctx, s, "prompts/list", "prompts", len(s.init.Capabilities.Prompts) > 0)
	if err != nil {
		return err
	}
	listed, _ := json.Marshal([]any{tools, prompts})
	if bytes.Equal(listed, r.listed) {
		return nil
	}
	sub := consumer.NewMux()
	var names []string
	for _, t := range tools {
		if err := r.addTool(sub, t, s.upstreamTasks() || s.legacyTasks()); err != nil {
			if !r.skipped[t.Name] {
				r.skipped[t.Name] = true
				s.logger().Warn().Str("tool", t.Name).Str("reason", err.Error()).Msg("tool not relayed")
			}
			continue
		}
		names = append(names, r.opts.Prefix+t.Name)
	}
	for _, p := range prompts {
		if err := r.addPrompt(sub, p); err != nil {
			s.logger().Warn().Str("prompt", p.Name).Str("reason", err.Error()).Msg("prompt not relayed")
			continue
		}
		names = append(names, "prompt/"+r.opts.Prefix+p.Name)
	}
	if err := r.mux.Replace("mcp:"+r.opts.Name, sub); err != nil {
		return fmt.Errorf("mcp server %q: %w (set a prefix for its tools)", r.opts.Name, err)
	}
	r.listed = listed
	sort.Strings(names)
	s.logger().Info().Strs("tools", names).Msg("relaying the server's tools and prompts")
	return nil
}

// list reads a paginated list (all pages) if the server has the feature.
func list[T any](ctx context.Context, s *session, method, field string, has bool) ([]T, error) {
	if !has {
		return nil, nil
	}
	var out []T
	cursor := ""
	for page := 0; page < 1000; page++ {
		raw, err := s.request(ctx, method, &mcpwire.ListParams{Cursor: cursor})
		if err != nil {
			return nil, err
		}
		var res map[string]json.RawMessage
		if err := json.Unmarshal(raw, &res); err != nil {
			return nil, fmt.Errorf("mcp server %q: %s: %w", s.name(), method, err)
		}
		var items []T
		if err := json.Unmarshal(res[field], &items); err != nil && len(res[field]) > 0 {
			return nil, fmt.Errorf("mcp server %q: %s: %w", s.name(), method, err)
		}
		out = append(out, items...)
		cursor = ""
		_ = json.Unmarshal(res["nextCursor"], &cursor)
		if cursor == "" {
			return out, nil
		}
	}
	return nil, fmt.Errorf("mcp server %q: %s does not end", s.name(), method)
}

// addTool registers one of the server's tools in sub.
// upstreamTasks says the server runs calls as tasks the bridge follows
// (the task gateway: 2026-07-28 with the tasks extension, modern.go; or
// 2025-11-25 tasks, legacytask.go).
func (r *Relay) addTool(sub *consumer.Mux, t mcpwire.Tool, upstreamTasks bool) (err error) {
	if t.TaskSupport() == mcpwire.TaskRequired && !upstreamTasks {
		return errors.New("it requires task-augmented execution, and the server declares no tasks the bridge can follow")
	}
	var annotations map[string]any
	if len(t.Annotations) > 0 && json.Unmarshal(t.Annotations, &annotations) != nil {
		return fmt.Errorf("its annotations are not an object: %s", clip(t.Annotations))
	}
	in := t.InputSchema
	if len(in) == 0 || string(in) == "null" {
		in = json.RawMessage(`{"type":"object"}`)
	}
	out := t.OutputSchema
	if string(out) == "null" {
		out = nil
	}
	name := t.Name
	timeout := cmp.Or(r.opts.ToolTimeouts[t.Name], r.opts.Timeout)
	asTask := upstreamTasks && (t.TaskSupport() == mcpwire.TaskOptional || t.TaskSupport() == mcpwire.TaskRequired)
	defer func() {
		if p := recover(); p != nil { // a name or schema consumer refuses
			err = fmt.Errorf("%v", p)
		}
	}()
	consumer.HandleRaw(sub, consumer.Tool{
		Name: r.opts.Prefix + t.Name, Title: t.Title, Description: t.Description,
		InputSchema: in, OutputSchema: out, Annotations: annotations,
		TaskSupport: consumer.TaskOptional, Timeout: timeout, MaxConcurrency: r.opts.Sessions,
	}, func(ctx context.Context, c *consumer.Call[json.RawMessage]) (json.RawMessage, error) {
		args := c.Args
		if len(args) == 0 || string(args) == "null" {
			args = json.RawMessage(`{}`)
		}
		params := map[string]any{"name": name, "arguments": args}
		if asTask { // legacytask.go; a 2026-07-28 server decides itself (modern.go)
			params[taskAugmented] = map[string]any{"ttl": cmp.Or(timeout, time.Hour).Milliseconds()}
		}
		return r.run(ctx, c, "tools/call", params)
	})
	return nil
}

// addPrompt registers one of the server's prompts in sub.
func (r *Relay) addPrompt(sub *consumer.Mux, p mcpwire.Prompt) (err error) {
	var args []consumer.PromptArgument
	if len(p.Arguments) > 0 && json.Unmarshal(p.Arguments, &args) != nil {
		return fmt.Errorf("its arguments are not a list of prompt arguments: %s", clip(p.Arguments))
	}
	name := p.Name
	defer func() {
		if x := recover(); x != nil {
			err = fmt.Errorf("%v", x)
		}
	}()
	consumer.HandlePrompt(sub, consumer.Prompt{
		Name: r.opts.Prefix + p.Name, Title: p.Title, Description: p.Description, Arguments: args,
	}, func(ctx context.Context, c *consumer.Call[map[string]string]) (*consumer.PromptResult, error) {
		args := c.Args
		if args == nil {
			args = map[string]string{}
		}
		raw, err := r.run(ctx, c, "prompts/get", map[string]any{"name": name, "arguments": args})
		if err != nil {
			return nil, err
		}
		var res consumer.PromptResult
		if err := json.Unmarshal(raw, &res); err != nil {
			return nil, &consumer.ProtocolError{Code: vocab.CodeInternalError, Message: fmt.Sprintf("mcp server %q: undecodable prompts/get result: %v", r.opts.Name, err)}
		}
		return &res, nil
	})
	return nil
}

// run sends one call on a session of the pool.
func (r *Relay) run(ctx context.Context, c caller, method string, params map[string]any) (json.RawMessage, error) {
	s, err := r.pool.acquire(ctx)
	if err != nil {
		if ctx.Err() != nil {
			return nil, context.Cause(ctx)
		}
		// The server cannot be started now: like a crash, worth another
		// attempt later (the pool's backoff spaces the starts).
		return nil, consumer.Retryable(err)
	}
	if !s.legacyTasks() {
		delete(params, taskAugmented) // only a 2025-11-25 server with tasks takes it
	}
	token := fmt.Sprintf("mcpq-%s-%d", c.TaskID(), r.calls.Add(1))
	res, err := s.call(ctx, c, method, params, token)
	r.pool.release(s, err == nil)
	return res, err
}
