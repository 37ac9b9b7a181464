package mcpfront

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/mcpqueue/mcpqueue/producer"
	"github.com/mcpqueue/mcpqueue/taskstate"
)

// The 2026-07-28 revision and its tasks extension.
const (
	version2026         = "2026-07-28"
	tasksExtension      = "io.modelcontextprotocol/tasks"
	metaVersion         = "io.modelcontextprotocol/protocolVersion"
	metaClientCaps      = "io.modelcontextprotocol/clientCapabilities"
	metaServerInfo      = "io.modelcontextprotocol/serverInfo"
	headerVersion       = "MCP-Protocol-Version"
	headerMethod        = "Mcp-Method"
	headerName          = "Mcp-Name"
	discoverTTLMs       = 3600000
	listTTLMs           = 5000 // tools come and go with workers: cache briefly
	resultComplete      = "complete"
	resultTask          = "task"
	resultInputRequired = "input_required"
	metaLogLevel        = "io.modelcontextprotocol/logLevel"
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

type clientCaps struct {
	Extensions map[string]json.RawMessage `json:"extensions"`
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
	ctx := r.Context()
	switch req.Method {
	case "server/discover":
		writeResult(w, req.ID, s.discover(s.catalogCapabilities(ctx, false)))
	case "tools/list":
		s.toolsList(ctx, w, c)
	case "tools/call":
		s.toolsCall(ctx, w, r, c)
	case "prompts/list":
		s.promptsList(ctx, w, c)
	case "prompts/get":
		s.promptsGet(ctx, w, r, c)
	case "resources/list", "resources/templates/list": // resources.go
		s.resourceList(ctx, w, req.ID, resourceListKind(req.Method), true)
	case "resources/read":
		s.resourcesRead(ctx, w, r, c)
	case "completion/complete": // completion.go
		s.complete(ctx, w, r, c)
	case "tasks/get":
		s.tasksGet(ctx, w, c)
	case "tasks/update":
		s.tasksUpdate(ctx, w, c)
	case "tasks/cancel":
		s.tasksCancel(ctx, w, c)
	case "subscriptions/listen":
		s.subscriptionsListen(ctx, w, r, c)
	default:
		writeError(w, req.ID, errorf(codeMethodNotFound, http.StatusNotFound, "Method not found: "+clip(req.Method)))
	}
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
			return nil, errorf(codeInvalidParams, http.StatusBadRequest, "invalid params: "+err.Error())
		}
	}
	if req.Method == "initialize" {
		return nil, errorf(codeMethodNotFound, http.StatusNotFound, "Method not found: initialize (this server speaks "+version2026+", which has no initialize)").
			withData(map[string]any{"supported": supportedVersions, "requested": requestedVersion(req.Params)})
	}
	var version string
	if raw, ok := p.Meta[metaVersion]; ok {
		if err := unmarshalString(raw, &version); err != nil {
			return nil, errorf(codeInvalidParams, http.StatusBadRequest, "invalid _meta: "+metaVersion+" must be a string")
		}
	}
	hv := r.Header.Get(headerVersion)
	switch {
	case version == "" && hv != "" && hv != version2026:
		return nil, unsupportedVersion(hv)
	case version == "":
		return nil, errorf(codeInvalidParams, http.StatusBadRequest, "missing _meta."+metaVersion)
	case hv == "":
		return nil, errorf(codeHeaderMismatch, http.StatusBadRequest, "missing "+headerVersion+" header")
	case hv != version:
		return nil, errorf(codeHeaderMismatch, http.StatusBadRequest, fmt.Sprintf("%s header %q does not match _meta protocol version %q", headerVersion, hv, version))
	case version != version2026:
		return nil, unsupportedVersion(version)
	}
	rawCaps, ok := p.Meta[metaClientCaps]
	if !ok {
		return nil, errorf(codeInvalidParams, http.StatusBadRequest, "missing _meta."+metaClientCaps)
	}
	var caps clientCaps
	if err := json.Unmarshal(rawCaps, &caps); err != nil || string(rawCaps) == "null" {
		return nil, errorf(codeInvalidParams, http.StatusBadRequest, "invalid _meta."+metaClientCaps+": must be an object")
	}
	if err := checkRoutingHeaders(r, req, &p); err != nil {
		return nil, err
	}
	settings := caps.Extensions[tasksExtension]
	ext := len(settings) > 0 && settings[0] == '{' // declared with a settings object
	return &call{req: req, p: &p, meta: p.Meta, tasksExt: ext, owner: principalOf(r.Context()).Owner()}, nil
}

