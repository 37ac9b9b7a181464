package mcpfront

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"
	"time"

	"github.com/mcpqueue/mcpqueue/broker"
	"github.com/mcpqueue/mcpqueue/producer"
	"github.com/mcpqueue/mcpqueue/taskstate"
	"github.com/mcpqueue/mcpqueue/vocab"
)

// syncAnswer answers a 2026-07-28 request served inline: rerr if set, else
// the api's own result when there is no job (req nil), else, once the owner
// may start a task, the job through syncCall.
func (s *Server) syncAnswer(ctx context.Context, w http.ResponseWriter, r *http.Request, c *call, rerr *rpcError, own json.RawMessage, req *producer.Request, answers map[string]json.RawMessage) {
	switch {
	case rerr != nil:
		writeError(w, c.req.ID, rerr)
	case req == nil:
		writeResult(w, c.req.ID, reshape(own, resultComplete, s.appendResultMeta(nil)))
	case !s.refuseTask(ctx, w, c.req.ID, c.owner):
		req.Era, req.Mode, req.Meta = taskstate.Era20260728, taskstate.ModeSync, jobMeta(c.meta, answers)
		s.syncCall(ctx, w, r, c, req, answers)
	}
}

// syncCall serves a call whose client waits inline (ModeSync), or which
// gathers its input inline before becoming a task (ModeGather). The call
// still becomes a task record and a job (one execution path); the reply waits
// for the record to turn terminal — or, in ModeGather, to become a task —
// bounded by HandleAfter, past which the call is handed over (mirror.go).
// Notifications the handler sends (progress, logs) stream ahead of the
// result when the client accepts SSE.
func (s *Server) syncCall(ctx context.Context, w http.ResponseWriter, r *http.Request, c *call, req *producer.Request, answers map[string]json.RawMessage) {
	follow := s.followOf(req, c.tasksExt)
	ctx, cancel := context.WithTimeout(ctx, s.cfg.HandleAfter)
	defer cancel()

	out := &replier{w: w, id: c.req.ID}
	_, progress := req.Meta[vocab.MetaProgressToken]
	_, logs := req.Meta[vocab.MetaLogLevel]
	ended := make(chan struct{})
	if (progress || logs) && acceptsSSE(r) {
		out.stream = &sseWriter{w: w}
		var once sync.Once
		sub, err := s.bus.Subscribe(ctx, broker.TopicNotify, req.ID, func(_ string, data []byte) {
			if len(data) == 0 { // the worker's end marker follows its outcome write
				once.Do(func() { close(ended) })
				return
			}
			out.stream.event(data)
		})
		if err != nil {
			s.internalError(w, c.req.ID, "subscribing to notifications", err)
			return
		}
		defer sub.Close()
	}

	// Follow before creating: no version is missed, and no read is needed.
	versions, err := s.store.Follow(ctx, req.ID)
	if err != nil {
		s.internalError(w, c.req.ID, "following the call's record", err)
		return
	}
	versions, rerr := s.startCall(ctx, req, versions) // idem.go
	if rerr != nil {
		out.fail(rerr)
		return
	}
	final, err := waitCall(ctx, versions, req.Mode == taskstate.ModeGather)
	if err != nil {
		if errors.Is(err, context.DeadlineExceeded) && s.handOver(ctx, out, req, follow, resultComplete) {
			return // the task runs on
		}
		// Nobody will read this task: stop it. A client that went away
		// cancels its request (2026-07-28: closing the stream is cancel).
		dctx, dcancel := detach(ctx)
		defer dcancel()
		fate := s.abandon(dctx, req) // idem.go: cancelled unless keyed
		if errors.Is(err, context.DeadlineExceeded) {
			out.fail(errorf(vocab.CodeInternalError, http.StatusOK, fmt.Sprintf("tool %q did not finish within %s; %s", req.Tool, s.cfg.HandleAfter, fate)))
		} else if e := shutdownError(ctx, "the call was cancelled: call again"); e != nil {
			out.fail(e)
		}
		return
	}
	if out.stream != nil && final.Status.Terminal() {
		// Notifications and the outcome travel different paths: let the
		// notifications sent before the outcome arrive first.
		select {
		case <-ended:
		case <-time.After(notifyDrain):
		}
	}
	handedOver := req.Mode == taskstate.ModeGather && final.Mode == taskstate.ModeTask
	// The reply streams past the wait's deadline: a client that stops
	// reading is cut off by WriteTimeout, one that leaves by its write failing.
	if !handedOver && s.replySpliced(context.WithoutCancel(ctx), out, final, resultComplete, s.appendResultMeta(nil)) {
		s.durations.observe(final) // a plain result: never an input request
		return
	}
	resolved, release, err := s.resolved(ctx, final)
	if err != nil {
		s.log.Error().Err(err).Msg("an inline call's result")
		out.fail(resultMissing(err))
		return
	}
	defer release()
	final = resolved
	switch {
	case handedOver:
		// The handler continued as a task (it may even have finished since:
		// the watch hands over only the newest version).
		out.result(s.createTaskResult(final))
	case final.Status == taskstate.Completed && isInputRequired(final.Result):
		reply, err := s.inputRequiredReply(c.owner, taskstate.CatalogKey(req.Kind, req.Tool), req.Arguments, answers, final.Result)
		if err != nil {
			out.fail(errorf(vocab.CodeInternalError, http.StatusOK, "internal error: unreadable input request"))
			return
		}
		out.result(reply)
	case final.Status == taskstate.Completed:
		s.durations.observe(final)
		out.result(reshape(final.Result, resultComplete, s.appendResultMeta(nil)))
	case final.Status == taskstate.Failed:
		s.durations.observe(final)
		out.fail(storedError(final.Error))
	default:
		out.fail(errorf(vocab.CodeInternalError, http.StatusOK, "the call was cancelled"))
	}
}

