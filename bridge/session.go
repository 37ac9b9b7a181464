package bridge

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"

	"github.com/mcpqueue/mcpqueue/internal/mcpwire"
	"github.com/mcpqueue/mcpqueue/vocab"
)

// Conn is one MCP session's message stream: whole JSON-RPC messages, in
// order, as the stdio transport carries them.
type Conn interface {
	// Read returns the next message, or an error once the stream has ended.
	Read() ([]byte, error)
	// Write sends one message; it is called from several goroutines.
	Write(msg []byte) error
	// Close ends the session (a child process is stopped).
	Close() error
}

// Dialer opens a new session's Conn with a server: starts a child process,
// connects to an in-process server.
type Dialer func(ctx context.Context) (Conn, error)

// exiter is implemented by a Conn that can tell how its server ended (a
// child process's exit status) once Read has failed.
type exiter interface{ Exit() error }

// ProtocolVersion is the MCP revision the bridge speaks to servers: the
// revision stdio servers speak today.
const ProtocolVersion = mcpwire.Version20251125

// The wire types are package mcpwire's, shared with mcpfront and client.
type (
	message   = mcpwire.Message
	wireError = mcpwire.Error
)

// session is one MCP client session with a server. It serves one call at a
// time: whatever the server sends while a call runs belongs to that call.
type session struct {
	conn Conn
	id   atomic.Pointer[identity] // the server's name is known once it answers initialize
	// changed is told about the server's list_changed notifications.
	changed func(s *session, kind string)
	roots   bool // roots/list is relayed (Options.Roots)
	// ready is set once the session is set up: list changes the server
	// announces before (while it registers its tools) are read then anyway.
	ready atomic.Bool

	mu      sync.Mutex
	nextID  int64
	pending map[int64]chan *message
	running *activeCall
	// abandoned is a cancelled call's request the server has not answered
	// yet: the session is reused only once it has (see quiet).
	abandoned chan *message

	done     chan struct{}
	err      error // why the session ended; set before done is closed
	retiring atomic.Bool
	init     mcpwire.InitializeResult // what the server says about itself
}

func newSession(conn Conn, server string, log zerolog.Logger, changed func(*session, string), roots bool) *session {
	s := &session{conn: conn, changed: changed, roots: roots,
		pending: map[int64]chan *message{}, done: make(chan struct{})}
	s.rename(server, log)
	go s.read()
	return s
}

// identity is how a session's messages and log lines name the server.
type identity struct {
	server string
	log    zerolog.Logger
}

func (s *session) rename(server string, log zerolog.Logger) {
	s.id.Store(&identity{server: server, log: log})
}

func (s *session) name() string { return s.id.Load().server }

func (s *session) logger() *zerolog.Logger { return &s.id.Load().log }

// initialize performs the handshake and sets the server's log level.
// The capabilities are what the bridge relays to the queue's clients, per
// call: elicitation and sampling, and roots if s.roots.
func (s *session) initialize(ctx context.Context, logLevel string) error {
	caps := mcpwire.ClientCapabilities{Elicitation: mcpwire.Empty, Sampling: mcpwire.Empty}
	if s.roots {
		caps.Roots = mcpwire.Empty
	}
	p := mcpwire.InitializeParams{ProtocolVersion: ProtocolVersion}
	p.Capabilities, _ = json.Marshal(caps)
	p.ClientInfo, _ = json.Marshal(mcpwire.Implementation{Name: "mcpqueue-bridge", Version: "1"})
	raw, err := s.request(ctx, "initialize", &p)
	if err != nil {
		return fmt.Errorf("initialize: %w", err)
	}
	if err := json.Unmarshal(raw, &s.init); err != nil {
		return fmt.Errorf("initialize: undecodable result: %w", err)
	}
	if err := s.notify("notifications/initialized", mcpwire.Empty); err != nil {
		return err
	}
	if len(s.init.Capabilities.Logging) > 0 && logLevel != "" && logLevel != "off" {
		if _, err := s.request(ctx, "logging/setLevel", &mcpwire.SetLevelParams{Level: logLevel}); err != nil {
			s.logger().Warn().Err(err).Msg("logging/setLevel refused")
		}
	}
	return nil
}

// upstreamTasks reports whether the server runs calls as tasks of its own
// that the Conn follows (2026-07-28 with the tasks extension: modern.go).
func (s *session) upstreamTasks() bool {
	_, ext := s.init.Capabilities.Extensions[mcpwire.TasksExtension]
	return s.init.ProtocolVersion == mcpwire.Version20260728 && ext
}