func unsupportedVersion(v string) *rpcError {
	return errorf(codeUnsupportedVer, http.StatusBadRequest, fmt.Sprintf("unsupported protocol version %q", v)).
		withData(map[string]any{"supported": supportedVersions, "requested": v})
}

func requestedVersion(params json.RawMessage) string {
	var p struct {
		ProtocolVersion string `json:"protocolVersion"`
	}
	_ = json.Unmarshal(params, &p)
	return p.ProtocolVersion
}

// checkRoutingHeaders enforces Mcp-Method and Mcp-Name (SEP-2243).
func checkRoutingHeaders(r *http.Request, req *request, p *modernParams) *rpcError {
	hm := r.Header.Get(headerMethod)
	if hm == "" {
		return errorf(codeHeaderMismatch, http.StatusBadRequest, "missing "+headerMethod+" header")
	}
	if hm != req.Method {
		return errorf(codeHeaderMismatch, http.StatusBadRequest, fmt.Sprintf("%s header %q does not match method %q", headerMethod, hm, req.Method))
	}
	var field string
	var raw json.RawMessage
	switch req.Method {
	case "tools/call", "prompts/get":
		field, raw = "name", p.Name
	case "resources/read":
		field, raw = "uri", p.URI
	case "tasks/get", "tasks/update", "tasks/cancel":
		field, raw = "taskId", p.TaskID
	default:
		return nil
	}
	var want string
	if raw != nil {
		if err := unmarshalString(raw, &want); err != nil {
			return errorf(codeInvalidParams, http.StatusOK, fmt.Sprintf("invalid params: %q must be a string", field))
		}
	}
	values := r.Header.Values(headerName)
	if len(values) == 0 {
		return errorf(codeHeaderMismatch, http.StatusBadRequest, "missing "+headerName+" header")
	}
	got := decodeHeaderValue(values[0])
	for _, v := range values[1:] {
		if decodeHeaderValue(v) != got {
			return errorf(codeHeaderMismatch, http.StatusBadRequest, fmt.Sprintf("conflicting %s headers", headerName))
		}
	}
	if got != want {
		return errorf(codeHeaderMismatch, http.StatusBadRequest, fmt.Sprintf("%s header %q does not match params.%s %q", headerName, got, field, want))
	}
	return nil
}

// decodeHeaderValue undoes the =?base64?…?= wrapping of non-ASCII values.
func decodeHeaderValue(v string) string {
	if inner, ok := strings.CutPrefix(v, "=?base64?"); ok {
		if inner, ok = strings.CutSuffix(inner, "?="); ok {
			if b, err := base64.StdEncoding.DecodeString(inner); err == nil {
				return string(b)
			}
		}
	}
	return v
}

func (s *Server) serverInfo() map[string]any {
	return map[string]any{"name": s.cfg.Name, "version": s.cfg.Version}
}

func (s *Server) resultMeta() map[string]any {
	return map[string]any{metaServerInfo: s.serverInfo()}
}

