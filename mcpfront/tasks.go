package mcpfront

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/mcpqueue/mcpqueue/internal/mcpwire"
	"github.com/mcpqueue/mcpqueue/producer"
	"github.com/mcpqueue/mcpqueue/taskstate"
	"github.com/mcpqueue/mcpqueue/vocab"
)

// The task methods of both revisions: 2025-11-25's tasks/get, result, list
// and cancel (legacyTasks) and 2026-07-28's tasks/get, update and cancel
// (the tasks extension). Both read the same records through ownedTask, so
// another owner's task is an unknown one on either wire, and both store a
// client's answers to input requests through answerInputs; only the views
// differ (legacyTask, and detailedTask in wire.go).

// legacyTask is the 2025-11-25 Task view of a record. A tool error is
// "failed" on this wire ("completed" with isError on 2026-07-28).
func (s *Server) legacyTask(t *taskstate.Task) *mcpwire.LegacyTask {
	status := t.Status
	if status == taskstate.Completed && (isToolError(t.Result) || t.ResultRef != nil && t.ResultRef.IsError) {
		status = taskstate.Failed
	}
	poll := s.pollInterval(t)
	v := &mcpwire.LegacyTask{
		TaskID:        t.ID,
		Status:        string(status),
		CreatedAt:     t.CreatedAt.UTC().Format(time.RFC3339Nano),
		LastUpdatedAt: t.LastUpdatedAt.UTC().Format(time.RFC3339Nano),
		PollInterval:  &poll,
		StatusMessage: t.StatusMessage,
	}
	if t.TTLMs > 0 {
		v.TTL = &t.TTLMs
	}
	if v.StatusMessage == "" && status == taskstate.Failed && t.Status == taskstate.Completed {
		v.StatusMessage = "the tool reported an error"
	}
	return v
}

func isToolError(result json.RawMessage) bool {
	var r struct {
		IsError bool `json:"isError"`
	}
	_ = json.Unmarshal(result, &r)
	return r.IsError
}

func (s *Server) legacyTasks(ctx context.Context, w http.ResponseWriter, r *http.Request, c *legacyCall) {
	if !c.tasks() {
		writeError(w, c.req.ID, errorf(vocab.CodeMethodNotFound, http.StatusOK, "Method not found: "+clip(c.req.Method)+" (tasks need protocol version "+version20251125+")"))
		return
	}
	var p mcpwire.TaskParams
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
		if rerr.Code == vocab.CodeInvalidParams {
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
			writeError(w, c.req.ID, invalidParams(fmt.Sprintf("Cannot cancel task: already in terminal status '%s'", s.legacyTask(t).Status)))
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
		s.replyOutcome(ctx, out, final, relatedTaskMeta(t.ID))
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
	res := &mcpwire.LegacyListTasksResult{Tasks: make([]*mcpwire.LegacyTask, 0, len(tasks)), NextCursor: next}
	for _, t := range tasks {
		res.Tasks = append(res.Tasks, s.legacyTask(t)) // whatever tasks/get shows is listable
	}
	writeResult(w, c.req.ID, res)
}

// replyOutcome answers with what the call would have returned: the result
// (tool errors included), or the JSON-RPC error of a failed task.
// A plain result blob streams into the reply.
func (s *Server) replyOutcome(ctx context.Context, out *replier, t *taskstate.Task, meta json.RawMessage) {
	s.replyOutcomeAs(ctx, out, t, "", meta)
}

// replyOutcomeAs is replyOutcome with the result's resultType rt ("": none).
func (s *Server) replyOutcomeAs(ctx context.Context, out *replier, t *taskstate.Task, rt string, meta json.RawMessage) {
	ctx = context.WithoutCancel(ctx) // the outcome is here: the reply is written
	if s.replySpliced(ctx, out, t, rt, meta) {
		return
	}
	t, release, err := s.resolved(ctx, t)
	if err != nil {
		s.log.Error().Err(err).Msg("replying with a task's outcome")
		out.fail(resultMissing(err))
		return
	}
	defer release()
	switch t.Status {
	case taskstate.Completed:
		out.result(reshape(t.Result, rt, meta))
	case taskstate.Failed:
		out.fail(storedError(t.Error))
	default:
		out.fail(errorf(vocab.CodeInternalError, http.StatusOK, "the task was cancelled: it has no result"))
	}
}

// taskFor decodes params, checks the extension was declared and loads the
// task the caller may see. Another principal's task looks exactly like an
// unknown one.
func (s *Server) taskFor(ctx context.Context, c *call) (*mcpwire.TaskParams, *taskstate.Task, *rpcError) {
	if !c.tasksExt {
		return nil, nil, errorf(vocab.CodeMissingCapability, http.StatusBadRequest, c.req.Method+" needs the "+tasksExtension+" extension declared in _meta."+metaClientCaps).
			withData(map[string]any{"requiredCapabilities": map[string]any{"extensions": map[string]any{tasksExtension: map[string]any{}}}})
	}
	var p mcpwire.TaskParams
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
		return nil, errorf(vocab.CodeInternalError, http.StatusInternalServerError, "internal error: reading task")
	}
	s.durations.observe(t)
	return t, nil
}

