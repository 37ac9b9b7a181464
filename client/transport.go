package client

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/mcpqueue/mcpqueue/internal/mcpwire"
)

// Error is a JSON-RPC error a server answered with, or an HTTP error
// without one (Code 0). A task that failed returns its error as an *Error.
type Error struct {
	Code    int             `json:"code"`
	Message string          `json:"message"`
	Data    json.RawMessage `json:"data,omitempty"`
	// HTTPStatus is the status of the HTTP response that carried the error
	// (0 for a task's own error, read from tasks/get).
	HTTPStatus int `json:"-"`
}

func (e *Error) Error() string {
	if e.Code == 0 {
		return fmt.Sprintf("client: HTTP %d: %s", e.HTTPStatus, e.Message)
	}
	return fmt.Sprintf("client: %s (code %d)", e.Message, e.Code)
}

// fromWire is a JSON-RPC error object as an *Error; nil for none.
func fromWire(e *mcpwire.Error) *Error {
	if e == nil {
		return nil
	}
	return &Error{Code: e.Code, Message: e.Message, Data: e.Data}
}

// wire is e as a JSON-RPC error object.
func (e *Error) wire() *mcpwire.Error {
	return &mcpwire.Error{Code: e.Code, Message: e.Message, Data: e.Data}
}

// message is one JSON-RPC message read: a request, a notification or a
// response.
type message = mcpwire.Message

// rpc is one request to send.
type rpc struct {
	era    string            // Version2026, or a 2025 revision
	method string            // "" with resp: a response to a server request
	params map[string]any    // encoded as params
	name   string            // Mcp-Name (2026-07-28)
	key    string            // Idempotency-Key, "" for none
	header map[string]string // more headers (Mcp-Param-*)
	resp   *mcpwire.Response // a response to send instead of a request (2025)
	// serve answers a server-to-client request that arrives on the
	// response stream (2025-11-25); nil: refuse it.
	serve func(ctx context.Context, m *message) (json.RawMessage, error)
}

// errTransient marks a failure worth sending the same request again for.
type transientError struct {
	err        error
	retryAfter time.Duration
}

func (e *transientError) Error() string { return e.err.Error() }
func (e *transientError) Unwrap() error { return e.err }

// call sends r and returns the result of its response. On the 2025 wire a
// request its session is gone for (HTTP 404) opens a new session and is
// sent once more; a task of the old session is then unknown, as it would be
// to any other session.
func (c *Client) call(ctx context.Context, r *rpc) (json.RawMessage, error) {
	session := c.sessionID()
	res, err := c.callRetrying(ctx, r)
	var e *Error
	if r.era == Version2026 || session == "" || r.method == "initialize" || strings.HasPrefix(r.method, "notifications/") ||
		!errors.As(err, &e) || e.HTTPStatus != http.StatusNotFound {
		return res, err
	}
	if err := c.renegotiate(ctx, session); err != nil {
		return nil, err
	}
	return c.callRetrying(ctx, r)
}

// callRetrying sends r, sending it again after a transient failure (up to
// the client's retries), and returns the result of the response.
func (c *Client) callRetrying(ctx context.Context, r *rpc) (json.RawMessage, error) {
	id := c.nextID.Add(1)
	var body []byte
	var err error
	if r.resp != nil {
		body, err = json.Marshal(r.resp)
	} else {
		m := mcpwire.NewRequest(id, r.method, nil)
		if strings.HasPrefix(r.method, "notifications/") {
			m.ID = nil
		}
		if r.params != nil {
			m.Params = r.params
		}
		body, err = json.Marshal(m)
	}
	if err != nil {
		return nil, fmt.Errorf("client: encoding %s: %w", r.method, err)
	}
	wait := 100 * time.Millisecond
	for attempt := 0; ; attempt++ {
		res, err := c.send(ctx, r, id, body)
		var te *transientError
		if err == nil || !errors.As(err, &te) || attempt >= c.o.retries || ctx.Err() != nil {
			if te != nil {
				return nil, te.err
			}
			return res, err
		}
		d := max(wait, te.retryAfter)
		wait = min(2*wait, 2*time.Second)
		if err := sleep(ctx, min(d, 10*time.Second)); err != nil {
			return nil, err
		}
	}
}

