package mcpfront

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/mcpqueue/mcpqueue/broker"
	"github.com/mcpqueue/mcpqueue/producer"
	"github.com/mcpqueue/mcpqueue/taskstate"
)

// The 2025-11-25 wire: initialize, sessions (kept in the store, so any
// replica serves any session), experimental tasks (task-augmented
// tools/call, tasks/get|result|list|cancel), and input requests sent to the
// client as server-to-client JSON-RPC requests on a response stream.

const (
	version20251125   = "2025-11-25"
	headerSession     = "Mcp-Session-Id"
	metaRelatedTask   = "io.modelcontextprotocol/related-task"
	inputRequestIDPre = "mcpq-input:" // id of a server-to-client input request: mcpq-input:<task>:<key>
	maxLegacyTTL      = 24 * time.Hour
	legacyListPage    = 50
)

// legacyVersions are the revisions this endpoint negotiates in initialize,
// newest first; tasks exist only in the first.
var legacyVersions = []string{version20251125, "2025-06-18", "2025-03-26"}

// isLegacy tells a 2025-era request from a 2026-07-28 one.
func isLegacy(r *http.Request, req *request) bool {
	hv := r.Header.Get(headerVersion)
	if hv == version2026 || hasModernMeta(req.Params) {
		return false
	}
	return req.Method == "initialize" || r.Header.Get(headerSession) != "" || hv != "" || req.isResponse()
}

func hasModernMeta(params json.RawMessage) bool {
	if len(params) == 0 {
		return false
	}
	var p modernParams
	_ = json.Unmarshal(params, &p)
	_, ok := p.Meta[metaVersion]
	return ok
}

// legacyCall is one request in a session.
type legacyCall struct {
	req   *request
	sess  *taskstate.Session
	owner string
}

func (c *legacyCall) tasks() bool { return c.sess.ProtocolVersion == version20251125 }

func (s *Server) serveLegacy(w http.ResponseWriter, r *http.Request, req *request) {
	if s.sessions == nil {
		writeError(w, req.ID, errorf(codeInvalidRequest, http.StatusBadRequest, "this server's store keeps no sessions: speak "+version2026))
		return
	}
	if req.Method == "initialize" {
		s.initialize(w, r, req)
		return
	}
	sess, rerr := s.sessionOf(r)
	if rerr != nil {
		writeError(w, req.ID, rerr)
		return
	}
	if hv := r.Header.Get(headerVersion); hv != "" && hv != sess.ProtocolVersion {
		writeError(w, req.ID, errorf(codeInvalidRequest, http.StatusBadRequest, fmt.Sprintf("%s %q does not match the session's version %q", headerVersion, hv, sess.ProtocolVersion)))
		return
	}
	c := &legacyCall{req: req, sess: sess, owner: sessionOwner(sess)}
	if req.isResponse() {
		s.legacyResponse(w, r, c)
		return
	}
	s.count(string(taskstate.Era20251125), req.Method)
	ctx := r.Context()
	switch req.Method {
	case "ping":
		writeResult(w, req.ID, map[string]any{})
	case "tools/list":
		s.legacyToolsList(ctx, w, c)
	case "tools/call":
		s.legacyToolsCall(ctx, w, r, c)
	case "prompts/list":
		s.legacyPromptsList(ctx, w, c)
	case "prompts/get":
		s.legacyPromptsGet(ctx, w, r, c)
	case "resources/list", "resources/templates/list": // resources.go
		s.resourceList(ctx, w, req.ID, resourceListKind(req.Method), false)
	case "resources/read":
		s.legacyResourcesRead(ctx, w, r, c)
	case "resources/subscribe", "resources/unsubscribe":
		s.legacySubscribe(ctx, w, c)
	case "completion/complete": // completion.go
		s.legacyComplete(ctx, w, r, c)
	case "logging/setLevel":
		s.setLevel(ctx, w, c)
	case "tasks/get", "tasks/result", "tasks/list", "tasks/cancel":
		if !c.tasks() {
			writeError(w, req.ID, errorf(codeMethodNotFound, http.StatusOK, "Method not found: "+clip(req.Method)+" (tasks need protocol version "+version20251125+")"))
			return
		}
		s.legacyTasks(ctx, w, r, c)
	default:
		writeError(w, req.ID, errorf(codeMethodNotFound, http.StatusOK, "Method not found: "+clip(req.Method)))
	}
}

