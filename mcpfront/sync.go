package mcpfront

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"

	"github.com/mcpqueue/mcpqueue/broker"
	"github.com/mcpqueue/mcpqueue/producer"
	"github.com/mcpqueue/mcpqueue/taskstate"
)

// syncCall runs a tool call for a client that did not negotiate tasks: the
// call still becomes a task record and a job (one execution path), and the
// reply waits for the record to turn terminal, bounded by SyncTimeout. If the
// client asked for progress and accepts SSE, progress notifications stream
// ahead of the result.
func (s *Server) syncCall(ctx context.Context, w http.ResponseWriter, r *http.Request, c *call, req *producer.Request) {
	ctx, cancel := context.WithTimeout(ctx, s.cfg.SyncTimeout)
	defer cancel()

	var stream *sseWriter
	if _, wantsProgress := req.Meta["progressToken"]; wantsProgress && acceptsSSE(r) {
		stream = newSSE(w)
		sub, err := s.bus.Subscribe(ctx, broker.TopicProgress, req.ID, func(_ string, data []byte) {
			stream.event(notification("notifications/progress", data))
		})
		if err != nil {
			s.internalError(w, c.req.ID, "subscribing to progress", err)
			return
		}
		defer sub.Close()
	}
	reply := func(v any) {
		if stream != nil {
			b, _ := json.Marshal(v)
			stream.final(b)
			return
		}
		switch v := v.(type) {
		case *rpcError:
			writeError(w, c.req.ID, v)
		default:
			writeResult(w, c.req.ID, v)
		}
	}
	replyErr := func(e *rpcError) {
		if stream != nil {
			reply(response{JSONRPC: "2.0", ID: c.req.ID, Error: e})
			return
		}
		reply(e)
	}

	if _, err := s.prod.Create(ctx, req); err != nil {
		s.log.Error().Err(err).Str("tool", req.Tool).Msg("starting sync call")
		replyErr(errorf(codeInternal, http.StatusInternalServerError, "internal error: the call could not be started"))
		return
	}
	final, err := s.waitTerminal(ctx, req.ID)
	if err != nil {
		// Nobody will read this task: stop it. A client that went away
		// cancels its request (2026-07-28: closing the stream is cancel).
		dctx, dcancel := detach(ctx)
		defer dcancel()
		_, _ = s.prod.Cancel(dctx, req.ID, "the waiting client went away or the wait timed out")
		if errors.Is(err, context.DeadlineExceeded) {
			replyErr(errorf(codeInternal, http.StatusOK, fmt.Sprintf("tool %q did not finish within %s; the call was cancelled", req.Tool, s.cfg.SyncTimeout)))
		}
		return
	}
	switch final.Status {
	case taskstate.Completed:
		res := withResultType(final.Result, resultComplete)
		if stream != nil {
			reply(response{JSONRPC: "2.0", ID: c.req.ID, Result: res})
			return
		}
		reply(res)
	case taskstate.Failed:
		e := errorf(codeInternal, http.StatusOK, "tool failed")
		if final.Error != nil {
			e = &rpcError{Code: final.Error.Code, Message: final.Error.Message}
			if len(final.Error.Data) > 0 {
				e.Data = final.Error.Data
			}
		}
		replyErr(e)
	default:
		replyErr(errorf(codeInternal, http.StatusOK, "the call was cancelled"))
	}
}

// waitTerminal blocks until the task is terminal or ctx ends.
func (s *Server) waitTerminal(ctx context.Context, id string) (*taskstate.Task, error) {
	ch, err := s.store.Watch(ctx, id)
	if err != nil {
		return nil, err
	}
	for t := range ch {
		if t.Status.Terminal() {
			return t, nil
		}
	}
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	return nil, taskstate.ErrNotFound
}

// withResultType adds "resultType" to a stored CallToolResult object.
func withResultType(result json.RawMessage, rt string) json.RawMessage {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(result, &m); err != nil || m == nil {
		m = map[string]json.RawMessage{"content": json.RawMessage("[]")}
	}
	m["resultType"], _ = json.Marshal(rt)
	b, _ := json.Marshal(m)
	return b
}

func notification(method string, params json.RawMessage) []byte {
	b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "method": method, "params": params})
	return b
}

func acceptsSSE(r *http.Request) bool {
	for _, v := range r.Header.Values("Accept") {
		if strings.Contains(v, "text/event-stream") {
			return true
		}
	}
	return false
}

// sseWriter writes JSON-RPC messages as server-sent events. It is safe for
// concurrent use (progress arrives on bus goroutines).
type sseWriter struct {
	mu      sync.Mutex
	w       http.ResponseWriter
	started bool
	done    bool // the final message is written; later events are dropped
}

// final writes the last message of the stream.
func (s *sseWriter) final(data []byte) {
	s.event(data)
	s.mu.Lock()
	s.done = true
	s.mu.Unlock()
}

func newSSE(w http.ResponseWriter) *sseWriter { return &sseWriter{w: w} }

func (s *sseWriter) event(data []byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.done {
		return
	}
	if !s.started {
		h := s.w.Header()
		h.Set("Content-Type", "text/event-stream")
		h.Set("Cache-Control", "no-cache")
		h.Set("X-Accel-Buffering", "no")
		s.w.WriteHeader(http.StatusOK)
		s.started = true
	}
	_, _ = fmt.Fprintf(s.w, "event: message\ndata: %s\n\n", data)
	if f, ok := s.w.(http.Flusher); ok {
		f.Flush()
	}
}
