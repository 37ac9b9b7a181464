package mcpfront

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/mcpqueue/mcpqueue/internal/mcpwire"
	"github.com/mcpqueue/mcpqueue/producer"
	"github.com/mcpqueue/mcpqueue/taskstate"
	"github.com/mcpqueue/mcpqueue/telemetry"
	"github.com/mcpqueue/mcpqueue/vocab"
)

// The 2026-07-28 revision and its tasks extension: no session, every request
// carries its version and client capabilities in _meta (decodeModern). The
// methods are modernMethods; the task methods are in tasks.go, the header
// rules in headers.go.
const (
	version2026         = mcpwire.Version20260728
	tasksExtension      = mcpwire.TasksExtension
	metaVersion         = mcpwire.MetaProtocolVersion
	metaClientCaps      = mcpwire.MetaClientCapabilities
	metaServerInfo      = mcpwire.MetaServerInfo
	discoverTTLMs       = 3600000
	listTTLMs           = 5000 // tools come and go with workers: cache briefly
	resultComplete      = mcpwire.ResultComplete
	resultTask          = mcpwire.ResultTask
	resultInputRequired = mcpwire.ResultInputRequired
	metaLogLevel        = mcpwire.MetaLogLevel
	defaultPollMs       = 500
	maxProgressWait     = time.Second
)

var supportedVersions = []string{version2026}

// modernParams is what every 2026-07-28 request carries besides its own
// fields, plus the fields the routing headers mirror and tools/call reads:
// one decode serves the envelope checks and the handler. Fields whose type
// is checked later stay raw.
type modernParams struct {
	Meta           map[string]json.RawMessage `json:"_meta"`
	Name           json.RawMessage            `json:"name"`
	URI            json.RawMessage            `json:"uri"`
	TaskID         json.RawMessage            `json:"taskId"`
	Arguments      json.RawMessage            `json:"arguments"`
	InputResponses json.RawMessage            `json:"inputResponses"`
	RequestState   json.RawMessage            `json:"requestState"`
}

// modernMethods are the 2026-07-28 methods.
var modernMethods = methods[*call]{
	"server/discover": func(s *Server, ctx context.Context, w http.ResponseWriter, _ *http.Request, c *call) {
		writeResult(w, c.req.ID, s.discover(s.catalogCapabilities(ctx)))
	},
	"tools/list":   (*Server).toolsList,
	"tools/call":   (*Server).toolsCall,
	"prompts/list": (*Server).promptsList, // prompts.go
	"prompts/get":  (*Server).promptsGet,
	"resources/list": func(s *Server, ctx context.Context, w http.ResponseWriter, _ *http.Request, c *call) {
		s.resourceList(ctx, w, c.req.ID, taskstate.KindResource, true) // resources.go
	},
	"resources/templates/list": func(s *Server, ctx context.Context, w http.ResponseWriter, _ *http.Request, c *call) {
		s.resourceList(ctx, w, c.req.ID, taskstate.KindTemplate, true)
	},
	"resources/read":       (*Server).resourcesRead,
	"completion/complete":  (*Server).complete, // completion.go
	"tasks/get":            (*Server).tasksGet, // tasks.go
	"tasks/update":         (*Server).tasksUpdate,
	"tasks/cancel":         (*Server).tasksCancel,
	"subscriptions/listen": (*Server).subscriptionsListen, // listen.go
}

// call is one decoded 2026-07-28 request.
type call struct {
	req      *request
	p        *modernParams // the params, decoded once
	meta     map[string]json.RawMessage
	tasksExt bool // the request declared the tasks extension
	owner    string
}

func (s *Server) serveModern(w http.ResponseWriter, r *http.Request, req *request) {
	c, rerr := s.decodeModern(r, req)
	if rerr != nil {
		writeError(w, req.ID, rerr)
		return
	}
	s.count(string(taskstate.Era20260728), req.Method)
	modernMethods.serve(s, w, r, req, http.StatusNotFound, c)
}