// read dispatches what the server sends until the stream ends.
func (s *session) read() {
	for {
		raw, err := s.conn.Read()
		if err != nil {
			s.end(err)
			return
		}
		var m message
		if err := json.Unmarshal(raw, &m); err != nil {
			s.logger().Warn().Err(err).Str("message", clip(raw)).Msg("undecodable message from the server; ignored")
			continue
		}
		switch {
		case m.IsResponse():
			s.deliver(&m)
		case m.IsRequest():
			go s.serve(&m)
		case m.IsNotification():
			s.notification(&m)
		}
	}
}

// end records why the session ended and wakes everyone waiting on it.
func (s *session) end(readErr error) {
	err := readErr
	if x, ok := s.conn.(exiter); ok {
		err = x.Exit()
	}
	s.mu.Lock()
	s.err = fmt.Errorf("mcp server %q: %w", s.name(), err)
	s.mu.Unlock()
	close(s.done)
}

// alive reports whether the session still runs.
func (s *session) alive() bool {
	select {
	case <-s.done:
		return false
	default:
		return true
	}
}

// retire closes the session on purpose (not a failure of the server's).
func (s *session) retire() {
	s.retiring.Store(true)
	if err := s.conn.Close(); err != nil {
		s.logger().Debug().Err(err).Msg("closing the session")
	}
	<-s.done
}

func (s *session) retired() bool { return s.retiring.Load() }

// hasAbandoned reports whether a cancelled call's answer is outstanding.
func (s *session) hasAbandoned() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.abandoned != nil
}

func (s *session) deliver(m *message) {
	id, err := strconv.ParseInt(string(m.ID), 10, 64)
	if err != nil {
		return // not an id we sent
	}
	s.mu.Lock()
	ch := s.pending[id]
	delete(s.pending, id)
	s.mu.Unlock()
	if ch != nil {
		ch <- m
	}
}

func (s *session) write(v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	if err := s.conn.Write(b); err != nil {
		// A stream that cannot be written is no session any more: end it,
		// so the calls on it fail (Retryable) rather than wait.
		go func() { _ = s.conn.Close() }()
		return fmt.Errorf("mcp server %q: write: %w", s.name(), err)
	}
	return nil
}

func (s *session) notify(method string, params any) error {
	return s.write(mcpwire.NewRequest(nil, method, params))
}

// send writes a request; its answer arrives on the returned channel.
func (s *session) send(method string, params any) (int64, chan *message, error) {
	ch := make(chan *message, 1)
	s.mu.Lock()
	s.nextID++
	id := s.nextID
	s.pending[id] = ch
	s.mu.Unlock()
	if err := s.write(mcpwire.NewRequest(id, method, params)); err != nil {
		s.forget(id)
		return 0, nil, err
	}
	return id, ch, nil
}

func (s *session) forget(id int64) {
	s.mu.Lock()
	delete(s.pending, id)
	s.mu.Unlock()
}

// request sends a request and waits for its result.
func (s *session) request(ctx context.Context, method string, params any) (json.RawMessage, error) {
	id, ch, err := s.send(method, params)
	if err != nil {
		return nil, err
	}
	select {
	case m := <-ch:
		if e := m.Err(); e != nil {
			return nil, fmt.Errorf("mcp server %q: %s: %w", s.name(), method, e)
		}
		return m.Result, nil
	case <-s.done:
		return nil, s.err
	case <-ctx.Done():
		s.forget(id)
		_ = s.notify("notifications/cancelled", cancelled(id, cause(ctx)))
		return nil, context.Cause(ctx)
	}
}

// cancel tells the server a request is cancelled; its answer, if one
// still comes, is waited for by quiet.
func (s *session) cancel(id int64, ch chan *message, reason string) {
	s.mu.Lock()
	s.abandoned = ch
	s.mu.Unlock()
	go func() { // the handler need not wait for a server that reads slowly
		if err := s.notify("notifications/cancelled", cancelled(id, reason)); err == nil {
			s.logger().Info().Int64("request", id).Str("reason", reason).Msg("sent notifications/cancelled")
		}
	}()
}

// cancelled is the params of notifications/cancelled for request id.
func cancelled(id int64, reason string) *mcpwire.CancelledParams {
	return &mcpwire.CancelledParams{RequestID: strconv.AppendInt(nil, id, 10), Reason: reason}
}

