package mcpfront

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/mcpqueue/mcpqueue/producer"
	"github.com/mcpqueue/mcpqueue/taskstate"
)

// Clients without tasks are never cut off. Most hosts declare no tasks (a
// 2025-06-18 or 2025-11-25 session without capabilities.tasks, a
// 2026-07-28 request without the tasks extension): their tool calls wait
// inline. Past Config.HandleAfter such a call is handed over, not
// cancelled: the client gets an ordinary CallToolResult whose
// structuredContent is {taskId, status, pollAfterMs} and whose text tells the
// model to call the mirror tool tasks_result with that taskId; the task runs
// on. The mirror tools tasks_result and tasks_cancel are listed to these
// clients only, and bound to the caller as tasks/get is.

// Names of the mirror tools.
const (
	mirrorResult = "tasks_result"
	mirrorCancel = "tasks_cancel"
)

// follow says how a client that waited inline follows its call once the
// call is handed over.
type follow int

const (
	followNone   follow = iota // no way: the call is cancelled past its bound
	followMirror               // the mirror tool tasks_result
	followTasks                // its own task methods (tasks/get)
)

// mirrors reports whether the client gets the mirror tools: it did not
// negotiate tasks and they are not switched off.
func (s *Server) mirrors(negotiatedTasks bool) bool {
	return !negotiatedTasks && !s.cfg.MirrorToolsOff
}

// followOf says how the client of req follows a handed-over call.
func (s *Server) followOf(req *producer.Request, negotiatedTasks bool) follow {
	switch {
	case req.Kind != "" && req.Kind != taskstate.KindTool:
		return followNone // no CallToolResult to hand over with
	case negotiatedTasks:
		return followTasks
	case s.mirrors(false):
		return followMirror
	}
	return followNone
}

// legacyTasksDeclared reports whether a 2025-era session negotiated tasks:
// a 2025-11-25 session whose client declared capabilities.tasks.
func legacyTasksDeclared(c *legacyCall) bool {
	if !c.tasks() {
		return false
	}
	var caps map[string]json.RawMessage
	_ = json.Unmarshal(c.sess.ClientCapabilities, &caps)
	_, ok := caps["tasks"]
	return ok
}

// handOver answers an inline call whose wait ran out with its task handle
// instead of cancelling it: a task-capable client waiting on an InputFirst
// tool (ModeGather) gets its CreateTaskResult, any other the hand-over
// CallToolResult. rt is the result's resultType ("" on the 2025 wires). It
// reports false, having written nothing, when the call cannot be handed over
// (the caller then cancels it).
func (s *Server) handOver(ctx context.Context, out *replier, req *producer.Request, f follow, rt string) bool {
	if f == followNone {
		return false
	}
	ctx, cancel := detach(ctx)
	defer cancel()
	t, err := s.store.Get(ctx, req.ID)
	if err != nil {
		s.log.Error().Err(err).Str("task", req.ID).Msg("reading a call to hand over; cancelling it")
		return false
	}
	s.log.Info().Str("task", t.ID).Str("tool", req.Tool).Dur("after", s.cfg.HandleAfter).Msg("inline call handed over: it runs on as a task")
	if req.Mode == taskstate.ModeGather {
		out.result(s.createTaskResult(t))
		return true
	}
	out.result(s.stillRunning(t, req.Tool, f, rt))
	return true
}

