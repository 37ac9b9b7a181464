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
	"github.com/mcpqueue/mcpqueue/internal/mcpwire"
	"github.com/mcpqueue/mcpqueue/producer"
	"github.com/mcpqueue/mcpqueue/taskstate"
	"github.com/mcpqueue/mcpqueue/vocab"
)

// The 2025-11-25 wire: initialize, sessions (kept in the store, so any
// replica serves any session), experimental tasks (task-augmented
// tools/call, tasks/get|result|list|cancel), and input requests sent to the
// client as server-to-client JSON-RPC requests on a response stream. The
// methods are legacyMethods; the task methods are in tasks.go, the header
// rules in headers.go.

const (
	version20251125   = mcpwire.Version20251125
	metaRelatedTask   = mcpwire.MetaRelatedTask
	inputRequestIDPre = "mcpq-input:" // id of a server-to-client input request: mcpq-input:<task>:<key>
	maxLegacyTTL      = 24 * time.Hour
	legacyListPage    = 50
)

// legacyVersions are the revisions this endpoint negotiates in initialize,
// newest first; tasks exist only in the first.
var legacyVersions = []string{version20251125, "2025-06-18", "2025-03-26"}

// legacyMethods are the 2025-11-25 methods, served in a session
// (initialize, which opens one, is served before).
var legacyMethods = methods[*legacyCall]{
	"ping": func(_ *Server, _ context.Context, w http.ResponseWriter, _ *http.Request, c *legacyCall) {
		writeResult(w, c.req.ID, map[string]any{})
	},
	"tools/list":   (*Server).legacyToolsList,
	"tools/call":   (*Server).legacyToolsCall,
	"prompts/list": (*Server).legacyPromptsList,
	"prompts/get":  (*Server).legacyPromptsGet, // prompts.go
	"resources/list": func(s *Server, ctx context.Context, w http.ResponseWriter, _ *http.Request, c *legacyCall) {
		s.resourceList(ctx, w, c.req.ID, taskstate.KindResource, false) // resources.go
	},
	"resources/templates/list": func(s *Server, ctx context.Context, w http.ResponseWriter, _ *http.Request, c *legacyCall) {
		s.resourceList(ctx, w, c.req.ID, taskstate.KindTemplate, false)
	},
	"resources/read":        (*Server).legacyResourcesRead,
	"resources/subscribe":   (*Server).legacySubscribe,
	"resources/unsubscribe": (*Server).legacySubscribe,
	"completion/complete":   (*Server).legacyComplete, // completion.go
	"logging/setLevel":      (*Server).setLevel,
	"tasks/get":             (*Server).legacyTasks, // tasks.go
	"tasks/result":          (*Server).legacyTasks,
	"tasks/list":            (*Server).legacyTasks,
	"tasks/cancel":          (*Server).legacyTasks,
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
		writeError(w, req.ID, errorf(vocab.CodeInvalidRequest, http.StatusBadRequest, "this server's store keeps no sessions: speak "+version2026))
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
	if rerr := checkSessionVersion(r, sess); rerr != nil {
		writeError(w, req.ID, rerr)
		return
	}
	c := &legacyCall{req: req, sess: sess, owner: sessionOwner(sess)}
	if req.isResponse() {
		s.legacyResponse(w, r, c)
		return
	}
	s.count(string(taskstate.Era20251125), req.Method)
	legacyMethods.serve(s, w, r, req, http.StatusOK, c)
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
		return nil, errorf(vocab.CodeInvalidRequest, http.StatusBadRequest, "Bad Request: "+headerSession+" header is required (call initialize first)")
	}
	sess, err := s.sessions.Session(r.Context(), id)
	if err == nil && sess.Owner != principalOf(r.Context()).Owner() {
		err = taskstate.ErrNotFound // another principal's session is no session at all
	}
	if errors.Is(err, taskstate.ErrNotFound) {
		return nil, errorf(vocab.CodeInvalidRequest, http.StatusNotFound, "Session not found: initialize a new one")
	}
	if err != nil {
		return nil, s.internal("reading session", err)
	}
	return sess, nil
}

