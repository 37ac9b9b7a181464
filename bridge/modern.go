package bridge

// The 2026-07-28 era over Streamable HTTP (task gateway, issue #33): no
// initialize and no session; every request carries the protocol version
// and the client's capabilities in _meta and Mcp-Method/Mcp-Name headers.
// The bridge's sessions speak the session-era message stream, so an
// httpConn that finds a modern server translates: initialize becomes
// server/discover, a tools/call answered with a task handle is followed by
// polling tasks/get (its statusMessage relayed as progress, its
// inputRequests as the server's requests, answered with tasks/update, its
// result or error as the call's answer), notifications/cancelled becomes
// tasks/cancel (or, for a plain call, the request's end), and an MRTR round
// (resultType input_required) is answered and the call retried.

import (
	"bytes"
	"cmp"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/mcpqueue/mcpqueue/internal/mcpwire"
	"github.com/mcpqueue/mcpqueue/vocab"
)

// The upstream protocol eras HTTPServer.Protocol may name.
const (
	// ProtocolAuto probes with server/discover and falls back to
	// initialize (the default).
	ProtocolAuto = ""
	// ProtocolLegacy is 2025-11-25: initialize and an Mcp-Session-Id.
	ProtocolLegacy = mcpwire.Version20251125
	// ProtocolModern is 2026-07-28: per-request framing.
	ProtocolModern = mcpwire.Version20260728
)

// CheckProtocol reports whether p is an era HTTPServer.Protocol accepts.
func CheckProtocol(p string) error {
	switch p {
	case ProtocolAuto, ProtocolLegacy, ProtocolModern:
		return nil
	}
	return fmt.Errorf("bridge: unknown protocol %q (want %q or %q, or none to probe)", p, ProtocolLegacy, ProtocolModern)
}

// modernCall is a request of the session's running on a modern server.
type modernCall struct {
	cancel context.CancelCauseFunc
	// cancelled is closed once the session cancelled the request.
	cancelled chan struct{}
}

// errCancelledBySession ends a modern request the session cancelled.
var errCancelledBySession = errors.New("cancelled by the bridge")

// initialize answers the session's initialize: with server/discover's
// answer on a modern server (translated to an InitializeResult), else by
// posting initialize itself.
func (c *httpConn) initialize(msg []byte, p peek) error {
	var req struct {
		Params struct {
			Capabilities json.RawMessage `json:"capabilities"`
			ClientInfo   json.RawMessage `json:"clientInfo"`
		} `json:"params"`
	}
	_ = json.Unmarshal(msg, &req)
	if c.h.Protocol == ProtocolLegacy {
		return c.post(msg, p)
	}
	var caps mcpwire.ClientCapabilities
	_ = json.Unmarshal(req.Params.Capabilities, &caps)
	if caps.Extensions == nil {
		caps.Extensions = map[string]json.RawMessage{}
	}
	caps.Extensions[mcpwire.TasksExtension] = mcpwire.Empty
	c.mu.Lock()
	c.clientCaps, _ = json.Marshal(caps)
	c.clientInfo = req.Params.ClientInfo
	c.mu.Unlock()

	d, derr := c.discover()
	if derr != nil {
		if c.h.Protocol == ProtocolModern {
			return derr
		}
		c.log.Debug().Err(derr).Msg("server/discover not answered; speaking 2025-11-25 (initialize)")
		return c.post(msg, p)
	}
	init := mcpwire.InitializeResult{ProtocolVersion: ProtocolModern, Capabilities: d.Capabilities, Instructions: d.Instructions}
	if d.ServerInfo != nil {
		init.ServerInfo = *d.ServerInfo
	} else {
		var meta map[string]json.RawMessage
		_ = json.Unmarshal(d.Meta, &meta)
		_ = json.Unmarshal(meta[mcpwire.MetaServerInfo], &init.ServerInfo)
	}
	c.mu.Lock()
	c.modern = true
	c.version = ProtocolModern
	c.mu.Unlock()
	c.pushResult(p.ID, init)
	return nil
}