// sessionOwner binds a session's tasks: to the authenticated principal when
// there is one, else to the session itself.
func sessionOwner(sess *taskstate.Session) string {
	if sess.Owner != "" {
		return sess.Owner
	}
	return "session:" + sess.ID
}

func (s *Server) sessionOf(r *http.Request) (*taskstate.Session, *rpcError) {
	id := r.Header.Get(headerSession)
	if id == "" {
		return nil, errorf(codeInvalidRequest, http.StatusBadRequest, "Bad Request: "+headerSession+" header is required (call initialize first)")
	}
	sess, err := s.sessions.Session(r.Context(), id)
	if err == nil && sess.Owner != principalOf(r.Context()).Owner() {
		err = taskstate.ErrNotFound // another principal's session is no session at all
	}
	if errors.Is(err, taskstate.ErrNotFound) {
		return nil, errorf(codeInvalidRequest, http.StatusNotFound, "Session not found: initialize a new one")
	}
	if err != nil {
		s.log.Error().Err(err).Msg("reading session")
		return nil, errorf(codeInternal, http.StatusInternalServerError, "internal error: reading session")
	}
	return sess, nil
}

type initializeParams struct {
	ProtocolVersion string          `json:"protocolVersion"`
	Capabilities    json.RawMessage `json:"capabilities"`
	ClientInfo      json.RawMessage `json:"clientInfo"`
}

func (s *Server) initialize(w http.ResponseWriter, r *http.Request, req *request) {
	var p initializeParams
	if err := json.Unmarshal(req.Params, &p); err != nil || p.ProtocolVersion == "" {
		writeError(w, req.ID, invalidParams("invalid params: initialize needs protocolVersion, capabilities and clientInfo"))
		return
	}
	version := legacyVersions[0]
	for _, v := range legacyVersions {
		if v == p.ProtocolVersion {
			version = v
		}
	}
	sess := &taskstate.Session{
		ID: taskstate.NewID(), ProtocolVersion: version, ClientCapabilities: p.Capabilities,
		ClientInfo: p.ClientInfo, CreatedAt: s.cfg.Now().UTC(), Owner: principalOf(r.Context()).Owner(),
	}
	if err := s.sessions.PutSession(r.Context(), sess); err != nil {
		s.internalError(w, req.ID, "creating the session", err)
		return
	}
	s.count(string(taskstate.Era20251125), "initialize")
	s.log.Info().Str("era", string(taskstate.Era20251125)).Str("version", version).RawJSON("client", orNull(p.ClientInfo)).Str("session", sess.ID).Msg("session initialized")
	caps := s.catalogCapabilities(r.Context(), true)
	caps["tools"], caps["prompts"], caps["logging"] = map[string]any{}, map[string]any{}, map[string]any{}
	if version == version20251125 {
		caps["tasks"] = map[string]any{"list": map[string]any{}, "cancel": map[string]any{}, "requests": map[string]any{"tools": map[string]any{"call": map[string]any{}}}}
	}
	res := map[string]any{"protocolVersion": version, "capabilities": caps, "serverInfo": s.serverInfo()}
	if s.cfg.Instructions != "" {
		res["instructions"] = s.cfg.Instructions
	}
	w.Header().Set(headerSession, sess.ID)
	writeResult(w, req.ID, res)
}

func orNull(b json.RawMessage) json.RawMessage {
	if len(b) == 0 || !json.Valid(b) {
		return json.RawMessage("null")
	}
	return b
}

// deleteSession ends a session (HTTP DELETE).
func (s *Server) deleteSession(w http.ResponseWriter, r *http.Request) {
	if _, rerr := s.sessionOf(r); rerr != nil {
		writeError(w, nil, rerr)
		return
	}
	if err := s.sessions.DeleteSession(r.Context(), r.Header.Get(headerSession)); err != nil {
		s.internalError(w, nil, "ending the session", err)
		return
	}
	w.WriteHeader(http.StatusOK)
}

// logLevels are the levels logging/setLevel accepts.
var logLevels = map[string]bool{"debug": true, "info": true, "notice": true, "warning": true, "error": true, "critical": true, "alert": true, "emergency": true}

// setLevel stores the session's log level: later calls send log messages
// at or above it.
func (s *Server) setLevel(ctx context.Context, w http.ResponseWriter, c *legacyCall) {
	var p struct {
		Level string `json:"level"`
	}
	if err := json.Unmarshal(c.req.Params, &p); err != nil || !logLevels[p.Level] {
		writeError(w, c.req.ID, invalidParams("invalid params: level must be one of debug, info, notice, warning, error, critical, alert, emergency"))
		return
	}
	c.sess.LogLevel = p.Level
	if err := s.sessions.PutSession(ctx, c.sess); err != nil {
		s.internalError(w, c.req.ID, "storing the log level", err)
		return
	}
	writeResult(w, c.req.ID, map[string]any{})
}