func (s *Server) initialize(w http.ResponseWriter, r *http.Request, req *request) {
	var p mcpwire.InitializeParams
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
	// The session keeps these for its life: bounded, like a request body.
	if n := len(p.Capabilities) + len(p.ClientInfo); n > s.cfg.MaxClientData {
		writeError(w, req.ID, invalidParams(fmt.Sprintf("invalid params: clientInfo and capabilities take %d bytes; a session keeps at most %d", n, s.cfg.MaxClientData)).
			withData(map[string]any{"maxClientData": s.cfg.MaxClientData}))
		return
	}
	sess := &taskstate.Session{
		ID: taskstate.NewID(), ProtocolVersion: version, ClientCapabilities: p.Capabilities,
		ClientInfo: p.ClientInfo, CreatedAt: s.cfg.Now().UTC(), Owner: principalOf(r.Context()).Owner(),
	}
	if err := s.sessions.CreateSession(r.Context(), sess, s.cfg.MaxSessions); errors.Is(err, taskstate.ErrSessionLimit) {
		writeError(w, req.ID, errorf(vocab.CodeLimited, http.StatusOK, fmt.Sprintf("too many sessions: a principal keeps at most %d open; end one (HTTP DELETE with its %s) or wait for one to expire", s.cfg.MaxSessions, headerSession)).
			withData(map[string]any{"maxSessions": s.cfg.MaxSessions}))
		return
	} else if err != nil {
		s.internalError(w, req.ID, "creating the session", err)
		return
	}
	s.count(string(taskstate.Era20251125), "initialize")
	s.log.Info().Str("era", string(taskstate.Era20251125)).Str("version", version).RawJSON("client", orNull(p.ClientInfo)).Str("session", sess.ID).Msg("session initialized")
	// Every method this wire serves is declared (a strict client checks
	// before it calls): resources always, for task artifacts if nothing
	// else, with resources/subscribe; logging for logging/setLevel.
	caps := s.catalogCapabilities(r.Context())
	caps["tools"], caps["prompts"], caps["logging"] = map[string]any{}, map[string]any{}, map[string]any{}
	caps["resources"] = map[string]any{"subscribe": true}
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
func (s *Server) setLevel(ctx context.Context, w http.ResponseWriter, _ *http.Request, c *legacyCall) {
	var p mcpwire.SetLevelParams
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

func (s *Server) legacyToolsList(ctx context.Context, w http.ResponseWriter, _ *http.Request, c *legacyCall) {
	listEntries(s, ctx, w, c.req.ID, taskstate.KindTool, "tools", false, func(t *taskstate.ToolInfo) mcpwire.Tool {
		out := toWireTool(t)
		if c.tasks() {
			out.Execution = &mcpwire.ToolExecution{TaskSupport: string(t.TaskSupport)}
		}
		return out
	}, s.mirrorTools(legacyTasksDeclared(c))...)
}

func (s *Server) legacyPromptsList(ctx context.Context, w http.ResponseWriter, _ *http.Request, c *legacyCall) {
	listEntries(s, ctx, w, c.req.ID, taskstate.KindPrompt, "prompts", false, toWirePrompt)
}

func (s *Server) legacyToolsCall(ctx context.Context, w http.ResponseWriter, r *http.Request, c *legacyCall) {
	var p mcpwire.CallToolParams
	if err := json.Unmarshal(c.req.Params, &p); err != nil || p.Name == "" {
		writeError(w, c.req.ID, invalidParams("invalid params: tools/call needs a tool name"))
		return
	}
	if s.serveMirror(ctx, w, r, &mirrorCall{id: c.req.ID, name: p.Name, args: p.Arguments, owner: c.owner, negotiatedTasks: legacyTasksDeclared(c), related: c.tasks()}) {
		return // mirror.go
	}
	tool, rerr := s.lookupTool(ctx, p.Name)
	if rerr != nil {
		writeError(w, c.req.ID, rerr)
		return
	}
	asTask := p.Task != nil && c.tasks()
	switch {
	case asTask && tool.TaskSupport == taskstate.TaskForbidden:
		writeError(w, c.req.ID, errorf(vocab.CodeMethodNotFound, http.StatusOK, fmt.Sprintf("tool %q does not support task-augmented execution", p.Name)))
		return
	case !asTask && tool.TaskSupport == taskstate.TaskRequired && c.tasks():
		writeError(w, c.req.ID, errorf(vocab.CodeMethodNotFound, http.StatusOK, fmt.Sprintf("tool %q requires task-augmented execution (params.task)", p.Name)))
		return
	}
	if bad := s.checkArgs(tool, p.Arguments); bad != nil {
		writeResult(w, c.req.ID, bad)
		return
	}
	key, rerr := idempotencyKey(r, p.Meta) // idem.go
	if rerr != nil {
		writeError(w, c.req.ID, rerr)
		return
	}
	notBefore, rerr := s.notBefore(p.Meta, asTask, "send it task-augmented (params.task), in a session that declared tasks") // scheduled calls: schedule.go
	if rerr != nil {
		writeError(w, c.req.ID, rerr)
		return
	}
	hook, rerr := s.webhookURL(ctx, c.owner, p.Meta) // completion webhooks: webhook.go
	if rerr != nil {
		writeError(w, c.req.ID, rerr)
		return
	}
	if s.refuseTask(ctx, w, c.req.ID, c.owner) {
		return
	}
	req := &producer.Request{
		ID: taskstate.NewID(), Tool: p.Name, Arguments: p.Arguments, Owner: c.owner,
		Era: taskstate.Era20251125, Mode: taskstate.ModeTask, Meta: legacyMeta(c, p.Meta),
		StatusMessage: s.awaiting(tool), NotBefore: notBefore, WebhookURL: hook,
	}
	keyCall(req, key, "")
	if asTask {
		if p.Task.TTL != nil {
			req.TTL = min(max(time.Duration(*p.Task.TTL)*time.Millisecond, time.Second), maxLegacyTTL)
		}
		t, err := s.prod.Create(ctx, req) // a keyed call's existing task as it stands
		if err != nil {
			writeError(w, c.req.ID, s.startError("starting the task", err))
			return
		}
		writeResult(w, c.req.ID, &mcpwire.LegacyCreateTaskResult{Task: s.legacyTask(t)})
		return
	}
	s.legacyInline(ctx, w, r, c, req)
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
			b, _ := json.Marshal(mcpwire.NewRequest(nil, "notifications/tasks/status", s.legacyTask(t)))
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
	var r mcpwire.InputRequest
	_ = json.Unmarshal(raw, &r)
	params := map[string]json.RawMessage{} // the params as stored, plus _meta
	_ = json.Unmarshal(r.Params, &params)
	if params == nil {
		params = map[string]json.RawMessage{}
	}
	if related {
		params["_meta"], _ = json.Marshal(map[string]any{metaRelatedTask: mcpwire.RelatedTask{TaskID: taskID}})
	}
	b, _ := json.Marshal(mcpwire.NewRequest(inputRequestIDPre+taskID+":"+key, r.Method, params))
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
		writeError(w, nil, errorf(rerr.Code, http.StatusBadRequest, rerr.Message))
		return
	}
	answer, validate := c.req.Result, true
	if len(c.req.Error) > 0 {
		// The client refused: the handler's Ask returns this error.
		answer, validate = json.RawMessage(`{"error":`+string(c.req.Error)+`}`), false
	}
	if rerr := s.answerInputs(r.Context(), t, map[string]json.RawMessage{key: answer}, validate, true); rerr != nil {
		if rerr.status < http.StatusBadRequest {
			rerr.status = http.StatusBadRequest
		}
		writeError(w, nil, rerr)
		return
	}
	w.WriteHeader(http.StatusAccepted)
}

// legacyMeta is the job meta of a 2025-11-25 call: the request's progress
// token, and the session's log level and client capabilities.
func legacyMeta(c *legacyCall, reqMeta map[string]json.RawMessage) map[string]json.RawMessage {
	meta := map[string]json.RawMessage{}
	if v, ok := reqMeta[vocab.MetaProgressToken]; ok {
		meta[vocab.MetaProgressToken] = v
	}
	if c.sess.LogLevel != "" {
		meta[vocab.MetaLogLevel], _ = json.Marshal(c.sess.LogLevel)
	}
	if len(c.sess.ClientCapabilities) > 0 {
		meta[vocab.MetaClientCaps] = c.sess.ClientCapabilities
	}
	return meta
}

// legacyAnswer answers a 2025-11-25 request served inline: rerr if set,
// else the api's own result when there is no job (req nil), else, once the
// owner may start a task, the job (with the request's _meta) through
// legacyInline.
func (s *Server) legacyAnswer(ctx context.Context, w http.ResponseWriter, r *http.Request, c *legacyCall, rerr *rpcError, own json.RawMessage, req *producer.Request, meta map[string]json.RawMessage) {
	switch {
	case rerr != nil:
		writeError(w, c.req.ID, rerr)
	case req == nil:
		writeResult(w, c.req.ID, own)
	case !s.refuseTask(ctx, w, c.req.ID, c.owner):
		req.Meta = legacyMeta(c, meta)
		s.legacyInline(ctx, w, r, c, req)
	}
}

// legacyInline runs req (a tool call, prompts/get, resources/read or
// completion/complete of a 2025-era session) while the client waits: input
// requests reach it as server-to-client requests on the response stream,
// and the reply is the outcome. The call is cancelled if the client goes
// away; past HandleAfter it is handed over (mirror.go).
func (s *Server) legacyInline(ctx context.Context, w http.ResponseWriter, r *http.Request, c *legacyCall, req *producer.Request) {
	// Input requests of a 2025-era call travel on the record (as in a task)
	// and reach the client as server-to-client requests on a stream.
	req.Era, req.Mode = taskstate.Era20251125, taskstate.ModeTask
	follow := s.followOf(req, legacyTasksDeclared(c))
	ctx, cancel := context.WithTimeout(ctx, s.cfg.HandleAfter)
	defer cancel()
	out := &replier{w: w, id: c.req.ID}
	final, err := s.streamTask(ctx, r, out, req.ID, streamOpts{
		progress: req.Meta[vocab.MetaProgressToken] != nil || req.Meta[vocab.MetaLogLevel] != nil,
		create:   func() error { _, err := s.prod.Create(ctx, req); return err },
	})
	if errors.Is(err, errNotStarted) {
		writeError(w, c.req.ID, s.startError("starting the call", err))
		return
	}
	if err != nil {
		if errors.Is(err, context.DeadlineExceeded) && s.handOver(ctx, out, req, follow, "") {
			return // the task runs on
		}
		dctx, dcancel := detach(ctx)
		defer dcancel()
		fate := s.abandon(dctx, req) // idem.go: cancelled unless keyed
		if errors.Is(err, context.DeadlineExceeded) {
			out.fail(errorf(vocab.CodeInternalError, http.StatusOK, fmt.Sprintf("%s did not finish within %s; %s", describe(req), s.cfg.HandleAfter, fate)))
		} else if e := shutdownError(ctx, "the call was cancelled: call again"); e != nil {
			out.fail(e)
		}
		return
	}
	s.replyOutcome(ctx, out, final, nil)
}

// describe names what a request runs, for messages.
func describe(req *producer.Request) string {
	switch req.Kind {
	case taskstate.KindTool:
		return fmt.Sprintf("tool %q", clip(req.Tool))
	case taskstate.KindResource, taskstate.KindTemplate:
		return "resources/read"
	}
	return fmt.Sprintf("%s %q", req.Kind, clip(req.Tool))
}