// discover asks for server/discover and reports whether the server speaks
// 2026-07-28.
func (c *httpConn) discover() (*mcpwire.DiscoverResult, error) {
	ans, err := c.modernRequest(c.ctx, "server/discover", map[string]json.RawMessage{})
	if err != nil {
		return nil, err
	}
	var d mcpwire.DiscoverResult
	if err := json.Unmarshal(ans.Result, &d); err != nil {
		return nil, fmt.Errorf("POST %s (server/discover): undecodable result: %w", c.where, err)
	}
	for _, v := range d.SupportedVersions {
		if v == ProtocolModern {
			return &d, nil
		}
	}
	return nil, fmt.Errorf("POST %s (server/discover): the server supports %v, not %s", c.where, d.SupportedVersions, ProtocolModern)
}

// isModern reports whether the Conn speaks 2026-07-28.
func (c *httpConn) isModern() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.modern
}

// writeModern handles one of the session's messages on a modern server.
func (c *httpConn) writeModern(msg []byte, p peek) error {
	switch {
	case p.Method == "notifications/cancelled":
		var cp mcpwire.CancelledParams
		if json.Unmarshal(msg, &struct {
			Params *mcpwire.CancelledParams `json:"params"`
		}{&cp}) == nil {
			c.cancelModern(string(cp.RequestID))
		}
		return nil
	case p.Method != "" && len(p.ID) == 0:
		return nil // 2026-07-28 has no other client notifications
	case p.Method == "":
		c.answered(string(p.ID), msg)
		return nil
	case p.Method == "logging/setLevel":
		var lp struct {
			Params mcpwire.SetLevelParams `json:"params"`
		}
		_ = json.Unmarshal(msg, &lp)
		c.mu.Lock()
		c.logLevel = lp.Params.Level
		c.mu.Unlock()
		c.pushResult(p.ID, struct{}{})
		return nil
	case p.Method == "ping":
		c.pushResult(p.ID, struct{}{})
		return nil
	}
	var req struct {
		Params map[string]json.RawMessage `json:"params"`
	}
	if err := json.Unmarshal(msg, &req); err != nil {
		return fmt.Errorf("bridge: http: undecodable request: %w", err)
	}
	if req.Params == nil {
		req.Params = map[string]json.RawMessage{}
	}
	ctx, cancel := context.WithCancelCause(c.ctx)
	mc := &modernCall{cancel: cancel, cancelled: make(chan struct{})}
	c.mu.Lock()
	c.calls[string(p.ID)] = mc
	c.mu.Unlock()
	c.background(func() error {
		defer func() {
			c.mu.Lock()
			delete(c.calls, string(p.ID))
			c.mu.Unlock()
			cancel(nil)
		}()
		return c.runModern(ctx, mc, p, req.Params)
	})
	return nil
}

// runModern runs one request: MRTR rounds answered, a task followed to
// its end. An error ends the Conn (the session's call is then retried).
func (c *httpConn) runModern(ctx context.Context, mc *modernCall, p peek, params map[string]json.RawMessage) error {
	token := progressToken(params)
	for round := 0; ; round++ {
		ans, err := c.modernRequest(ctx, p.Method, params)
		if err != nil {
			if errors.Is(context.Cause(ctx), errCancelledBySession) {
				c.pushError(p.ID, vocab.CodeInternalError, "cancelled")
				return nil
			}
			if c.ctx.Err() != nil {
				return nil
			}
			var we *wireError
			if errors.As(err, &we) {
				c.push(mustJSON(mcpwire.Response{JSONRPC: mcpwire.Version, ID: p.ID, Error: we}))
				return nil
			}
			return err
		}
		var rt struct {
			ResultType string `json:"resultType"`
		}
		_ = json.Unmarshal(ans.Result, &rt)
		switch rt.ResultType {
		case mcpwire.ResultTask:
			var t mcpwire.Task
			if err := json.Unmarshal(ans.Result, &t); err != nil || t.TaskID == "" {
				return fmt.Errorf("POST %s (%s): a task handle without a taskId: %s", c.where, p.Method, clip(ans.Result))
			}
			return c.follow(ctx, mc, p.ID, token, &t)
		case mcpwire.ResultInputRequired:
			if round >= 16 {
				return fmt.Errorf("POST %s (%s): more than 16 rounds of input requests", c.where, p.Method)
			}
			var ir mcpwire.InputRequiredResult
			if err := json.Unmarshal(ans.Result, &ir); err != nil {
				return fmt.Errorf("POST %s (%s): undecodable input requests: %w", c.where, p.Method, err)
			}
			answers := map[string]json.RawMessage{}
			for key, r := range ir.InputRequests {
				res, err := c.ask(ctx, r)
				if err != nil {
					c.pushError(p.ID, vocab.CodeInternalError, err.Error())
					return nil
				}
				answers[key] = res
			}
			params["inputResponses"], _ = json.Marshal(answers)
			delete(params, "requestState")
			if ir.RequestState != nil {
				params["requestState"], _ = json.Marshal(*ir.RequestState)
			}
		default:
			c.pushResult(p.ID, ans.Result)
			return nil
		}
	}
}