type legacyTool struct {
	wireTool
	Execution map[string]string `json:"execution,omitempty"`
}

func (s *Server) legacyToolsList(ctx context.Context, w http.ResponseWriter, c *legacyCall) {
	tools, ok := s.entries(ctx, w, c.req.ID, taskstate.KindTool)
	if !ok {
		return
	}
	out := make([]legacyTool, len(tools))
	for i, t := range tools {
		out[i] = legacyTool{wireTool: toWireTool(t)}
		if c.tasks() {
			out[i].Execution = map[string]string{"taskSupport": string(t.TaskSupport)}
		}
	}
	writeResult(w, c.req.ID, map[string]any{"tools": out})
}

func (s *Server) legacyPromptsList(ctx context.Context, w http.ResponseWriter, c *legacyCall) {
	prompts, ok := s.entries(ctx, w, c.req.ID, taskstate.KindPrompt)
	if !ok {
		return
	}
	writeResult(w, c.req.ID, map[string]any{"prompts": toWirePrompts(prompts)})
}

type legacyCallParams struct {
	Name      string          `json:"name"`
	Arguments json.RawMessage `json:"arguments"`
	Task      *struct {
		TTL *int64 `json:"ttl"`
	} `json:"task"`
	Meta map[string]json.RawMessage `json:"_meta"`
}

func (s *Server) legacyToolsCall(ctx context.Context, w http.ResponseWriter, r *http.Request, c *legacyCall) {
	var p legacyCallParams
	if err := json.Unmarshal(c.req.Params, &p); err != nil || p.Name == "" {
		writeError(w, c.req.ID, invalidParams("invalid params: tools/call needs a tool name"))
		return
	}
	tool, rerr := s.lookupTool(ctx, p.Name)
	if rerr != nil {
		writeError(w, c.req.ID, rerr)
		return
	}
	asTask := p.Task != nil && c.tasks()
	switch {
	case asTask && tool.TaskSupport == taskstate.TaskForbidden:
		writeError(w, c.req.ID, errorf(codeMethodNotFound, http.StatusOK, fmt.Sprintf("tool %q does not support task-augmented execution", p.Name)))
		return
	case !asTask && tool.TaskSupport == taskstate.TaskRequired && c.tasks():
		writeError(w, c.req.ID, errorf(codeMethodNotFound, http.StatusOK, fmt.Sprintf("tool %q requires task-augmented execution (params.task)", p.Name)))
		return
	}
	if bad := s.checkArgs(tool, p.Arguments); bad != nil {
		writeResult(w, c.req.ID, bad)
		return
	}
	if s.refuseTask(ctx, w, c.req.ID, c.owner) {
		return
	}
	req := &producer.Request{
		ID: taskstate.NewID(), Tool: p.Name, Arguments: p.Arguments, Owner: c.owner,
		Era: taskstate.Era20251125, Mode: taskstate.ModeTask, Meta: legacyMeta(c, p.Meta),
		StatusMessage: s.awaiting(tool),
	}
	if asTask {
		if p.Task.TTL != nil {
			req.TTL = min(max(time.Duration(*p.Task.TTL)*time.Millisecond, time.Second), maxLegacyTTL)
		}
		t, err := s.prod.Create(ctx, req)
		if err != nil {
			s.internalError(w, c.req.ID, "starting the task", err)
			return
		}
		writeResult(w, c.req.ID, map[string]any{"task": s.legacyTask(t)})
		return
	}
	s.legacyInline(ctx, w, r, c, req) // legacyinline.go
}

// replyOutcome answers with what the call would have returned: the result
// (tool errors included), or the JSON-RPC error of a failed task.
func (s *Server) replyOutcome(out *replier, t *taskstate.Task, meta json.RawMessage) {
	t, err := s.resolved(context.Background(), t)
	if err != nil {
		s.log.Error().Err(err).Msg("replying with a task's outcome")
		out.fail(resultMissing(err))
		return
	}
	switch t.Status {
	case taskstate.Completed:
		out.result(reshape(t.Result, "", meta))
	case taskstate.Failed:
		out.fail(storedError(t.Error))
	default:
		out.fail(errorf(codeInternal, http.StatusOK, "the task was cancelled: it has no result"))
	}
}