func (s *Server) tasksGet(ctx context.Context, w http.ResponseWriter, _ *http.Request, c *call) {
	_, t, rerr := s.taskFor(ctx, c)
	if rerr != nil {
		writeError(w, c.req.ID, rerr)
		return
	}
	if s.tasksGetStreamed(ctx, w, c, t) {
		return
	}
	t, release, err := s.resolved(ctx, t)
	if err != nil {
		s.log.Error().Err(err).Msg("tasks/get")
		writeError(w, c.req.ID, resultMissing(err))
		return
	}
	defer release()
	writeResult(w, c.req.ID, s.detailedTask(t))
}

func (s *Server) ack(w http.ResponseWriter, id json.RawMessage) {
	writeResult(w, id, map[string]any{"resultType": resultComplete, "_meta": s.resultMeta()})
}

func (s *Server) tasksCancel(ctx context.Context, w http.ResponseWriter, _ *http.Request, c *call) {
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

func (s *Server) tasksUpdate(ctx context.Context, w http.ResponseWriter, _ *http.Request, c *call) {
	p, t, rerr := s.taskFor(ctx, c)
	if rerr != nil {
		writeError(w, c.req.ID, rerr)
		return
	}
	if p.InputResponses == nil {
		writeError(w, c.req.ID, invalidParams("invalid params: inputResponses must be an object mapping request keys to results"))
		return
	}
	if rerr := s.answerInputs(ctx, t, p.InputResponses, true, false); rerr != nil {
		writeError(w, c.req.ID, rerr)
		return
	}
	s.ack(w, c.req.ID)
}

// answerInputs stores answers to a task's outstanding input requests (from
// tasks/update, or a 2025-11-25 client's response): every answer is checked
// before anything changes, and so are the keys (strayAnswers, on the record
// as it is when the answers are filed): an answer that answers nothing is an
// error and files nothing. strict is for a 2025-11-25 response, whose key is
// the server's own. The worker waiting on the task sees the answers through
// the record's change feed, on whichever replica this runs.
func (s *Server) answerInputs(ctx context.Context, t *taskstate.Task, responses map[string]json.RawMessage, validate, strict bool) *rpcError {
	for k, v := range responses {
		if !validate {
			break
		}
		raw, open := t.InputRequests[k]
		if !open {
			continue
		}
		var req mcpwire.InputRequest
		_ = json.Unmarshal(raw, &req)
		if err := validateInputResponse(req.Method, v); err != nil {
			return invalidParams(fmt.Sprintf("invalid params: inputResponses[%q]: %v", k, err))
		}
	}
	resume := false
	var stray *rpcError
	t, err := taskstate.Mutate(ctx, s.store, t.ID, s.cfg.Now, func(t *taskstate.Task) error {
		if stray = strayAnswers(t, responses, strict); stray != nil {
			return taskstate.ErrSkip
		}
		// A parked task (it waited with no run) resumes by this write (one
		// writer wins), under a fresh dedupe key.
		var n int
		n, resume = t.FileResponses(func(k string) (json.RawMessage, bool) {
			v, ok := responses[k]
			return v, ok
		})
		if n == 0 {
			return taskstate.ErrSkip
		}
		return nil
	})
	if stray != nil {
		return stray
	}
	if err != nil && !errors.Is(err, taskstate.ErrSkip) && !errors.Is(err, taskstate.ErrInvalidChange) {
		s.log.Error().Err(err).Str("task", t.ID).Msg("storing input responses")
		return errorf(vocab.CodeInternalError, http.StatusInternalServerError, "internal error: storing input responses")
	}
	if resume && err == nil {
		// The answers are stored: a failed publish is the reaper's to
		// repeat, not the client's to resend.
		_ = s.prod.Resume(ctx, t)
	}
	return nil
}

// strayAnswers is the error for answers to no pending input request: a key
// that is neither open on t nor answered already (a resent answer is taken
// and changes nothing). A task that ended has no open request. It is -32602
// naming the stray keys, with data {"unknownKeys", "pendingKeys"}:
//   - when t has no open request at all;
//   - when a stray key is an open request's key as its handler wrote it: on
//     a task the wire key is the handler's key plus "-<n>" (consumer.Ask),
//     so "confirm" for "confirm-1" is the likely mistake;
//   - for any stray key when strict (a 2025-11-25 response: the key came
//     from the server's own request id).
//
// Any other stray key beside open requests is ignored, as the tasks
// extension says a server SHOULD (the conformance suite sends one and wants
// the ack).
func strayAnswers(t *taskstate.Task, responses map[string]json.RawMessage, strict bool) *rpcError {
	open := t.InputRequests
	if t.Status.Terminal() {
		open = nil
	}
	var stray []string
	handlerKey := false
	for k := range responses {
		if _, ok := open[k]; ok {
			continue
		}
		if _, done := t.InputResponses[k]; done {
			continue
		}
		stray = append(stray, k)
		handlerKey = handlerKey || isHandlerKey(k, open)
	}
	if len(stray) == 0 || len(open) > 0 && !strict && !handlerKey {
		return nil
	}
	slices.Sort(stray)
	pending := append([]string{}, slices.Sorted(maps.Keys(open))...) // [] rather than null
	data := map[string]any{"unknownKeys": stray, "pendingKeys": pending}
	if len(pending) == 0 {
		return invalidParams(fmt.Sprintf("invalid params: task %s has no pending input request (it is %s): nothing to answer with %s",
			t.ID, t.Status, quoteKeys(stray))).withData(data)
	}
	return invalidParams(fmt.Sprintf("invalid params: no pending input request has the key %s; the pending keys are %s (as tasks/get lists them under inputRequests)",
		quoteKeys(stray), quoteKeys(pending))).withData(data)
}

// isHandlerKey reports whether k is an open request's key without the
// "-<n>" a task's request key adds to the handler's.
func isHandlerKey(k string, open map[string]json.RawMessage) bool {
	for wire := range open {
		if n, ok := strings.CutPrefix(wire, k+"-"); ok && n != "" && strings.Trim(n, "0123456789") == "" {
			return true
		}
	}
	return false
}

// quoteKeys is keys quoted (each clipped) and comma-separated.
func quoteKeys(keys []string) string {
	q := make([]string, len(keys))
	for i, k := range keys {
		q[i] = strconv.Quote(clip(k))
	}
	return strings.Join(q, ", ")
}