// follow polls the server's task until it ends and answers the session's
// request id with its outcome.
func (c *httpConn) follow(ctx context.Context, mc *modernCall, id json.RawMessage, token json.RawMessage, t *mcpwire.Task) error {
	ev := c.log.Info().Str("upstream_task", t.TaskID)
	if len(token) > 0 {
		ev = ev.RawJSON("call", token) // the progress token names the queue's task
	}
	ev.Msg("the server runs the call as a task; polling it")
	asked := map[string]bool{}
	lastMsg, step := "", 0
	for {
		switch t.Status {
		case "completed":
			c.pushResult(id, t.Result)
			return nil
		case "failed":
			e := t.Error
			if e == nil {
				e = &wireError{Code: vocab.CodeInternalError, Message: "upstream task failed: " + t.StatusMessage}
			}
			c.push(mustJSON(mcpwire.Response{JSONRPC: mcpwire.Version, ID: id, Error: e}))
			return nil
		case "cancelled":
			c.pushError(id, vocab.CodeInternalError, "upstream task cancelled: "+t.StatusMessage)
			return nil
		case "input_required":
			for key, raw := range t.InputRequests {
				if asked[key] {
					continue
				}
				asked[key] = true
				var r mcpwire.InputRequest
				if err := json.Unmarshal(raw, &r); err != nil {
					return fmt.Errorf("upstream task: undecodable input request %q: %w", key, err)
				}
				c.inflight.Add(1)
				go func() {
					defer c.inflight.Done()
					c.answerTask(ctx, t.TaskID, key, r)
				}()
			}
		}
		// The upstream's status shows on the task: its statusMessage, or
		// that the upstream task works (never its id: a bearer handle).
		if msg := cmp.Or(t.StatusMessage, "upstream task "+t.Status); t.Status == "working" && msg != lastMsg && len(token) > 0 {
			lastMsg, step = msg, step+1
			c.push(mustJSON(mcpwire.NewRequest(nil, "notifications/progress",
				&mcpwire.ProgressParams{ProgressToken: token, Progress: float64(step), Message: msg})))
		}
		if err := c.pollWait(ctx, mc, t); err != nil {
			if errors.Is(err, errCancelledBySession) {
				c.cancelTask(t.TaskID)
				c.pushError(id, vocab.CodeInternalError, "cancelled; the upstream task too")
				return nil
			}
			return nil // the Conn is closing
		}
		next, err := c.taskGet(ctx, t.TaskID)
		if err != nil {
			if errors.Is(context.Cause(ctx), errCancelledBySession) {
				continue // pollWait reports it
			}
			if c.ctx.Err() != nil {
				return nil
			}
			return err
		}
		t = next
	}
}

// pollWait waits the task's poll interval (bounded to 0.1–5 s), or until
// the request is cancelled.
func (c *httpConn) pollWait(ctx context.Context, mc *modernCall, t *mcpwire.Task) error {
	d := time.Second
	if t.PollIntervalMs != nil {
		d = time.Duration(*t.PollIntervalMs) * time.Millisecond
	}
	d = min(max(d, 100*time.Millisecond), 5*time.Second)
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-timer.C:
		return nil
	case <-mc.cancelled:
		return errCancelledBySession
	case <-ctx.Done():
		if errors.Is(context.Cause(ctx), errCancelledBySession) {
			return errCancelledBySession
		}
		return context.Cause(ctx)
	}
}