// legacyTask is the 2025-11-25 Task view of a record. A tool error is
// "failed" on this wire ("completed" with isError on 2026-07-28).
func (s *Server) legacyTask(t *taskstate.Task) map[string]any {
	status := t.Status
	if status == taskstate.Completed && (isToolError(t.Result) || t.ResultRef != nil && t.ResultRef.IsError) {
		status = taskstate.Failed
	}
	m := map[string]any{
		"taskId":        t.ID,
		"status":        status,
		"createdAt":     t.CreatedAt.UTC().Format(time.RFC3339Nano),
		"lastUpdatedAt": t.LastUpdatedAt.UTC().Format(time.RFC3339Nano),
		"ttl":           nil,
	}
	if t.TTLMs > 0 {
		m["ttl"] = t.TTLMs
	}
	m["pollInterval"] = s.pollInterval(t)
	if t.StatusMessage != "" {
		m["statusMessage"] = t.StatusMessage
	} else if status == taskstate.Failed && t.Status == taskstate.Completed {
		m["statusMessage"] = "the tool reported an error"
	}
	return m
}

func isToolError(result json.RawMessage) bool {
	var r struct {
		IsError bool `json:"isError"`
	}
	_ = json.Unmarshal(result, &r)
	return r.IsError
}

type legacyTaskParams struct {
	TaskID string `json:"taskId"`
	Cursor string `json:"cursor"`
}

func (s *Server) legacyTasks(ctx context.Context, w http.ResponseWriter, r *http.Request, c *legacyCall) {
	var p legacyTaskParams
	if len(c.req.Params) > 0 {
		if err := json.Unmarshal(c.req.Params, &p); err != nil {
			writeError(w, c.req.ID, invalidParams("invalid params: "+err.Error()))
			return
		}
	}
	if c.req.Method == "tasks/list" {
		s.legacyTasksList(ctx, w, c, p.Cursor)
		return
	}
	if p.TaskID == "" {
		writeError(w, c.req.ID, invalidParams("invalid params: missing taskId"))
		return
	}
	t, rerr := s.ownedTask(ctx, c.req.Method, p.TaskID, c.owner)
	if rerr != nil {
		if rerr.Code == codeInvalidParams {
			rerr.Message = "Failed to retrieve task: Task not found"
		}
		writeError(w, c.req.ID, rerr)
		return
	}
	switch c.req.Method {
	case "tasks/get":
		writeResult(w, c.req.ID, s.legacyTask(t))
	case "tasks/cancel":
		if t.Status.Terminal() {
			writeError(w, c.req.ID, invalidParams(fmt.Sprintf("Cannot cancel task: already in terminal status '%s'", s.legacyTask(t)["status"])))
			return
		}
		t, err := s.prod.Cancel(ctx, t.ID, "cancelled by the client")
		if err != nil && !errors.Is(err, producer.ErrTerminal) {
			s.internalError(w, c.req.ID, "cancelling the task", err)
			return
		}
		writeResult(w, c.req.ID, s.legacyTask(t))
	case "tasks/result":
		out := &replier{w: w, id: c.req.ID}
		final, err := s.streamTask(ctx, r, out, t.ID, streamOpts{related: true, statusNotes: true})
		if err != nil { // the client went away, or the server is going: the task goes on
			if e := shutdownError(ctx, "the task goes on: ask for its result again"); e != nil {
				out.fail(e)
			}
			return
		}
		s.replyOutcome(out, final, relatedTaskMeta(t.ID))
	}
}

func (s *Server) legacyTasksList(ctx context.Context, w http.ResponseWriter, c *legacyCall, cursor string) {
	tasks, next, err := s.store.List(ctx, c.owner, cursor, legacyListPage)
	if errors.Is(err, taskstate.ErrBadCursor) {
		writeError(w, c.req.ID, invalidParams("invalid params: unknown cursor"))
		return
	}
	if err != nil {
		s.internalError(w, c.req.ID, "listing tasks", err)
		return
	}
	out := make([]map[string]any, 0, len(tasks))
	for _, t := range tasks {
		out = append(out, s.legacyTask(t)) // whatever tasks/get shows is listable
	}
	res := map[string]any{"tasks": out}
	if next != "" {
		res["nextCursor"] = next
	}
	writeResult(w, c.req.ID, res)
}

// errNotStarted wraps a failed streamOpts.create.
var errNotStarted = errors.New("mcpfront: call not started")