// decodeModern checks the envelope every 2026-07-28 request must have: the
// version in _meta and in the header, client capabilities, and the routing
// headers mirroring the body.
func (s *Server) decodeModern(r *http.Request, req *request) (*call, *rpcError) {
	var p modernParams
	if req.spans != nil && req.spans.modernParams(req.body, &p) {
		// decoded from checkBody's notes (body.go)
	} else if len(req.Params) > 0 {
		p = modernParams{}
		if err := json.Unmarshal(req.Params, &p); err != nil {
			return nil, errorf(vocab.CodeInvalidParams, http.StatusBadRequest, "invalid params: "+err.Error())
		}
	}
	if req.Method == "initialize" {
		return nil, errorf(vocab.CodeMethodNotFound, http.StatusNotFound, "Method not found: initialize (this server speaks "+version2026+", which has no initialize)").
			withData(map[string]any{"supported": supportedVersions, "requested": requestedVersion(req.Params)})
	}
	var version string
	if raw, ok := p.Meta[metaVersion]; ok {
		if err := unmarshalString(raw, &version); err != nil {
			return nil, errorf(vocab.CodeInvalidParams, http.StatusBadRequest, "invalid _meta: "+metaVersion+" must be a string")
		}
	}
	if rerr := checkVersionHeader(r, version); rerr != nil {
		return nil, rerr
	}
	rawCaps, ok := p.Meta[metaClientCaps]
	if !ok {
		return nil, errorf(vocab.CodeInvalidParams, http.StatusBadRequest, "missing _meta."+metaClientCaps)
	}
	var caps mcpwire.ClientCapabilities
	if err := json.Unmarshal(rawCaps, &caps); err != nil || string(rawCaps) == "null" {
		return nil, errorf(vocab.CodeInvalidParams, http.StatusBadRequest, "invalid _meta."+metaClientCaps+": must be an object")
	}
	if err := checkRoutingHeaders(r, req, &p); err != nil {
		return nil, err
	}
	ext := caps.Declares(tasksExtension) // with a settings object
	return &call{req: req, p: &p, meta: p.Meta, tasksExt: ext, owner: principalOf(r.Context()).Owner()}, nil
}

func unsupportedVersion(v string) *rpcError {
	return errorf(vocab.CodeUnsupportedVersion, http.StatusBadRequest, fmt.Sprintf("unsupported protocol version %q", v)).
		withData(map[string]any{"supported": supportedVersions, "requested": v})
}

func requestedVersion(params json.RawMessage) string {
	var p mcpwire.InitializeParams
	_ = json.Unmarshal(params, &p)
	return p.ProtocolVersion
}

func (s *Server) serverInfo() map[string]any {
	return map[string]any{"name": s.cfg.Name, "version": s.cfg.Version}
}

func (s *Server) resultMeta() map[string]any {
	return map[string]any{metaServerInfo: s.serverInfo()}
}

// discover is server/discover's answer; extra are capabilities the catalog
// implies (completions). Every method served is declared: resources always
// (task artifacts; this wire has no resources/subscribe), logging for the
// log messages a request asking for them (_meta logLevel) gets.
func (s *Server) discover(extra map[string]any) map[string]any {
	caps := map[string]any{
		"tools":      map[string]any{},
		"prompts":    map[string]any{},
		"resources":  map[string]any{},
		"logging":    map[string]any{},
		"extensions": map[string]any{tasksExtension: map[string]any{}},
	}
	for k, v := range extra {
		caps[k] = v
	}
	d := map[string]any{
		"resultType":        resultComplete,
		"supportedVersions": supportedVersions,
		"capabilities":      caps,
		"serverInfo":        s.serverInfo(),
		"ttlMs":             discoverTTLMs,
		"cacheScope":        "public",
		"_meta":             s.resultMeta(),
	}
	if s.cfg.Instructions != "" {
		d["instructions"] = s.cfg.Instructions
	}
	return d
}

func (s *Server) toolsList(ctx context.Context, w http.ResponseWriter, _ *http.Request, c *call) {
	listEntries(s, ctx, w, c.req.ID, taskstate.KindTool, "tools", true, toWireTool, s.mirrorTools(c.tasksExt)...)
}

// listEntries answers a list method: the catalog's entries of kind, each
// in its wire form (one), under field; modern adds what every 2026-07-28
// list carries; extra entries (the mirror tools) come last.
func listEntries[T any](s *Server, ctx context.Context, w http.ResponseWriter, id json.RawMessage, kind, field string, modern bool, one func(*taskstate.ToolInfo) T, extra ...*taskstate.ToolInfo) {
	entries, ok := s.entries(ctx, w, id, kind)
	if !ok {
		return
	}
	entries = withMirrors(entries, extra)
	out := make([]T, len(entries))
	for i, t := range entries {
		out[i] = one(t)
	}
	res := map[string]any{field: out}
	if modern {
		res["resultType"], res["ttlMs"], res["cacheScope"], res["_meta"] = resultComplete, listTTLMs, "public", s.resultMeta()
	}
	writeResult(w, id, res)
}

