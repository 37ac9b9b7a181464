package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/mcpqueue/mcpqueue/internal/mcpwire"
)

// maxPollBackoff bounds the wait between polls of a server that gives no
// interval.
const maxPollBackoff = 5 * time.Second

// Task is a started call: a task on the server, or a call that was answered
// at once (ID ""). Wait returns its result; Cancel cancels it. A Task is
// safe for use by one goroutine at a time.
type Task struct {
	c   *Client
	id  string
	era string
	key string

	status   string
	message  string
	hint     time.Duration   // the server's poll interval, 0 when not given
	answered map[string]bool // input request keys answered
	handover bool            // followed through tasks_result (mcpqueue hand-over)
	cancels  int             // cancels sent after giving up (cancelDetached)

	done   bool
	result *Result
	err    error
}

// ID is the task's id; "" when the call was answered at once.
func (t *Task) ID() string { return t.id }

// Key is the call's idempotency key ("" for a resumed task).
func (t *Task) Key() string { return t.key }

// Status is the task's status as last seen: "working", "input_required",
// "completed", "failed" or "cancelled"; "completed" for a call answered at
// once.
func (t *Task) Status() string { return t.status }

// taskView reads a task of either revision: the 2026-07-28 Task (with
// what tasks/get inlines), whose members a 2025-11-25 Task shares but for
// pollInterval's name.
type taskView struct {
	mcpwire.Task
	PollInterval *int64 `json:"pollInterval"` // mcpwire.LegacyTask's
}

// note takes what a view says about the task.
func (t *Task) note(v *taskView) {
	t.status, t.message = v.Status, v.StatusMessage
	switch {
	case v.PollIntervalMs != nil:
		t.hint = time.Duration(*v.PollIntervalMs) * time.Millisecond
	case v.PollInterval != nil:
		t.hint = time.Duration(*v.PollInterval) * time.Millisecond
	}
}

// settleInline makes t a call answered at once with raw (a CallToolResult),
// or, for a call made without tasks, a hand-over to follow.
func (t *Task) settleInline(raw json.RawMessage, withTasks bool) (*Task, error) {
	res, err := decodeResult(raw, "")
	if err != nil {
		return nil, err
	}
	if id, poll, ok := handover(res); ok && !withTasks {
		t.id, t.handover, t.status, t.hint = id, true, "working", poll
		return t, nil
	}
	t.done, t.result, t.status = true, res, "completed"
	return t, nil
}

// handover reports whether res is mcpqueue's answer to a call that outlived
// the inline wait: structured content of exactly taskId, status and
// pollAfterMs.
func handover(res *Result) (id string, poll time.Duration, ok bool) {
	var m map[string]json.RawMessage
	if len(res.StructuredContent) == 0 || json.Unmarshal(res.StructuredContent, &m) != nil || len(m) != 3 || res.IsError {
		return "", 0, false
	}
	var h struct {
		TaskID      string `json:"taskId"`
		Status      string `json:"status"`
		PollAfterMs *int64 `json:"pollAfterMs"`
	}
	if json.Unmarshal(res.StructuredContent, &h) != nil || h.TaskID == "" || h.Status == "" || h.PollAfterMs == nil {
		return "", 0, false
	}
	return h.TaskID, time.Duration(*h.PollAfterMs) * time.Millisecond, true
}

func (c *Client) start2026(ctx context.Context, tool string, args json.RawMessage, key string, tasks bool) (*Task, error) {
	params := map[string]any{"name": tool, "arguments": args}
	marked, _ := c.paramsOf(ctx, tool, false)
	for round := 0; ; round++ {
		r := c.request(Version2026, "tools/call", tool, params, key, tasks)
		r.header = paramHeaders(marked, args)
		raw, err := c.call(ctx, r)
		if needsParams(err) && marked == nil {
			// The tool mirrors parameters in headers: learn which, once.
			if marked, err = c.paramsOf(ctx, tool, true); err != nil {
				return nil, err
			}
			r.header = paramHeaders(marked, args)
			raw, err = c.call(ctx, r)
		}
		if err != nil {
			return nil, err
		}
		var head struct {
			taskView
			RequestState *string `json:"requestState"`
		}
		if err := json.Unmarshal(raw, &head); err != nil {
			return nil, fmt.Errorf("client: tools/call %s: %w", tool, err)
		}
		t := &Task{c: c, era: Version2026, key: key, answered: map[string]bool{}}
		switch head.ResultType {
		case "task":
			if !tasks || head.TaskID == "" {
				return nil, fmt.Errorf("client: tools/call %s: a task handle the client did not ask for: %s", tool, raw)
			}
			t.id = head.TaskID
			t.note(&head.taskView)
			return t, nil
		case "", "complete":
			return t.settleInline(raw, tasks)
		case "input_required": // MRTR: answer, then call again
			if round >= maxMRTRRounds {
				return nil, fmt.Errorf("client: tools/call %s: still asking for input after %d rounds", tool, round)
			}
			answers := map[string]json.RawMessage{}
			for k, r := range head.InputRequests {
				a, err := c.answerRequest(ctx, "", k, r)
				if err != nil {
					return nil, err
				}
				answers[k] = a
			}
			params["inputResponses"] = answers
			delete(params, "requestState")
			if head.RequestState != nil {
				params["requestState"] = *head.RequestState
			}
		default:
			return nil, fmt.Errorf("client: tools/call %s: unknown resultType %q", tool, head.ResultType)
		}
	}
}