// stillRunning is the CallToolResult of a call that is still running: its
// structuredContent {taskId, status, pollAfterMs}, and a text that tells the
// model how to get the result.
func (s *Server) stillRunning(t *taskstate.Task, tool string, f follow, rt string) map[string]any {
	idJSON, _ := json.Marshal(map[string]string{"taskId": t.ID})
	poll := s.pollInterval(t)
	var how string
	if f == followMirror {
		how = fmt.Sprintf("To get its result, call the tool %s with %s (it waits up to %s; if the call is still running it answers like this again, so call it again). To stop the call, call the tool %s with the same arguments.",
			mirrorResult, idJSON, s.cfg.HandleAfter, mirrorCancel)
	} else {
		how = fmt.Sprintf("It continues as task %s: poll tasks/get with %s for its result.", t.ID, idJSON)
	}
	name := "The call"
	if tool != "" {
		name = fmt.Sprintf("Tool %q", clip(tool))
	}
	state := "is still running"
	if t.Status.Terminal() { // it ended as the wait did
		state = "has just ended"
	}
	text := fmt.Sprintf("%s %s (task %s, status %s); nothing is lost. %s", name, state, t.ID, t.Status, how)
	return s.toolResult(text, map[string]any{"taskId": t.ID, "status": t.Status, "pollAfterMs": poll}, false, rt)
}

// mirrorTools are the catalog entries of the mirror tools a client that did
// not negotiate tasks is shown (none to one that did, or when they are off).
func (s *Server) mirrorTools(negotiatedTasks bool) []*taskstate.ToolInfo {
	if !s.mirrors(negotiatedTasks) {
		return nil
	}
	schema := json.RawMessage(`{"type":"object","properties":{"taskId":{"type":"string","description":"the taskId a tool call's answer gave (its structuredContent.taskId)"}},"required":["taskId"],"additionalProperties":false}`)
	wait := s.cfg.HandleAfter.String()
	return []*taskstate.ToolInfo{{
		Kind: taskstate.KindTool, Name: mirrorResult, Title: "Result of a running tool call",
		Description: "Gets the result of a tool call that was still running when it answered with a taskId. " +
			"Waits up to " + wait + " for the call to finish and returns its result; if it is still running, answers again with the taskId and status: call this tool again.",
		InputSchema: schema, Annotations: json.RawMessage(`{"readOnlyHint":true,"idempotentHint":true,"openWorldHint":false}`),
		TaskSupport: taskstate.TaskForbidden,
	}, {
		Kind: taskstate.KindTool, Name: mirrorCancel, Title: "Cancel a running tool call",
		Description: "Cancels a tool call that was still running when it answered with a taskId. A call that has already ended is left as it is.",
		InputSchema: schema, Annotations: json.RawMessage(`{"readOnlyHint":false,"destructiveHint":true,"idempotentHint":true,"openWorldHint":false}`),
		TaskSupport: taskstate.TaskForbidden,
	}}
}

// withMirrors is a tool listing with the mirror tools added; a catalog tool
// of the same name is left out (the mirror tool answers that name).
func withMirrors(entries, extra []*taskstate.ToolInfo) []*taskstate.ToolInfo {
	if len(extra) == 0 {
		return entries
	}
	out := make([]*taskstate.ToolInfo, 0, len(entries)+len(extra))
	for _, t := range entries {
		if t.Name != mirrorResult && t.Name != mirrorCancel {
			out = append(out, t)
		}
	}
	return append(out, extra...)
}

// mirrorCall is a tools/call that may name a mirror tool.
type mirrorCall struct {
	id              json.RawMessage
	name            string
	args            json.RawMessage
	owner           string
	negotiatedTasks bool
	rt              string // resultType of the reply ("" on the 2025 wires)
	related         bool   // input requests carry related-task meta (2025-11-25)
}

// serveMirror answers a call of a mirror tool and reports true, or reports
// false when m names no mirror tool this client is served.
func (s *Server) serveMirror(ctx context.Context, w http.ResponseWriter, r *http.Request, m *mirrorCall) bool {
	if m.name != mirrorResult && m.name != mirrorCancel || !s.mirrors(m.negotiatedTasks) {
		return false
	}
	var a struct {
		TaskID *string `json:"taskId"`
	}
	if err := json.Unmarshal(m.args, &a); err != nil || a.TaskID == nil || strings.TrimSpace(*a.TaskID) == "" {
		writeError(w, m.id, invalidParams(fmt.Sprintf(`invalid params: %s needs arguments {"taskId": "…"}: the taskId (a string) a tool call's answer gave`, m.name)))
		return true
	}
	t, rerr := s.ownedTask(ctx, m.name, *a.TaskID, m.owner)
	if rerr != nil {
		writeError(w, m.id, rerr)
		return true
	}
	if m.name == mirrorCancel {
		s.mirrorCancel(ctx, w, m, t)
		return true
	}
	s.mirrorResult(ctx, w, r, m, t)
	return true
}