// entries lists the catalog's entries of one kind; on failure it answers
// and reports false.
func (s *Server) entries(ctx context.Context, w http.ResponseWriter, id json.RawMessage, kind string) ([]*taskstate.ToolInfo, bool) {
	all, err := s.catalog.Tools(ctx)
	if err != nil {
		s.internalError(w, id, "reading the catalog", err)
		return nil, false
	}
	out := all[:0:0]
	for _, t := range all {
		if t.Kind == kind {
			out = append(out, t)
		}
	}
	return out, true
}

// toWireTool is a catalog tool as tools/list gives it (without the
// 2025-11-25 execution member).
func toWireTool(t *taskstate.ToolInfo) mcpwire.Tool {
	return mcpwire.Tool{Name: t.Name, Title: t.Title, Description: t.Description, InputSchema: t.InputSchema, OutputSchema: t.OutputSchema, Annotations: t.Annotations}
}

func (s *Server) internalError(w http.ResponseWriter, id json.RawMessage, what string, err error) {
	writeError(w, id, s.internal(what, err))
}

// internal logs err and returns the HTTP 500 error that names what failed.
func (s *Server) internal(what string, err error) *rpcError {
	s.log.Error().Err(err).Msg(what)
	return errorf(vocab.CodeInternalError, http.StatusInternalServerError, "internal error: "+what)
}

// callParams types the tools/call and prompts/get fields decoded with the envelope.
func (c *call) callParams() (*callParams, *rpcError) {
	p := &callParams{Arguments: c.p.Arguments, InputResponses: c.p.InputResponses}
	for _, f := range []struct {
		raw  json.RawMessage
		into *string
		name string
	}{{c.p.Name, &p.Name, "name"}, {c.p.RequestState, &p.RequestState, "requestState"}} {
		if f.raw != nil && string(f.raw) != "null" {
			if err := unmarshalString(f.raw, f.into); err != nil {
				return nil, invalidParams(fmt.Sprintf("invalid params: %q must be a string", f.name))
			}
		}
	}
	return p, nil
}

// callParams are the params of tools/call and prompts/get, MRTR fields included.
type callParams struct {
	Name           string          `json:"name"`
	Arguments      json.RawMessage `json:"arguments"`
	InputResponses json.RawMessage `json:"inputResponses"` // "null" when sent as null
	RequestState   string          `json:"requestState"`
}