// answerRequest answers one input request as sent in inputRequests
// ({method, params}).
func (c *Client) answerRequest(ctx context.Context, taskID, key string, raw json.RawMessage) (json.RawMessage, error) {
	var r mcpwire.InputRequest
	if err := json.Unmarshal(raw, &r); err != nil {
		return nil, fmt.Errorf("client: input request %q: %w", key, err)
	}
	return c.answer(ctx, InputRequest{Key: key, TaskID: taskID, Method: r.Method, Params: r.Params})
}

// Wait waits for the task's result, answering its input requests. A tool
// error is a Result with IsError; a failed task returns its *Error; a
// cancelled one ErrCancelled. If ctx ends first, the task is cancelled and
// ctx's error (its cause) returned.
func (t *Task) Wait(ctx context.Context) (*Result, error) {
	if t.done {
		return t.result, t.err
	}
	res, err := t.wait(ctx)
	if err != nil && ctx.Err() != nil {
		_ = t.cancelDetached(ctx)
		return nil, context.Cause(ctx)
	}
	if err == nil || errors.Is(err, ErrCancelled) || t.failed(err) {
		t.done, t.result, t.err = true, res, err
	}
	return res, err
}

// failed reports whether err is the task's own failure.
func (t *Task) failed(err error) bool {
	var e *Error
	return errors.As(err, &e) && t.status == "failed"
}

func (t *Task) wait(ctx context.Context) (*Result, error) {
	switch {
	case t.handover:
		return t.waitHandover(ctx)
	case t.era == Version2026:
		return t.wait2026(ctx)
	}
	return t.wait2025(ctx)
}

// pause waits before the next poll: the server's interval, never less than
// the floor; without one, the floor doubling up to maxPollBackoff.
func (t *Task) pause(ctx context.Context, backoff *time.Duration) error {
	d := max(t.hint, t.c.o.pollFloor)
	if t.hint == 0 {
		d = max(*backoff, t.c.o.pollFloor)
		*backoff = min(max(2*d, time.Millisecond), maxPollBackoff)
	}
	return sleep(ctx, d)
}

// poll reads the task (tasks/get) and hands each view to step, until step
// is done; between reads it pauses (pause), unless step asks to read again
// at once.
func (t *Task) poll(ctx context.Context, step func(v *taskView) (res *Result, done, again bool, err error)) (*Result, error) {
	var backoff time.Duration
	for {
		v, err := t.get(ctx)
		if err != nil {
			return nil, err
		}
		res, done, again, err := step(v)
		if done || err != nil {
			return res, err
		}
		if !again {
			if err := t.pause(ctx, &backoff); err != nil {
				return nil, err
			}
		}
	}
}

func (t *Task) wait2026(ctx context.Context) (*Result, error) {
	return t.poll(ctx, func(v *taskView) (*Result, bool, bool, error) {
		switch v.Status {
		case "completed":
			res, err := decodeResult(v.Result, t.id)
			return res, true, false, err
		case "failed":
			if v.Error == nil {
				return nil, true, false, &Error{Code: -32603, Message: "the task failed: " + v.StatusMessage}
			}
			return nil, true, false, fromWire(v.Error)
		case "cancelled":
			return nil, true, false, t.cancelled()
		case "input_required":
			answers := map[string]json.RawMessage{}
			for k, r := range v.InputRequests {
				if t.answered[k] {
					continue // tasks/get may list it until the update is seen
				}
				a, err := t.c.answerRequest(ctx, t.id, k, r)
				if err != nil {
					return nil, true, false, err
				}
				answers[k] = a
			}
			if len(answers) > 0 {
				r := t.c.request(Version2026, "tasks/update", t.id, map[string]any{"taskId": t.id, "inputResponses": answers}, "", true)
				if _, err := t.c.call(ctx, r); err != nil {
					return nil, true, false, err
				}
				for k := range answers {
					t.answered[k] = true
				}
				return nil, false, true, nil
			}
		}
		return nil, false, false, nil
	})
}