// quiet reports whether the session may serve another call: it is alive
// and the server answered the last cancelled request, if any, within grace.
func (s *session) quiet(grace time.Duration) bool {
	s.mu.Lock()
	ch := s.abandoned
	s.abandoned = nil
	s.mu.Unlock()
	if ch == nil {
		return s.alive()
	}
	t := time.NewTimer(grace)
	defer t.Stop()
	select {
	case <-ch:
		return s.alive()
	case <-s.done:
		return false
	case <-t.C:
		return false
	}
}

// serve answers a request of the server's.
func (s *session) serve(m *message) {
	var result json.RawMessage
	var rerr *wireError
	switch {
	case m.Method == "ping":
		result = json.RawMessage(`{}`)
	case m.Method == "roots/list" && !s.roots:
		rerr = &wireError{Code: vocab.CodeMethodNotFound, Message: "roots are not relayed to this server (the bridge's roots option)"}
	case m.Method == "elicitation/create" || m.Method == "sampling/createMessage" || m.Method == "roots/list":
		s.mu.Lock()
		a := s.running
		s.mu.Unlock()
		if a == nil {
			rerr = &wireError{Code: vocab.CodeInternalError, Message: "mcpqueue relays " + m.Method + " to its client only during a tool call or prompt, and none is running"}
			break
		}
		var answer bool
		if result, rerr, answer = a.ask(m); !answer {
			return // the server cancelled its request: no answer is due
		}
	default:
		rerr = &wireError{Code: vocab.CodeMethodNotFound, Message: "method not found: " + m.Method}
	}
	reply := &mcpwire.Response{JSONRPC: mcpwire.Version, ID: m.ID, Error: rerr}
	if rerr == nil {
		reply.Result = result
	}
	if err := s.write(reply); err != nil && s.alive() {
		s.logger().Warn().Err(err).Str("method", m.Method).Msg("answering the server's request failed")
	}
}

func (s *session) notification(m *message) {
	s.mu.Lock()
	a := s.running
	s.mu.Unlock()
	switch m.Method {
	case "notifications/progress":
		if a != nil {
			a.progress(m.Params)
		}
	case "notifications/message":
		s.logged(a, m.Params)
	case "notifications/cancelled":
		if a != nil {
			a.cancelled(m.Params)
		}
	case "notifications/tools/list_changed", "notifications/prompts/list_changed":
		if s.ready.Load() {
			go s.changed(s, strings.TrimSuffix(strings.TrimPrefix(m.Method, "notifications/"), "/list_changed"))
		}
	default:
		s.logger().Debug().Str("method", m.Method).Msg("server notification ignored")
	}
}

// logged writes a notifications/message of the server's to the worker's
// log, and forwards it to the call's client if it asked for logs.
func (s *session) logged(a *activeCall, params json.RawMessage) {
	var p mcpwire.LogMessageParams
	_ = json.Unmarshal(params, &p)
	var ev *zerolog.Event
	switch p.Level {
	case "debug":
		ev = s.logger().Debug()
	case "info", "notice":
		ev = s.logger().Info()
	case "warning":
		ev = s.logger().Warn()
	default:
		ev = s.logger().Error()
	}
	if p.Logger != "" {
		ev = ev.Str("logger", p.Logger)
	}
	if json.Valid(p.Data) {
		ev = ev.RawJSON("data", p.Data)
	}
	if a != nil {
		ev = ev.Str("task", a.taskID)
		if err := a.c.Log(a.ctx, p.Level, p.Data); err != nil {
			s.logger().Debug().Err(err).Msg("forwarding a server log message failed")
		}
	}
	ev.Str("level_mcp", p.Level).Msg("server log")
}

// forwarder is a Conn that forwards the running call's owner upstream
// (HTTPServer.ForwardIdentity).
type forwarder interface{ forward(owner string) }

// attach makes a the session's running call.
func (s *session) attach(a *activeCall) {
	s.mu.Lock()
	s.running = a
	s.mu.Unlock()
	if f, ok := s.conn.(forwarder); ok {
		f.forward(a.c.Owner())
	}
}

func (s *session) detach() {
	s.mu.Lock()
	s.running = nil
	s.mu.Unlock()
	if f, ok := s.conn.(forwarder); ok {
		f.forward("")
	}
}

func cause(ctx context.Context) string {
	if c := context.Cause(ctx); c != nil && !errors.Is(c, context.Canceled) {
		return c.Error()
	}
	return "cancelled"
}

func clip(b []byte) string {
	if len(b) > 200 {
		return string(b[:200]) + "…"
	}
	return string(b)
}