func (c *httpConn) taskGet(ctx context.Context, taskID string) (*mcpwire.Task, error) {
	// Errors do not name the task: they reach the task's statusMessage,
	// and an upstream task id is a bearer handle.
	ans, err := c.modernRequest(ctx, "tasks/get", map[string]json.RawMessage{"taskId": mustJSON(taskID)})
	if err != nil {
		return nil, fmt.Errorf("polling the upstream task: %w", err)
	}
	var t mcpwire.Task
	if err := json.Unmarshal(ans.Result, &t); err != nil {
		return nil, fmt.Errorf("polling the upstream task: undecodable tasks/get result: %w", err)
	}
	t.TaskID = taskID
	return &t, nil
}

// answerTask relays one of the task's input requests to the session and
// its answer to the server (tasks/update).
func (c *httpConn) answerTask(ctx context.Context, taskID, key string, r mcpwire.InputRequest) {
	res, err := c.ask(ctx, r)
	if err != nil {
		return // the call ends (see activeCall.ask): the session cancels it
	}
	_, err = c.modernRequest(ctx, "tasks/update", map[string]json.RawMessage{
		"taskId": mustJSON(taskID), "inputResponses": mustJSON(map[string]json.RawMessage{key: res})})
	if err != nil && ctx.Err() == nil {
		c.log.Warn().Err(err).Str("upstream_task", taskID).Msg("tasks/update refused")
	}
}

// cancelTask asks the server to cancel its task (cooperative; the ack is
// all it answers).
func (c *httpConn) cancelTask(taskID string) {
	ctx, cancel := context.WithTimeout(c.ctx, 10*time.Second)
	defer cancel()
	if _, err := c.modernRequest(ctx, "tasks/cancel", map[string]json.RawMessage{"taskId": mustJSON(taskID)}); err != nil {
		c.log.Warn().Err(err).Str("upstream_task", taskID).Msg("tasks/cancel failed")
		return
	}
	c.log.Info().Str("upstream_task", taskID).Msg("sent tasks/cancel")
}

// cancelModern ends the session's request id: a task is cancelled
// upstream (by follow), a plain request's POST is abandoned (closing it is
// 2026-07-28's cancel).
func (c *httpConn) cancelModern(id string) {
	c.mu.Lock()
	mc := c.calls[id]
	c.mu.Unlock()
	if mc == nil {
		return
	}
	select {
	case <-mc.cancelled:
	default:
		close(mc.cancelled)
	}
	mc.cancel(errCancelledBySession)
}

// ask hands the session a request of the server's (an input request) and
// waits for its answer.
func (c *httpConn) ask(ctx context.Context, r mcpwire.InputRequest) (json.RawMessage, error) {
	ch := make(chan *message, 1)
	c.mu.Lock()
	c.nextAsk++
	id := "mcpq-input-" + strconv.Itoa(c.nextAsk)
	c.asks[strconv.Quote(id)] = ch
	c.mu.Unlock()
	defer func() {
		c.mu.Lock()
		delete(c.asks, strconv.Quote(id))
		c.mu.Unlock()
	}()
	params := r.Params
	if len(params) == 0 {
		params = mcpwire.Empty
	}
	c.push(mustJSON(mcpwire.NewRequest(id, r.Method, params)))
	select {
	case m := <-ch:
		if e := m.Err(); e != nil {
			return nil, e
		}
		return m.Result, nil
	case <-ctx.Done():
		c.push(mustJSON(mcpwire.NewRequest(nil, "notifications/cancelled", &mcpwire.CancelledParams{RequestID: mustJSON(id), Reason: "the request ended"})))
		return nil, context.Cause(ctx)
	}
}

// answered routes the session's answer to one of ask's requests.
func (c *httpConn) answered(id string, msg []byte) {
	c.mu.Lock()
	ch := c.asks[id]
	c.mu.Unlock()
	var m message
	if ch == nil || json.Unmarshal(msg, &m) != nil {
		return
	}
	ch <- &m
}

// modernAnswer is a modern request's response.
type modernAnswer struct {
	Result json.RawMessage
}