// mirrorResult waits up to HandleAfter for the task to end and answers with
// its own result (or error), or with the still-running result again. A
// 2025-era task's input requests reach the client on the reply's stream
// as server-to-client requests (the client's own elicitation).
func (s *Server) mirrorResult(ctx context.Context, w http.ResponseWriter, r *http.Request, m *mirrorCall, t *taskstate.Task) {
	out := &replier{w: w, id: m.id}
	wctx, cancel := context.WithTimeout(ctx, s.cfg.HandleAfter)
	defer cancel()
	final, err := s.streamTask(wctx, r, out, t.ID, streamOpts{related: m.related})
	switch {
	case err == nil:
	case errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil:
		dctx, dcancel := detach(ctx)
		defer dcancel()
		now, gerr := s.store.Get(dctx, t.ID)
		if gerr != nil {
			out.fail(s.internal("reading the task", gerr))
			return
		}
		if !now.Status.Terminal() {
			out.result(s.stillRunning(now, now.Tool, followMirror, m.rt))
			return
		}
		final = now // it ended as the wait did
	default: // the client went away, or the server is going: the task goes on
		if e := shutdownError(ctx, "the task goes on: call "+mirrorResult+" again"); e != nil {
			out.fail(e)
		}
		return
	}
	if final.Status == taskstate.Completed && final.Mode != taskstate.ModeTask && isInputRequired(final.Result) {
		// A 2026-07-28 inline call asks for input by ending its run
		// (MRTR); once handed over there is no request left to carry it.
		out.result(s.toolResult(fmt.Sprintf("Tool %q needs input from the user, which it could only ask for while its call was waiting; call the tool again.", clip(final.Tool)), nil, true, m.rt))
		return
	}
	s.replyOutcomeAs(ctx, out, final, m.rt, s.resultMetaFor(m.rt))
}

// mirrorCancel cancels the task unless it has ended, and says what it did.
func (s *Server) mirrorCancel(ctx context.Context, w http.ResponseWriter, m *mirrorCall, t *taskstate.Task) {
	text := fmt.Sprintf("Task %s had already ended (status %s); nothing was cancelled.", t.ID, t.Status)
	if !t.Status.Terminal() {
		c, err := s.prod.Cancel(ctx, t.ID, "cancelled by the client ("+mirrorCancel+")")
		if err != nil && !errors.Is(err, producer.ErrTerminal) {
			s.internalError(w, m.id, "cancelling the task", err)
			return
		}
		if c != nil {
			t = c
		}
		text = fmt.Sprintf("Task %s is cancelled.", t.ID)
		if t.Status != taskstate.Cancelled {
			text = fmt.Sprintf("Task %s ended before the cancel reached it (status %s).", t.ID, t.Status)
		}
	}
	writeResult(w, m.id, s.toolResult(text, map[string]any{"taskId": t.ID, "status": t.Status}, false, m.rt))
}

// toolResult is a CallToolResult of one text, with structured content when
// given; rt is its resultType ("" on the 2025 wires, which carry no
// serverInfo _meta either).
func (s *Server) toolResult(text string, structured map[string]any, isError bool, rt string) map[string]any {
	res := map[string]any{"content": []any{map[string]any{"type": "text", "text": text}}, "isError": isError}
	if structured != nil {
		res["structuredContent"] = structured
	}
	if rt != "" {
		res["resultType"], res["_meta"] = rt, s.resultMeta()
	}
	return res
}

// resultMetaFor is the _meta a result of the wire of rt carries: serverInfo
// on 2026-07-28, none on the 2025 wires.
func (s *Server) resultMetaFor(rt string) json.RawMessage {
	if rt == "" {
		return nil
	}
	return s.appendResultMeta(nil)
}
