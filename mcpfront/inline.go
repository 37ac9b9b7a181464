package mcpfront

import (
	"context"
	"net/http"
	"time"

	"github.com/mcpqueue/mcpqueue/taskstate"
)

// Adaptive completion. Most agent tool calls are short, and a client that
// declared the tasks extension still pays a poll interval and two more
// requests for every task handed out. So for a 2026-07-28 client calling a
// TaskOptional tool, the api may wait a bounded time for the job to finish
// — it is queued and durable like any task's — and answer with the plain
// CallToolResult (resultType "complete"); only a job still running when the
// wait ends gets its task handle. The wait is Config.InlineWait for a tool
// whose tasks typically finish within it, and for one not measured yet
// (poll.go learns each tool's typical duration); a tool known to take
// longer gets its handle at once, and so does one no live worker serves. A
// task that turns input_required gets its handle at once too: its client
// answers through tasks/update. A tool may cap the wait, or turn it off
// (consumer.Tool.InlineWait: a tool whose clients must get a task). The
// record stays either way, a task like any other.

// inlineWait is how long a call of tool may wait for its task to finish.
func (s *Server) inlineWait(tool *taskstate.ToolInfo) time.Duration {
	wait := s.cfg.InlineWait
	if tool.InlineWaitMs != 0 {
		wait = min(wait, time.Duration(tool.InlineWaitMs)*time.Millisecond) // the tool's own cap
	}
	if wait <= 0 || tool.TaskSupport != taskstate.TaskOptional || tool.InputFirst || !tool.Live(s.cfg.Now()) {
		return 0 // no worker serves it now: nothing will finish in time
	}
	if typical := s.durations.typicalOf(tool.Name); typical > wait {
		return 0 // known to take longer: the handle now
	}
	return wait
}

// followInline follows the versions of task id, for at most the inline
// wait of tool; nil (and nothing to stop) when tool's calls get a handle at
// once. It is called before the record is created, so that no version
// written in between is missed, and the bound counts from the call's start.
func (s *Server) followInline(ctx context.Context, tool *taskstate.ToolInfo, id string) (<-chan *taskstate.Task, context.CancelFunc) {
	wait := s.inlineWait(tool)
	if wait <= 0 {
		return nil, func() {}
	}
	wctx, cancel := context.WithTimeout(ctx, wait)
	versions, err := s.store.Follow(wctx, id)
	if err != nil {
		cancel()
		return nil, func() {}
	}
	return versions, cancel
}

// awaitInline returns the task's final version if it arrives on versions
// before the wait ends, nil when the task is still running (or asks for
// input, or was cancelled) then, or when there is nothing to wait for.
func awaitInline(versions <-chan *taskstate.Task) *taskstate.Task {
	if versions == nil {
		return nil // no wait for this call
	}
	for u := range versions {
		switch {
		case u.Status == taskstate.Completed || u.Status == taskstate.Failed:
			return u
		case u.Status != taskstate.Working:
			return nil // input_required, cancelled: the handle tells the client
		}
	}
	return nil
}

// replyInline answers a task-capable call with its finished task's outcome,
// as a sync call would: the result, or the task's JSON-RPC error. It
// reports false when it cannot (the result unreadable, or too many large
// results being read whole at once): the caller hands out the task. A plain
// result blob streams into the reply.
func (s *Server) replyInline(ctx context.Context, w http.ResponseWriter, c *call, final *taskstate.Task) bool {
	s.durations.observe(final)
	if s.replySpliced(ctx, &replier{w: w, id: c.req.ID}, final, resultComplete, s.appendResultMeta(nil)) {
		return true
	}
	final, release, err := s.resolved(ctx, final)
	if err != nil {
		return false
	}
	defer release()
	if final.Status == taskstate.Failed {
		writeError(w, c.req.ID, storedError(final.Error))
		return true
	}
	writeResult(w, c.req.ID, reshape(final.Result, resultComplete, s.appendResultMeta(nil)))
	return true
}