// notifyDrain bounds the wait for a finished call's last notifications.
const notifyDrain = 2 * time.Second

// ErrShuttingDown is the cause of a request context's cancellation
// (context.WithCancelCause on http.Server.BaseContext) that tells a request still
// waiting for a task — an inline call, a 2025-11-25 tasks/result stream —
// that the server is going away: it answers with a JSON-RPC error saying so
// (shutdownError) instead of leaving the connection to be cut.
var ErrShuttingDown = errors.New("mcpfront: server shutting down")

// shutdownError is the answer of a request ended by ErrShuttingDown, or nil
// when ctx ended for another reason.
func shutdownError(ctx context.Context, what string) *rpcError {
	if !errors.Is(context.Cause(ctx), ErrShuttingDown) {
		return nil
	}
	return errorf(vocab.CodeInternalError, http.StatusOK, "the server is shutting down; "+what)
}

// storedError turns a failed record's error into the reply error; an MCP
// capability error keeps its HTTP 400.
func storedError(e *taskstate.RPCError) *rpcError {
	if e == nil {
		return errorf(vocab.CodeInternalError, http.StatusOK, "tool failed")
	}
	out := &rpcError{wireError: wireError{Code: e.Code, Message: e.Message}}
	if len(e.Data) > 0 {
		out.Data = e.Data
	}
	switch e.Code {
	case vocab.CodeMissingCapability, vocab.CodeHeaderMismatch, vocab.CodeUnsupportedVersion:
		out.status = http.StatusBadRequest
	}
	return out
}

// waitCall blocks until the task is terminal, or (gather) a task, or ctx ends.
func waitCall(ctx context.Context, versions <-chan *taskstate.Task, gather bool) (*taskstate.Task, error) {
	for t := range versions {
		if t.Status.Terminal() || gather && t.Mode == taskstate.ModeTask {
			return t, nil
		}
	}
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	return nil, taskstate.ErrNotFound
}

