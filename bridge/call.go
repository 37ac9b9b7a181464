package bridge

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"sync"

	"github.com/mcpqueue/mcpqueue/consumer"
	"github.com/mcpqueue/mcpqueue/internal/mcpwire"
	"github.com/mcpqueue/mcpqueue/vocab"
)

// caller is what a relayed call uses of its consumer.Call.
type caller interface {
	TaskID() string
	Owner() string
	Progress(ctx context.Context, progress, total float64, message string) error
	Log(ctx context.Context, level string, data any) error
	Ask(ctx context.Context, reqs ...consumer.InputRequest) ([]json.RawMessage, error)
}

// activeCall is the call a session runs: where the server's progress, logs
// and input requests go.
type activeCall struct {
	c      caller
	taskID string
	token  string // the progressToken the request carries
	ctx    context.Context
	stop   context.CancelFunc
	// aborted carries why the call has to end before the server answers
	// (an input request that the client must answer inline, or cannot).
	aborted chan error

	askMu sync.Mutex // asks go to the client in the order they came

	mu     sync.Mutex
	asks   map[string]context.CancelFunc // the server's open requests, by id
	latest *progressUpdate               // not reported yet
	wake   chan struct{}
	finish chan struct{} // closed when the server answered: report the rest, return
	idle   chan struct{} // closed when the progress reporter has returned
}

type progressUpdate struct {
	progress, total float64
	message         string
}

// call runs one request (tools/call, prompts/get) of c on the session and
// returns its result. The server's requests and notifications meanwhile go
// to c. A session that ends during the call fails it with
// consumer.Retryable; ctx ending cancels the request on the server.
func (s *session) call(ctx context.Context, c caller, method string, params map[string]any, token string) (json.RawMessage, error) {
	a := &activeCall{c: c, taskID: c.TaskID(), token: token, aborted: make(chan error, 1),
		asks: map[string]context.CancelFunc{}, wake: make(chan struct{}, 1), finish: make(chan struct{}), idle: make(chan struct{})}
	a.ctx, a.stop = context.WithCancel(ctx)
	go a.report()
	s.attach(a)
	defer func() {
		s.detach()
		a.stop() // ends the asks still open and the reporter
		<-a.idle
	}()

	params["_meta"] = map[string]any{"progressToken": token}
	id, ch, err := s.send(method, params)
	if err != nil {
		return nil, consumer.Retryable(err) // the session is ending (see write)
	}
	select {
	case m := <-ch:
		if _, asTask := params[taskAugmented]; asTask && m.Err() == nil { // legacytask.go
			return s.followTask(ctx, a, m.Result)
		}
		a.flush()
		return outcome(m)
	case <-s.done:
		select {
		case m := <-ch: // answered just before the end: the answer counts
			a.flush()
			return outcome(m)
		default:
		}
		return nil, consumer.Retryable(fmt.Errorf("%w, during %s", s.err, method))
	case err := <-a.aborted:
		s.cancel(id, ch, err.Error())
		return nil, err
	case <-ctx.Done():
		s.cancel(id, ch, cause(ctx))
		return nil, context.Cause(ctx)
	}
}

// outcome is a call's result, or its JSON-RPC error as the task's.
func outcome(m *message) (json.RawMessage, error) {
	if e := m.Err(); e != nil {
		var data any
		if len(e.Data) > 0 {
			data = e.Data
		}
		return nil, &consumer.ProtocolError{Code: e.Code, Message: e.Message, Data: data}
	}
	return m.Result, nil
}

// ask relays one of the server's requests to the client through the
// task (Call.Ask). answer is false when the server cancelled the request
// meanwhile: no answer is due then.
func (a *activeCall) ask(m *message) (result json.RawMessage, rerr *wireError, answer bool) {
	ctx, cancel := context.WithCancel(a.ctx)
	id := string(m.ID)
	a.mu.Lock()
	a.asks[id] = cancel
	a.mu.Unlock()
	defer func() {
		a.mu.Lock()
		delete(a.asks, id)
		a.mu.Unlock()
		cancel()
	}()
	a.askMu.Lock()
	defer a.askMu.Unlock()

	params := m.Params
	if len(params) == 0 {
		params = json.RawMessage(`{}`)
	}
	answers, err := a.c.Ask(ctx, consumer.InputRequest{Method: m.Method, Params: params})
	var pe *consumer.ProtocolError
	switch {
	case err == nil:
		return answers[0], nil, true
	case errors.Is(err, consumer.ErrInputRequired), errors.Is(err, consumer.ErrInputTimeout), errors.Is(err, consumer.ErrParked),
		errors.As(err, &pe) && pe.Code == vocab.CodeMissingCapability:
		// The run ends here: the client answers inline and retries, the
		// answer never came, the task parked to wait for it without a
		// slot (the call is relayed again from the top when it comes), or
		// the client cannot answer at all.
		select {
		case a.aborted <- err:
		default:
		}
		return nil, &wireError{Code: vocab.CodeInternalError, Message: "mcpqueue: the call ends: " + err.Error()}, true
	case a.ctx.Err() == nil && ctx.Err() != nil:
		return nil, nil, false
	case errors.As(err, &pe):
		return nil, &wireError{Code: pe.Code, Message: pe.Message}, true
	default:
		return nil, &wireError{Code: vocab.CodeInternalError, Message: err.Error()}, true
	}
}

// cancelled handles the server cancelling one of its own requests.
func (a *activeCall) cancelled(params json.RawMessage) {
	var p mcpwire.CancelledParams
	if json.Unmarshal(params, &p) != nil {
		return
	}
	a.mu.Lock()
	cancel := a.asks[string(p.RequestID)]
	a.mu.Unlock()
	if cancel != nil {
		cancel()
	}
}

// progress notes a progress notification for the call; report writes the
// newest one, so a server faster than the store is coalesced.
func (a *activeCall) progress(params json.RawMessage) {
	var p mcpwire.ProgressParams
	if json.Unmarshal(params, &p) != nil {
		return
	}
	if tok, err := strconv.Unquote(string(p.ProgressToken)); err != nil || tok != a.token {
		return // another call's (a cancelled one still running)
	}
	msg := p.Message
	if msg == "" {
		msg = "progress " + strconv.FormatFloat(p.Progress, 'f', -1, 64)
		if p.Total > 0 {
			msg += "/" + strconv.FormatFloat(p.Total, 'f', -1, 64)
		}
	}
	a.note(&progressUpdate{progress: p.Progress, total: p.Total, message: msg})
}

// note keeps u as the newest progress to report.
func (a *activeCall) note(u *progressUpdate) {
	a.mu.Lock()
	a.latest = u
	a.mu.Unlock()
	select {
	case a.wake <- struct{}{}:
	default:
	}
}

// flush reports the progress the server sent before its answer.
func (a *activeCall) flush() {
	close(a.finish)
	<-a.idle
}

func (a *activeCall) report() {
	defer close(a.idle)
	for last := false; !last; {
		select {
		case <-a.ctx.Done():
			return
		case <-a.finish:
			last = true
		case <-a.wake:
		}
		a.mu.Lock()
		u := a.latest
		a.latest = nil
		a.mu.Unlock()
		if u != nil {
			_ = a.c.Progress(a.ctx, u.progress, u.total, u.message)
		}
	}
}