// send posts one request and reads its answer: a JSON response, or a stream
// of messages ending with the response (server requests on it are served).
func (c *Client) send(ctx context.Context, r *rpc, id int64, body []byte) (json.RawMessage, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.url, bytes.NewReader(body))
	if err != nil {
		return nil, fmt.Errorf("client: %w", err)
	}
	h := req.Header
	h.Set("Content-Type", "application/json")
	h.Set("Accept", "application/json, text/event-stream")
	if r.era == Version2026 {
		h.Set("MCP-Protocol-Version", Version2026)
		h.Set("Mcp-Method", r.method)
		if r.name != "" {
			h.Set("Mcp-Name", headerValue(r.name))
		}
	} else if r.method != "initialize" {
		h.Set("MCP-Protocol-Version", r.era)
		if s := c.sessionID(); s != "" {
			h.Set("Mcp-Session-Id", s)
		}
	}
	if r.key != "" {
		h.Set("Idempotency-Key", r.key)
	}
	for k, v := range r.header {
		h.Set(k, v)
	}
	if c.o.token != nil {
		tok, err := c.o.token(ctx)
		if err != nil {
			return nil, fmt.Errorf("client: token source: %w", err)
		}
		if tok != "" {
			h.Set("Authorization", "Bearer "+tok)
		}
	}
	resp, err := c.o.http.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return nil, context.Cause(ctx)
		}
		return nil, &transientError{err: fmt.Errorf("client: %s: %w", what(r), err)}
	}
	defer func() {
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
		_ = resp.Body.Close()
	}()
	if r.method == "initialize" {
		if s := resp.Header.Get("Mcp-Session-Id"); s != "" {
			c.setSession(s)
		}
	}
	ct, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	switch {
	case resp.StatusCode == http.StatusAccepted:
		return nil, nil
	case ct == "text/event-stream" && resp.StatusCode < 300:
		return c.readStream(ctx, r, id, resp.Body)
	}
	b, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return nil, &transientError{err: fmt.Errorf("client: %s: reading the response: %w", what(r), err)}
	}
	var m message
	decodeErr := json.Unmarshal(b, &m)
	if e := fromWire(m.Err()); decodeErr == nil && e != nil {
		e.HTTPStatus = resp.StatusCode
		if retryable(resp.StatusCode) {
			return nil, &transientError{err: e, retryAfter: retryAfter(resp)}
		}
		return nil, e
	}
	if resp.StatusCode >= 300 || decodeErr != nil {
		e := &Error{HTTPStatus: resp.StatusCode, Message: strings.TrimSpace(string(b[:min(len(b), 512)]))}
		if e.Message == "" {
			e.Message = http.StatusText(resp.StatusCode)
		}
		if resp.StatusCode < 300 {
			e.Message = "not a JSON-RPC response: " + e.Message
		}
		if retryable(resp.StatusCode) {
			return nil, &transientError{err: e, retryAfter: retryAfter(resp)}
		}
		return nil, e
	}
	if m.Result == nil {
		return json.RawMessage("{}"), nil
	}
	return m.Result, nil
}

// readStream reads a response stream until the response to id.
func (c *Client) readStream(ctx context.Context, r *rpc, id int64, body io.Reader) (json.RawMessage, error) {
	want := strconv.FormatInt(id, 10)
	sc := bufio.NewScanner(body)
	sc.Buffer(make([]byte, 64<<10), 64<<20)
	var data []byte
	for {
		more := sc.Scan()
		line := sc.Bytes()
		if more && len(line) > 0 {
			if v, ok := bytes.CutPrefix(line, []byte("data:")); ok {
				data = append(data, bytes.TrimPrefix(v, []byte(" "))...)
				data = append(data, '\n')
			}
			continue
		}
		if len(bytes.TrimSpace(data)) > 0 { // an event ends
			var m message
			if err := json.Unmarshal(data, &m); err == nil {
				switch {
				case m.IsRequest():
					if err := c.answerServer(ctx, r, &m); err != nil {
						return nil, err
					}
				case m.IsResponse() && string(m.ID) == want:
					if e := fromWire(m.Err()); e != nil {
						e.HTTPStatus = http.StatusOK
						return nil, e
					}
					if m.Result == nil {
						return json.RawMessage("{}"), nil
					}
					return m.Result, nil
				}
			}
			data = data[:0]
		}
		if !more {
			break
		}
	}
	if ctx.Err() != nil {
		return nil, context.Cause(ctx)
	}
	err := sc.Err()
	if err == nil {
		err = io.ErrUnexpectedEOF
	}
	return nil, &transientError{err: fmt.Errorf("client: %s: the stream ended before the response: %w", what(r), err)}
}

// answerServer answers a server-to-client request read from a stream: with
// r.serve's result, or an error response.
func (c *Client) answerServer(ctx context.Context, r *rpc, m *message) error {
	out := &mcpwire.Response{JSONRPC: mcpwire.Version, ID: m.ID}
	switch {
	case m.Method == "ping":
		out.Result = mcpwire.Empty
	case r.serve == nil:
		out.Error = &mcpwire.Error{Code: -32601, Message: "Method not found: " + m.Method}
	default:
		res, err := r.serve(ctx, m)
		var e *Error
		switch {
		case errors.As(err, &e):
			out.Error = e.wire()
		case err != nil:
			if ctx.Err() != nil {
				return context.Cause(ctx)
			}
			out.Error = &mcpwire.Error{Code: -32603, Message: err.Error()}
		case res != nil:
			out.Result = res
		}
	}
	_, err := c.call(ctx, &rpc{era: r.era, resp: out})
	if err != nil {
		return fmt.Errorf("client: answering the server's %s: %w", m.Method, err)
	}
	return nil
}

func what(r *rpc) string {
	if r.method == "" {
		return "response"
	}
	return r.method
}

func retryable(status int) bool {
	switch status {
	case http.StatusTooManyRequests, http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout:
		return true
	}
	return false
}

func retryAfter(resp *http.Response) time.Duration {
	if s, err := strconv.Atoi(resp.Header.Get("Retry-After")); err == nil && s > 0 {
		return time.Duration(s) * time.Second
	}
	return 0
}

// headerValue is v as a header value: as it is when it is printable ASCII,
// else =?base64?…?= (SEP-2243).
func headerValue(v string) string {
	for i := 0; i < len(v); i++ {
		if v[i] < 0x20 || v[i] > 0x7e {
			return "=?base64?" + base64.StdEncoding.EncodeToString([]byte(v)) + "?="
		}
	}
	return v
}

// sleep waits d or until ctx ends.
func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}