func (t *Task) cancelled() error {
	if t.message != "" {
		return fmt.Errorf("%w: %s", ErrCancelled, t.message)
	}
	return ErrCancelled
}

func (t *Task) wait2025(ctx context.Context) (*Result, error) {
	return t.poll(ctx, func(v *taskView) (*Result, bool, bool, error) {
		switch v.Status {
		case "cancelled":
			return nil, true, false, t.cancelled()
		case "completed", "failed", "input_required":
			res, err := t.result2025(ctx)
			return res, true, false, err
		}
		return nil, false, false, nil
	})
}

// result2025 waits for the outcome with tasks/result; the task's input
// requests arrive on its stream meanwhile.
func (t *Task) result2025(ctx context.Context) (*Result, error) {
	r := t.c.request(t.era, "tasks/result", "", map[string]any{"taskId": t.id}, "", false)
	r.serve = t.c.serveInput(t.id)
	raw, err := t.c.call(ctx, r)
	if err != nil {
		var e *Error
		if errors.As(err, &e) && ctx.Err() == nil {
			if v, gerr := t.get(ctx); gerr == nil && v.Status == "cancelled" {
				return nil, t.cancelled()
			}
			t.status = "failed"
		}
		return nil, err
	}
	t.status = "completed"
	return decodeResult(raw, t.id)
}

// waitHandover follows a call handed over past the server's inline wait:
// the tool tasks_result, called until it answers with the task's own result.
func (t *Task) waitHandover(ctx context.Context) (*Result, error) {
	var backoff time.Duration
	for {
		args, _ := json.Marshal(map[string]string{"taskId": t.id})
		raw, err := t.c.callInline(ctx, "tasks_result", args)
		if err != nil {
			return nil, err
		}
		res, err := decodeResult(raw, t.id)
		if err != nil {
			return nil, err
		}
		id, poll, ok := handover(res)
		if !ok || id != t.id {
			t.status = "completed"
			return res, nil
		}
		t.hint = poll
		if err := t.pause(ctx, &backoff); err != nil {
			return nil, err
		}
	}
}

// callInline calls a tool without tasks and without a key, and returns
// its raw result (MRTR rounds are not expected of the mirror tools).
func (c *Client) callInline(ctx context.Context, tool string, args json.RawMessage) (json.RawMessage, error) {
	params := map[string]any{"name": tool, "arguments": args}
	return c.call(ctx, c.request(c.era, "tools/call", tool, params, "", false))
}

// get reads the task (tasks/get) and notes what it says.
func (t *Task) get(ctx context.Context) (*taskView, error) {
	raw, err := t.c.call(ctx, t.c.request(t.era, "tasks/get", t.id, map[string]any{"taskId": t.id}, "", true))
	if err != nil {
		return nil, err
	}
	var v taskView
	if err := json.Unmarshal(raw, &v); err != nil {
		return nil, fmt.Errorf("client: tasks/get %s: %w", t.id, err)
	}
	if v.Status == "" {
		return nil, fmt.Errorf("client: tasks/get %s: the answer has no status: %s", t.id, raw)
	}
	t.note(&v)
	return &v, nil
}

// Cancel asks the server to cancel the task (tasks/cancel; tasks_cancel
// for a handed-over call). Cancellation is cooperative: Wait tells how the
// task ended. A call answered at once has nothing to cancel.
func (t *Task) Cancel(ctx context.Context) error {
	switch {
	case t.id == "":
		return nil
	case t.handover:
		args, _ := json.Marshal(map[string]string{"taskId": t.id})
		_, err := t.c.callInline(ctx, "tasks_cancel", args)
		return err
	}
	_, err := t.c.call(ctx, t.c.request(t.era, "tasks/cancel", t.id, map[string]any{"taskId": t.id}, "", true))
	return err
}

// cancelDetached cancels the task after ctx ended, within 5 s of its own.
func (t *Task) cancelDetached(ctx context.Context) error {
	if t.cancels++; t.cancels > 1 {
		return nil
	}
	dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	return t.Cancel(dctx)
}