type streamOpts struct {
	// create, when set, starts the task once the stream listens, so that no
	// notification sent at the very start is missed.
	create      func() error
	progress    bool // forward the worker's notifications (progress, logs)
	related     bool // the stream belongs to a task: tag requests with related-task
	statusNotes bool // send notifications/tasks/status on status changes
}

// streamTask follows a task until it is terminal. While it waits for input,
// its requests go to the client as server-to-client JSON-RPC requests on the
// response stream (opened as SSE on first use); the client's answers come
// back as POSTed responses (legacyResponse), on any replica.
func (s *Server) streamTask(ctx context.Context, r *http.Request, out *replier, id string, o streamOpts) (*taskstate.Task, error) {
	sse := acceptsSSE(r)
	if sse {
		out.stream = &sseWriter{w: out.w}
	}
	ended := make(chan struct{})
	subscribed := false
	if o.progress && sse {
		var once sync.Once
		sub, err := s.bus.Subscribe(ctx, broker.TopicNotify, id, func(_ string, data []byte) {
			if len(data) == 0 { // the worker's end marker follows its outcome write
				once.Do(func() { close(ended) })
				return
			}
			out.stream.event(data)
		})
		if err == nil {
			subscribed = true
			defer sub.Close()
		}
	}
	if o.create != nil {
		if err := o.create(); err != nil {
			return nil, fmt.Errorf("%w: %w", errNotStarted, err)
		}
	}
	ch, err := s.store.Watch(ctx, id)
	if err != nil {
		return nil, err
	}
	sent := map[string]bool{}
	var last taskstate.Status
	for t := range ch {
		if t.Status.Terminal() {
			s.durations.observe(t)
			if subscribed {
				// Let the notifications sent before the outcome arrive first.
				select {
				case <-ended:
				case <-time.After(notifyDrain):
				}
			}
			return t, nil
		}
		if !sse {
			continue
		}
		if o.statusNotes && t.Status != last && last != "" {
			b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "method": "notifications/tasks/status", "params": s.legacyTask(t)})
			out.stream.event(b)
		}
		last = t.Status
		for k, raw := range t.InputRequests {
			if sent[k] {
				continue
			}
			sent[k] = true
			out.stream.event(inputRequestMessage(t.ID, k, raw, o.related))
		}
	}
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	return nil, taskstate.ErrNotFound
}

// inputRequestMessage turns a stored input request into a JSON-RPC request
// to the client, with an id that routes its answer back to the task.
func inputRequestMessage(taskID, key string, raw json.RawMessage, related bool) []byte {
	var r struct {
		Method string                     `json:"method"`
		Params map[string]json.RawMessage `json:"params"`
	}
	_ = json.Unmarshal(raw, &r)
	if r.Params == nil {
		r.Params = map[string]json.RawMessage{}
	}
	if related {
		r.Params["_meta"], _ = json.Marshal(map[string]any{metaRelatedTask: map[string]any{"taskId": taskID}})
	}
	b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": inputRequestIDPre + taskID + ":" + key, "method": r.Method, "params": r.Params})
	return b
}

// legacyResponse takes the client's answer to an input request.
func (s *Server) legacyResponse(w http.ResponseWriter, r *http.Request, c *legacyCall) {
	var id string
	_ = json.Unmarshal(c.req.ID, &id)
	rest, ok := strings.CutPrefix(id, inputRequestIDPre)
	taskID, key, ok2 := strings.Cut(rest, ":")
	if !ok || !ok2 {
		w.WriteHeader(http.StatusAccepted) // not a request of ours: nothing to route
		return
	}
	// A response the server cannot take gets an HTTP error status (never
	// 404, which would tell the client its session is gone).
	t, rerr := s.ownedTask(r.Context(), "response to an input request", taskID, c.owner)
	if rerr != nil {
		writeError(w, nil, &rpcError{Code: rerr.Code, Message: rerr.Message, status: http.StatusBadRequest})
		return
	}
	answer, validate := c.req.Result, true
	if len(c.req.Error) > 0 {
		// The client refused: the handler's Ask returns this error.
		answer, validate = json.RawMessage(`{"error":`+string(c.req.Error)+`}`), false
	}
	if rerr := s.answerInputs(r.Context(), t, map[string]json.RawMessage{key: answer}, validate); rerr != nil {
		if rerr.status < http.StatusBadRequest {
			rerr.status = http.StatusBadRequest
		}
		writeError(w, nil, rerr)
		return
	}
	w.WriteHeader(http.StatusAccepted)
}