// replier writes the final answer of a request as JSON, or as the last
// event of its SSE stream when one was opened.
type replier struct {
	w      http.ResponseWriter
	id     json.RawMessage
	stream *sseWriter
}

func (r *replier) result(v any) {
	if r.stream != nil {
		b, _ := json.Marshal(response{JSONRPC: "2.0", ID: r.id, Result: v})
		r.stream.final(b)
		return
	}
	writeResult(r.w, r.id, v)
}

// splice writes the final answer with a result whose members come from the
// blob p, between head and tail (plainBlob.splice), so that the result is
// never whole in memory.
func (r *replier) splice(p *plainBlob, head, tail []byte) error {
	env := append([]byte(`{"jsonrpc":"2.0","id":`), r.id...)
	env = append(env, `,"result":`...)
	env = append(env, head...)
	tail = append(tail[:len(tail):len(tail)], '}')
	if r.stream != nil {
		return r.stream.finalFrom(func(w io.Writer) error { return p.splice(w, env, tail) })
	}
	r.w.Header()["Content-Type"] = []string{"application/json"}
	r.w.WriteHeader(http.StatusOK)
	return p.splice(r.w, env, tail)
}

func (r *replier) fail(e *rpcError) {
	if r.stream != nil {
		b, _ := json.Marshal(response{JSONRPC: "2.0", ID: r.id, Error: e.wire()})
		r.stream.final(b)
		return
	}
	writeError(r.w, r.id, e)
}

// sseWriter writes JSON-RPC messages as server-sent events, one data line
// each. It is safe for concurrent use (notifications arrive on bus
// goroutines) and drops anything after the final message.
type sseWriter struct {
	mu      sync.Mutex
	w       http.ResponseWriter
	started bool
	done    bool
}

func (s *sseWriter) event(data []byte) { s.write(data, false) }

// final writes the last message of the stream.
func (s *sseWriter) final(data []byte) { s.write(data, true) }

func (s *sseWriter) write(data []byte, last bool) {
	_ = s.writeFrom(func(w io.Writer) error {
		_, err := w.Write(data)
		return err
	}, last)
}

// finalFrom writes the last message of the stream as data writes it:
// piece by piece, for a message too large to build in memory.
func (s *sseWriter) finalFrom(data func(io.Writer) error) error { return s.writeFrom(data, true) }

// eventFrom writes a message as data writes it.
func (s *sseWriter) eventFrom(data func(io.Writer) error) error { return s.writeFrom(data, false) }

func (s *sseWriter) writeFrom(data func(io.Writer) error, last bool) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.done {
		return nil
	}
	s.done = last
	if !s.started {
		h := s.w.Header()
		h.Set("Content-Type", "text/event-stream")
		h.Set("Cache-Control", "no-cache")
		h.Set("X-Accel-Buffering", "no")
		s.w.WriteHeader(http.StatusOK)
		s.started = true
	}
	if _, err := io.WriteString(s.w, "event: message\ndata: "); err != nil {
		return err
	}
	err := data(oneLine{s.w})
	if err == nil {
		_, err = io.WriteString(s.w, "\n\n")
	}
	if f, ok := s.w.(http.Flusher); ok {
		f.Flush()
	}
	return err
}

// oneLine writes JSON as one SSE data line: a line break can only be
// whitespace between tokens in valid JSON (a string escapes its own), so
// it becomes a space.
type oneLine struct{ w io.Writer }

func (o oneLine) Write(b []byte) (int, error) {
	if bytes.IndexByte(b, '\n') < 0 && bytes.IndexByte(b, '\r') < 0 {
		return o.w.Write(b)
	}
	c := bytes.Clone(b) // byte by byte: a chunk may end inside a UTF-8 sequence
	for i, x := range c {
		if x == '\n' || x == '\r' {
			c[i] = ' '
		}
	}
	return o.w.Write(c)
}