// modernRequest posts one 2026-07-28 request (its _meta and headers
// added) and returns its response; a JSON-RPC error is a *wireError.
func (c *httpConn) modernRequest(ctx context.Context, method string, params map[string]json.RawMessage) (*modernAnswer, error) {
	meta := map[string]json.RawMessage{}
	if raw, ok := params["_meta"]; ok {
		_ = json.Unmarshal(raw, &meta)
	}
	c.mu.Lock()
	c.nextPost++
	id := mustJSON("mcpq-" + strconv.Itoa(c.nextPost))
	caps, info, level := c.clientCaps, c.clientInfo, c.logLevel
	c.mu.Unlock()
	meta[mcpwire.MetaProtocolVersion] = mustJSON(ProtocolModern)
	if len(caps) == 0 {
		caps = mustJSON(mcpwire.ClientCapabilities{Extensions: map[string]json.RawMessage{mcpwire.TasksExtension: mcpwire.Empty}})
	}
	meta[mcpwire.MetaClientCapabilities] = caps
	if len(info) > 0 {
		meta[mcpwire.MetaClientInfo] = info
	}
	if level != "" && level != "off" {
		meta[mcpwire.MetaLogLevel] = mustJSON(level)
	}
	params["_meta"] = mustJSON(meta)
	body := mustJSON(mcpwire.NewRequest(id, method, params))
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.h.URL, bytes.NewReader(body))
	if err != nil {
		return nil, fmt.Errorf("POST %s: %w", c.where, err)
	}
	c.header(req, "application/json, text/event-stream")
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("MCP-Protocol-Version", ProtocolModern)
	req.Header.Set("Mcp-Method", method)
	if name := headerName(method, params); name != "" {
		req.Header.Set("Mcp-Name", name)
	}
	p := peek{ID: id, Method: method}
	resp, err := c.client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("POST %s (%s): %w", c.where, method, unwrapURL(err))
	}
	defer resp.Body.Close()
	raw, err := c.read(resp, p)
	if err != nil {
		return nil, err
	}
	var m message
	if err := json.Unmarshal(raw, &m); err != nil {
		return nil, fmt.Errorf("POST %s (%s): undecodable answer: %w", c.where, method, err)
	}
	if e := m.Err(); e != nil {
		return nil, e
	}
	return &modernAnswer{Result: m.Result}, nil
}

// headerName is the Mcp-Name header of a request: the tool or prompt, the
// resource, the task (base64-framed when it is not header-safe).
func headerName(method string, params map[string]json.RawMessage) string {
	key := ""
	switch method {
	case "tools/call", "prompts/get":
		key = "name"
	case "resources/read":
		key = "uri"
	case "tasks/get", "tasks/update", "tasks/cancel":
		key = "taskId"
	default:
		return ""
	}
	var v string
	if json.Unmarshal(params[key], &v) != nil || v == "" {
		return ""
	}
	for _, r := range v {
		if r < 0x20 || r > 0x7e {
			return "=?base64?" + base64.StdEncoding.EncodeToString([]byte(v)) + "?="
		}
	}
	return v
}

// progressToken is the request's _meta.progressToken (nil: none).
func progressToken(params map[string]json.RawMessage) json.RawMessage {
	var meta map[string]json.RawMessage
	_ = json.Unmarshal(params["_meta"], &meta)
	return meta["progressToken"]
}

// pushResult answers the session's request id with result, without the
// 2026-07-28 resultType (the session's callers read 2025-era results).
func (c *httpConn) pushResult(id json.RawMessage, result any) {
	raw := mustJSON(result)
	var m map[string]json.RawMessage
	if json.Unmarshal(raw, &m) == nil && m["resultType"] != nil {
		delete(m, "resultType")
		raw = mustJSON(m)
	}
	c.push(mustJSON(mcpwire.Response{JSONRPC: mcpwire.Version, ID: id, Result: raw}))
}

func (c *httpConn) pushError(id json.RawMessage, code int, msg string) {
	c.push(mustJSON(mcpwire.Response{JSONRPC: mcpwire.Version, ID: id, Error: &wireError{Code: code, Message: msg}}))
}

// mustJSON encodes a value that always encodes (strings, wire types).
func mustJSON(v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		panic(fmt.Sprintf("bridge: encoding %T: %v", v, err))
	}
	return b
}