// discover is server/discover's answer; extra are capabilities the catalog
// implies (resources, completions).
func (s *Server) discover(extra map[string]any) map[string]any {
	caps := map[string]any{
		"tools":      map[string]any{},
		"prompts":    map[string]any{},
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

type wireTool struct {
	Name         string          `json:"name"`
	Title        string          `json:"title,omitempty"`
	Description  string          `json:"description,omitempty"`
	InputSchema  json.RawMessage `json:"inputSchema"`
	OutputSchema json.RawMessage `json:"outputSchema,omitempty"`
	Annotations  json.RawMessage `json:"annotations,omitempty"`
}

func (s *Server) toolsList(ctx context.Context, w http.ResponseWriter, c *call) {
	tools, ok := s.entries(ctx, w, c.req.ID, taskstate.KindTool)
	if !ok {
		return
	}
	out := make([]wireTool, len(tools))
	for i, t := range tools {
		out[i] = toWireTool(t)
	}
	writeResult(w, c.req.ID, map[string]any{"resultType": resultComplete, "tools": out, "ttlMs": listTTLMs, "cacheScope": "public", "_meta": s.resultMeta()})
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

func toWireTool(t *taskstate.ToolInfo) wireTool {
	return wireTool{Name: t.Name, Title: t.Title, Description: t.Description, InputSchema: t.InputSchema, OutputSchema: t.OutputSchema, Annotations: t.Annotations}
}

func (s *Server) internalError(w http.ResponseWriter, id json.RawMessage, what string, err error) {
	s.log.Error().Err(err).Msg(what)
	writeError(w, id, errorf(codeInternal, http.StatusInternalServerError, "internal error: "+what))
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
	tool, rerr := s.lookupTool(ctx, p.Name)
	if rerr == nil {
		rerr = s.checkParamHeaders(r, tool, p.Arguments) // SEP-2243, params.go
	}
	if rerr != nil {
		writeError(w, c.req.ID, rerr)
		return
	}
	if tool.TaskSupport == taskstate.TaskRequired && !c.tasksExt {
		writeError(w, c.req.ID, errorf(codeMissingCapability, http.StatusBadRequest,
			fmt.Sprintf("tool %q runs only as a task; declare the %s extension in _meta.%s", p.Name, tasksExtension, metaClientCaps)).
			withData(map[string]any{"requiredCapabilities": map[string]any{"extensions": map[string]any{tasksExtension: map[string]any{}}}}))
		return
	}
	if bad := s.checkArgs(tool, p.Arguments); bad != nil {
		bad["resultType"] = resultComplete
		writeResult(w, c.req.ID, bad)
		return
	}
	answers, rerr := s.gatherAnswers(p.Name, p)
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
	req := &producer.Request{
		ID: taskstate.NewID(), Tool: p.Name, Arguments: p.Arguments, Owner: c.owner,
		Era: taskstate.Era20260728, Mode: mode, Meta: jobMeta(c.meta, answers),
		StatusMessage: s.awaiting(tool),
	}
	if mode == taskstate.ModeTask {
		versions, stop := s.followInline(ctx, tool, req.ID) // before the create: no version is missed
		defer stop()
		t, err := s.prod.Create(ctx, req)
		if err != nil {
			s.internalError(w, c.req.ID, "starting the task", err)
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
		s.log.Error().Err(err).Msg("reading the tool catalog")
		return nil, errorf(codeInternal, http.StatusInternalServerError, "internal error: reading the tool catalog")
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
	for _, k := range []string{"progressToken", "traceparent", "tracestate"} {
		if v, ok := meta[k]; ok {
			out[k] = v
		}
	}
	if v, ok := meta[metaLogLevel]; ok {
		out["logLevel"] = v
	}
	if v, ok := meta[metaClientCaps]; ok {
		out["clientCapabilities"] = v
	}
	if len(answers) > 0 {
		out["inputResponses"], _ = json.Marshal(answers)
	}
	return out
}

type taskParams struct {
	TaskID         string                     `json:"taskId"`
	InputResponses map[string]json.RawMessage `json:"inputResponses"`
}

// taskFor decodes params, checks the extension was declared and loads the
// task the caller may see. Another principal's task looks exactly like an
// unknown one.
func (s *Server) taskFor(ctx context.Context, c *call) (*taskParams, *taskstate.Task, *rpcError) {
	if !c.tasksExt {
		return nil, nil, errorf(codeMissingCapability, http.StatusBadRequest, c.req.Method+" needs the "+tasksExtension+" extension declared in _meta."+metaClientCaps).
			withData(map[string]any{"requiredCapabilities": map[string]any{"extensions": map[string]any{tasksExtension: map[string]any{}}}})
	}
	var p taskParams
	if c.p.TaskID != nil && unmarshalString(c.p.TaskID, &p.TaskID) != nil {
		return nil, nil, invalidParams(`invalid params: "taskId" must be a string`)
	}
	if c.p.InputResponses != nil && json.Unmarshal(c.p.InputResponses, &p.InputResponses) != nil {
		return nil, nil, invalidParams("invalid params: inputResponses must be an object mapping request keys to results")
	}
	if p.TaskID == "" {
		return nil, nil, invalidParams("invalid params: missing taskId")
	}
	t, rerr := s.ownedTask(ctx, c.req.Method, p.TaskID, c.owner)
	return &p, t, rerr
}

// ownedTask loads a task owner may see; another owner's task gets exactly
// the answer an unknown id gets. Such a refusal is written to the audit log
// (method is what was attempted). A finished task read here counts towards
// its tool's typical duration (poll.go).
func (s *Server) ownedTask(ctx context.Context, method, id, owner string) (*taskstate.Task, *rpcError) {
	t, err := s.store.Get(ctx, id)
	if err == nil && t.Owner != owner {
		s.log.Warn().Bool("audit", true).Str("principal", owner).Str("method", method).Str("task", id).Str("task_owner", t.Owner).
			Msg("task access denied: the task belongs to another principal")
	}
	if errors.Is(err, taskstate.ErrNotFound) || err == nil && t.Owner != owner {
		return nil, invalidParams("Task not found: " + clip(id))
	}
	if err != nil {
		s.log.Error().Err(err).Str("task", id).Msg("reading task")
		return nil, errorf(codeInternal, http.StatusInternalServerError, "internal error: reading task")
	}
	s.durations.observe(t)
	return t, nil
}

func (s *Server) tasksGet(ctx context.Context, w http.ResponseWriter, c *call) {
	_, t, rerr := s.taskFor(ctx, c)
	if rerr != nil {
		writeError(w, c.req.ID, rerr)
		return
	}
	if s.streamResult(ctx, w, c.req.ID, t) {
		return
	}
	t, err := s.resolved(ctx, t)
	if err != nil {
		s.log.Error().Err(err).Msg("tasks/get")
		writeError(w, c.req.ID, resultMissing(err))
		return
	}
	writeResult(w, c.req.ID, s.detailedTask(t))
}

func (s *Server) ack(w http.ResponseWriter, id json.RawMessage) {
	writeResult(w, id, map[string]any{"resultType": resultComplete, "_meta": s.resultMeta()})
}

func (s *Server) tasksCancel(ctx context.Context, w http.ResponseWriter, c *call) {
	p, t, rerr := s.taskFor(ctx, c)
	if rerr != nil {
		writeError(w, c.req.ID, rerr)
		return
	}
	if !t.Status.Terminal() {
		if _, err := s.prod.Cancel(ctx, p.TaskID, "cancelled by the client"); err != nil && !errors.Is(err, producer.ErrTerminal) {
			s.internalError(w, c.req.ID, "cancelling the task", err)
			return
		}
	}
	s.ack(w, c.req.ID)
}

func (s *Server) tasksUpdate(ctx context.Context, w http.ResponseWriter, c *call) {
	p, t, rerr := s.taskFor(ctx, c)
	if rerr != nil {
		writeError(w, c.req.ID, rerr)
		return
	}
	if p.InputResponses == nil {
		writeError(w, c.req.ID, invalidParams("invalid params: inputResponses must be an object mapping request keys to results"))
		return
	}
	if rerr := s.answerInputs(ctx, t, p.InputResponses, true); rerr != nil {
		writeError(w, c.req.ID, rerr)
		return
	}
	s.ack(w, c.req.ID)
}

// answerInputs stores answers to a task's outstanding input requests (from
// tasks/update, or a 2025-11-25 client's response): every answer is checked
// before anything changes; keys not outstanding are ignored. The worker
// waiting on the task sees them through the record's change feed, on
// whichever replica this runs.
func (s *Server) answerInputs(ctx context.Context, t *taskstate.Task, responses map[string]json.RawMessage, validate bool) *rpcError {
	for k, v := range responses {
		if !validate {
			break
		}
		raw, open := t.InputRequests[k]
		if !open {
			continue
		}
		var req struct {
			Method string `json:"method"`
		}
		_ = json.Unmarshal(raw, &req)
		if err := validateInputResponse(req.Method, v); err != nil {
			return invalidParams(fmt.Sprintf("invalid params: inputResponses[%q]: %v", k, err))
		}
	}
	resume := false
	t, err := taskstate.Mutate(ctx, s.store, t.ID, s.cfg.Now, func(t *taskstate.Task) error {
		resume = false
		n := 0
		for k, v := range responses {
			if _, ok := t.InputRequests[k]; !ok {
				continue
			}
			if t.InputResponses == nil {
				t.InputResponses = map[string]json.RawMessage{}
			}
			t.InputResponses[k] = v
			delete(t.InputRequests, k)
			n++
		}
		if n == 0 {
			return taskstate.ErrSkip
		}
		if len(t.InputRequests) == 0 && t.Status == taskstate.InputRequired {
			t.Status = taskstate.Working
			if t.Parked != nil {
				// The task waited with no run: this write resumes it
				// (one writer wins), under a fresh dedupe key.
				t.Parked = nil
				t.Requeues++
				resume = true
			}
		}
		return nil
	})
	if err != nil && !errors.Is(err, taskstate.ErrSkip) && !errors.Is(err, taskstate.ErrInvalidChange) {
		s.log.Error().Err(err).Str("task", t.ID).Msg("storing input responses")
		return errorf(codeInternal, http.StatusInternalServerError, "internal error: storing input responses")
	}
	if resume && err == nil {
		// The answers are stored: a failed publish is the reaper's to
		// repeat, not the client's to resend.
		_ = s.prod.Resume(ctx, t)
	}
	return nil
}