func (s *Server) toolsCall(ctx context.Context, w http.ResponseWriter, r *http.Request, c *call) {
	p, rerr := c.callParams()
	if rerr != nil {
		writeError(w, c.req.ID, rerr)
		return
	}
	if p.Name == "" {
		writeError(w, c.req.ID, invalidParams("invalid params: missing tool name"))
		return
	}
	if s.serveMirror(ctx, w, r, &mirrorCall{id: c.req.ID, name: p.Name, args: p.Arguments, owner: c.owner, negotiatedTasks: c.tasksExt, rt: resultComplete}) {
		return // mirror.go
	}
	tool, rerr := s.lookupTool(ctx, p.Name)
	if rerr == nil {
		rerr = s.checkParamHeaders(r, tool, p.Arguments) // SEP-2243, headers.go
	}
	if rerr != nil {
		writeError(w, c.req.ID, rerr)
		return
	}
	if tool.TaskSupport == taskstate.TaskRequired && !c.tasksExt {
		writeError(w, c.req.ID, errorf(vocab.CodeMissingCapability, http.StatusBadRequest,
			fmt.Sprintf("tool %q runs only as a task; declare the %s extension in _meta.%s", p.Name, tasksExtension, metaClientCaps)).
			withData(map[string]any{"requiredCapabilities": map[string]any{"extensions": map[string]any{tasksExtension: map[string]any{}}}}))
		return
	}
	if bad := s.checkArgs(tool, p.Arguments); bad != nil {
		bad["resultType"] = resultComplete
		writeResult(w, c.req.ID, bad)
		return
	}
	answers, rerr := s.gatherAnswers(c.owner, p.Name, p)
	if rerr != nil {
		writeError(w, c.req.ID, rerr)
		return
	}
	key, rerr := idempotencyKey(r, c.meta) // idem.go
	if rerr != nil {
		writeError(w, c.req.ID, rerr)
		return
	}
	hook, rerr := s.webhookURL(ctx, c.owner, c.meta) // completion webhooks: webhook.go
	if rerr != nil {
		writeError(w, c.req.ID, rerr)
		return
	}
	if s.refuseTask(ctx, w, c.req.ID, c.owner) {
		return
	}

	mode := taskstate.ModeSync
	if c.tasksExt && tool.TaskSupport != taskstate.TaskForbidden {
		mode = taskstate.ModeTask
		if tool.InputFirst {
			mode = taskstate.ModeGather
		}
	}
	notBefore, rerr := s.notBefore(c.meta, mode == taskstate.ModeTask, // scheduled calls: schedule.go
		"declare the "+tasksExtension+" extension (and call a tool that may run as a task and does not ask for input first)")
	if rerr != nil {
		writeError(w, c.req.ID, rerr)
		return
	}
	req := &producer.Request{
		ID: taskstate.NewID(), Tool: p.Name, Arguments: p.Arguments, Owner: c.owner,
		Era: taskstate.Era20260728, Mode: mode, Meta: jobMeta(c.meta, answers),
		StatusMessage: s.awaiting(tool), NotBefore: notBefore, WebhookURL: hook,
	}
	keyCall(req, key, p.RequestState)
	if mode == taskstate.ModeTask {
		versions, stop := s.followInline(ctx, tool, req.ID) // before the create: no version is missed
		defer stop()
		t, created, err := s.prod.CreateOrGet(ctx, req)
		if err != nil {
			writeError(w, c.req.ID, s.startError("starting the task", err))
			return
		}
		if !created {
			s.replyExisting(ctx, w, c, tool, t) // idem.go
			return
		}
		if final := awaitInline(versions); final != nil && s.replyInline(ctx, w, c, final) {
			return
		}
		writeResult(w, c.req.ID, s.createTaskResult(t))
		return
	}
	s.syncCall(ctx, w, r, c, req, answers)
}

// awaiting is the first statusMessage of a task of tool: that no worker
// serves it right now (its pool is scaled to zero, or being replaced), or
// none. The task queues all the same and runs when a worker starts.
func (s *Server) awaiting(tool *taskstate.ToolInfo) string {
	if tool.Live(s.cfg.Now()) {
		return ""
	}
	return taskstate.AwaitingWorker(tool.Name)
}

// lookupTool finds a tool in the catalog.
func (s *Server) lookupTool(ctx context.Context, name string) (*taskstate.ToolInfo, *rpcError) {
	tool, err := s.catalog.Tool(ctx, name)
	if errors.Is(err, taskstate.ErrNotFound) {
		return nil, invalidParams("Unknown tool: " + clip(name))
	}
	if err != nil {
		return nil, s.internal("reading the tool catalog", err)
	}
	return tool, nil
}

// checkArgs validates arguments against the tool's input schema. Invalid
// arguments are a tool execution error the model can correct: the returned
// result (nil when valid) says what is wrong.
func (s *Server) checkArgs(tool *taskstate.ToolInfo, args json.RawMessage) map[string]any {
	err := s.validateArgs(tool, args)
	if err == nil {
		return nil
	}
	return map[string]any{
		"content": []map[string]any{{"type": "text", "text": fmt.Sprintf("invalid arguments for tool %q: %v", tool.Name, err)}},
		"isError": true,
		"_meta":   s.resultMeta(),
	}
}

// jobMeta keeps what a worker may need from the request _meta, plus the MRTR
// answers gathered so far.
func jobMeta(meta map[string]json.RawMessage, answers map[string]json.RawMessage) map[string]json.RawMessage {
	out := map[string]json.RawMessage{}
	for _, k := range []string{vocab.MetaProgressToken, telemetry.MetaTraceParent, telemetry.MetaTraceState} {
		if v, ok := meta[k]; ok {
			out[k] = v
		}
	}
	if v, ok := meta[metaLogLevel]; ok {
		out[vocab.MetaLogLevel] = v
	}
	if v, ok := meta[metaClientCaps]; ok {
		out[vocab.MetaClientCaps] = v
	}
	if len(answers) > 0 {
		out[vocab.MetaInputResponses], _ = json.Marshal(answers)
	}
	return out
}
