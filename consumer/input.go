package consumer

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/mcpqueue/mcpqueue/taskstate"
	"github.com/mcpqueue/mcpqueue/vocab"
)

// InputRequest asks the client for something: an elicitation, a sampling
// completion, its roots. Key names the request; in a sync call it is the key
// the client sees (MRTR inputRequests), in a task it is the stem of a key made
// unique for the task's whole life.
type InputRequest struct {
	Key    string
	Method string
	Params any
}

// Elicitation asks the user to fill in a form described by requestedSchema
// (a flat JSON Schema object of primitive properties).
func Elicitation(key, message string, requestedSchema any) InputRequest {
	return InputRequest{Key: key, Method: "elicitation/create", Params: map[string]any{
		"message": message, "requestedSchema": requestedSchema,
	}}
}

// Sampling asks the client's model for a completion; params is a
// CreateMessageRequest's params (messages, maxTokens, …).
func Sampling(key string, params any) InputRequest {
	return InputRequest{Key: key, Method: "sampling/createMessage", Params: params}
}

// RootsList asks the client for its roots.
func RootsList(key string) InputRequest {
	return InputRequest{Key: key, Method: "roots/list", Params: map[string]any{}}
}

// ElicitResult is the client's answer to an elicitation.
type ElicitResult struct {
	Action  string         `json:"action"` // accept, decline or cancel
	Content map[string]any `json:"content,omitempty"`
}

// capabilityFor names the client capability an input method needs.
var capabilityFor = map[string]string{
	"elicitation/create":     "elicitation",
	"sampling/createMessage": "sampling",
	"roots/list":             "roots",
}

// ErrInputRequired ends a sync run that needs answers the client has not
// given yet; the worker turns it into an input-required outcome and the
// client retries with the answers. Handlers just return it.
var ErrInputRequired = errors.New("consumer: input required from the client")

// ErrInputTimeout is returned by Ask when a task waited InputTimeout for
// answers without getting them. Returned from the handler it fails the task.
var ErrInputTimeout = errors.New("consumer: timed out waiting for client input")

// ClientSupports reports whether the client declared capability (e.g.
// "elicitation", "sampling", "roots") on the request that started this call.
func (c *callState) ClientSupports(capability string) bool {
	var caps map[string]json.RawMessage
	_ = json.Unmarshal(c.meta[vocab.MetaClientCaps], &caps)
	_, ok := caps[capability]
	return ok
}

// Elicit asks one elicitation and decodes the answer.
func (c *callState) Elicit(ctx context.Context, key, message string, requestedSchema any) (*ElicitResult, error) {
	raw, err := c.Ask(ctx, Elicitation(key, message, requestedSchema))
	if err != nil {
		return nil, err
	}
	var r ElicitResult
	if err := json.Unmarshal(raw[0], &r); err != nil || r.Action == "" {
		return nil, &ProtocolError{Code: vocab.CodeInvalidParams, Message: fmt.Sprintf("malformed elicitation response for %q", key)}
	}
	return &r, nil
}

// Ask sends reqs to the client at once and returns the answers in order.
//
// In a task the record turns input_required with every request outstanding
// under a fresh key; Ask waits (the lease is kept) until tasks/update has
// answered all of them, or InputTimeout passes. Answers are stored on the
// record, so a run that resumes after a crash gets them without asking
// again. In a sync call Ask returns the answers the client sent with its
// retry, or ErrInputRequired, which the handler returns so that the client
// is asked. Ask calls must come in the same order on every run.
func (c *callState) Ask(ctx context.Context, reqs ...InputRequest) ([]json.RawMessage, error) {
	if len(reqs) == 0 {
		return nil, nil
	}
	for _, r := range reqs {
		capName, known := capabilityFor[r.Method]
		if !known {
			return nil, fmt.Errorf("consumer: unsupported input method %q", r.Method)
		}
		if !c.ClientSupports(capName) {
			return nil, &ProtocolError{Code: vocab.CodeMissingCapability,
				Message: fmt.Sprintf("this tool needs the client's %s capability, which the request did not declare", capName),
				Data:    map[string]any{"requiredCapabilities": map[string]any{capName: map[string]any{}}}}
		}
	}
	c.mu.Lock()
	mode := c.mode
	keys := make([]string, len(reqs))
	for i, r := range reqs {
		c.seq++
		k := r.Key
		if k == "" {
			k = "input"
		}
		if mode == taskstate.ModeTask {
			k = fmt.Sprintf("%s-%d", k, c.seq)
		} else if r.Key == "" {
			k = fmt.Sprintf("input_%d", c.seq)
		}
		keys[i] = k
	}
	c.mu.Unlock()
	if mode == taskstate.ModeTask {
		return c.askTask(ctx, keys, reqs)
	}
	return c.askSync(keys, reqs)
}

func (c *callState) askSync(keys []string, reqs []InputRequest) ([]json.RawMessage, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]json.RawMessage, len(keys))
	missing := false
	for i, k := range keys {
		if a, ok := c.answers[k]; ok {
			out[i] = a
			continue
		}
		missing = true
		if c.pending == nil {
			c.pending = map[string]InputRequest{}
		}
		c.pending[k] = reqs[i]
	}
	if missing {
		return nil, ErrInputRequired
	}
	return out, nil
}

func (c *callState) askTask(ctx context.Context, keys []string, reqs []InputRequest) ([]json.RawMessage, error) {
	encoded := make(map[string]json.RawMessage, len(keys))
	for i, k := range keys {
		b, err := json.Marshal(map[string]any{"method": reqs[i].Method, "params": reqs[i].Params})
		if err != nil {
			return nil, fmt.Errorf("consumer: encode input request %q: %w", k, err)
		}
		encoded[k] = b
	}
	// Post the requests not answered yet (a resumed run finds its answers).
	cur, err := c.mutate(ctx, func(t *taskstate.Task) error {
		changed := false
		for k, b := range encoded {
			if _, done := t.InputResponses[k]; done {
				continue
			}
			if _, open := t.InputRequests[k]; open {
				continue
			}
			if t.InputRequests == nil {
				t.InputRequests = map[string]json.RawMessage{}
			}
			t.InputRequests[k] = b
			changed = true
		}
		if len(t.InputRequests) > 0 && t.Status == taskstate.Working {
			t.Status = taskstate.InputRequired
			changed = true
		}
		if !changed {
			return taskstate.ErrSkip
		}
		return nil
	})
	if err != nil && !errors.Is(err, taskstate.ErrSkip) {
		return nil, fmt.Errorf("consumer: posting input requests: %w", err)
	}
	if out, ok := answered(cur, keys); ok {
		return out, refused(out) // answered before: a resumed run does not ask again
	}
	c.Logger().Info().Strs("keys", keys).Msg("waiting for client input")

	started := time.Now()
	deadline := started.Add(c.inputTimeout)
	wctx, cancel := context.WithDeadlineCause(ctx, deadline, ErrInputTimeout)
	defer cancel()
	// A task parks after parkAfter without answers (never in a sync call,
	// whose client waits on the line, nor when the input timeout comes
	// first).
	var parkAt <-chan time.Time
	if c.parkAfter > 0 && c.parkAfter < c.inputTimeout {
		t := time.NewTimer(c.parkAfter)
		defer t.Stop()
		parkAt = t.C
	}
	updates, err := c.w.store.Watch(wctx, c.taskID)
	if err != nil {
		return nil, fmt.Errorf("consumer: watching for input: %w", err)
	}
	for {
		select {
		case t, ok := <-updates:
			if !ok {
				if cause := context.Cause(wctx); errors.Is(cause, ErrInputTimeout) && ctx.Err() == nil {
					return nil, fmt.Errorf("%w: no answer within %s", ErrInputTimeout, c.inputTimeout)
				}
				if ctx.Err() != nil {
					return nil, context.Cause(ctx)
				}
				return nil, fmt.Errorf("consumer: task ended while waiting for input")
			}
			c.saw(t)
			if out, ok := answered(t, keys); ok {
				c.w.cfg.Telemetry.InputWaited(c.tool, time.Since(started))
				c.Logger().Info().Dur("waited", time.Since(started)).Msg("client input received")
				return out, refused(out)
			}
			if t.Status.Terminal() {
				return nil, fmt.Errorf("consumer: task ended while waiting for input")
			}
		case <-parkAt:
			out, err := c.park(ctx, keys, deadline)
			if out != nil {
				c.w.cfg.Telemetry.InputWaited(c.tool, time.Since(started))
				return out, refused(out) // answered just before the park
			}
			return nil, err
		}
	}
}

// refused turns a client's error answer (a 2025-11-25 client may answer a
// request with a JSON-RPC error) into the error Ask returns.
func refused(answers []json.RawMessage) error {
	for _, a := range answers {
		var e struct {
			Error *struct {
				Code    int    `json:"code"`
				Message string `json:"message"`
			} `json:"error"`
		}
		if json.Unmarshal(a, &e) == nil && e.Error != nil {
			return &ProtocolError{Code: e.Error.Code, Message: "the client refused the input request: " + e.Error.Message}
		}
	}
	return nil
}

func answered(t *taskstate.Task, keys []string) ([]json.RawMessage, bool) {
	out := make([]json.RawMessage, len(keys))
	for i, k := range keys {
		a, ok := t.InputResponses[k]
		if !ok {
			return nil, false
		}
		out[i] = a
	}
	return out, true
}

// Continue ends the inline part of a call that gathers its input
// synchronously (a Tool with InputFirst): the client that waits receives the
// task handle, and the rest of the handler runs as a task. Elsewhere it does
// nothing.
func (c *callState) Continue(ctx context.Context) error {
	c.mu.Lock()
	if c.mode != taskstate.ModeGather {
		c.mu.Unlock()
		return nil
	}
	c.mode = taskstate.ModeTask
	c.mu.Unlock()
	_, err := c.mutate(ctx, func(t *taskstate.Task) error {
		t.Mode = taskstate.ModeTask
		return nil
	})
	if err != nil {
		return fmt.Errorf("consumer: continue as task: %w", err)
	}
	return nil
}

// inputOutcome is the result a sync run ends with when it needs answers.
func (c *callState) inputOutcome() (json.RawMessage, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.pending) == 0 || c.mode == taskstate.ModeTask {
		return nil, false
	}
	reqs := make(map[string]any, len(c.pending))
	for k, r := range c.pending {
		reqs[k] = map[string]any{"method": r.Method, "params": r.Params}
	}
	b, _ := json.Marshal(map[string]any{"resultType": "input_required", "inputRequests": reqs})
	return b, true
}

// ErrParked is what Ask returns when a task's run parks: nobody answered
// within the tool's ParkAfter, so the run ends and frees its worker slot,
// and the task waits for its client (input_required) with no run. Return
// it from the handler (as any error Ask returns). When the last answer
// comes, the handler runs again from the top on any worker, and Ask returns
// the stored answers without asking again: work done before Ask must be
// repeatable, or kept across runs with Checkpoint and Restore. A parked
// run's outcome is discarded, whatever the handler returns.
var ErrParked = errors.New("consumer: the task waits for client input without a run (parked)")

// MaxCheckpoint is the largest state Checkpoint stores.
const MaxCheckpoint = 64 << 10

func (c *callState) isParked() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.parked
}

// park records that the task waits for the answers to keys with no run,
// until deadline (the input timeout), and gives up the lease. If the answers
// arrived meanwhile it returns them instead.
func (c *callState) park(ctx context.Context, keys []string, deadline time.Time) ([]json.RawMessage, error) {
	if err := c.checkWaitingCap(ctx); err != nil {
		return nil, err
	}
	now := c.w.cfg.Now().UTC()
	t, err := c.mutate(ctx, func(t *taskstate.Task) error {
		if _, ok := answered(t, keys); ok {
			return taskstate.ErrSkip
		}
		t.Parked = &taskstate.Parked{Since: now, Until: deadline.UTC()}
		t.Parks++
		t.Lease = nil
		return nil
	})
	if errors.Is(err, taskstate.ErrSkip) {
		out, _ := answered(t, keys)
		return out, nil
	}
	if err != nil {
		return nil, fmt.Errorf("consumer: parking the task: %w", err)
	}
	c.mu.Lock()
	c.parked = true
	c.mu.Unlock()
	c.Logger().Info().Strs("keys", keys).Time("until", deadline).Msg("parking: no answer yet; the task waits without a worker slot")
	return nil, ErrParked
}

// checkWaitingCap refuses to park a task whose owner already has
// MaxWaitingInput tasks waiting for input. It reads the owner's tasks
// (taskstate.Store.List), stopping at the bound.
func (c *callState) checkWaitingCap(ctx context.Context) error {
	max := c.w.cfg.MaxWaitingInput
	if c.owner == "" || max < 0 {
		return nil
	}
	n, cursor := 0, ""
	for {
		page, next, err := c.w.store.List(ctx, c.owner, cursor, 200)
		if err != nil {
			return fmt.Errorf("consumer: counting the owner's tasks waiting for input: %w", err)
		}
		for _, t := range page {
			if t.ID != c.taskID && t.Status == taskstate.InputRequired {
				n++
			}
		}
		if n >= max {
			return &ProtocolError{Code: vocab.CodeLimited, Message: fmt.Sprintf(
				"this task cannot wait for input: its owner already has %d tasks waiting for input, the limit (--max-waiting-input); answer or cancel some of them", max)}
		}
		if next == "" {
			return nil
		}
		cursor = next
	}
}

// Checkpoint keeps v (JSON-encoded, at most MaxCheckpoint bytes) on the
// task's record, so a later run of the handler — after a park, a crash or a
// lost lease — can Restore it instead of repeating expensive work.
func (c *callState) Checkpoint(ctx context.Context, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("consumer: checkpoint: %w", err)
	}
	if len(b) > MaxCheckpoint {
		return fmt.Errorf("consumer: checkpoint of %d bytes exceeds the %d-byte limit", len(b), MaxCheckpoint)
	}
	_, err = c.mutate(ctx, func(t *taskstate.Task) error {
		t.Checkpoint = b
		return nil
	})
	if err != nil {
		return fmt.Errorf("consumer: checkpoint: %w", err)
	}
	return nil
}

// Restore decodes the state the last Checkpoint of this task kept into v
// and reports whether there was one.
func (c *callState) Restore(v any) (bool, error) {
	c.mu.Lock()
	var b json.RawMessage
	if c.rec != nil {
		b = c.rec.Checkpoint
	}
	c.mu.Unlock()
	if len(b) == 0 {
		return false, nil
	}
	if err := json.Unmarshal(b, v); err != nil {
		return false, fmt.Errorf("consumer: restore: %w", err)
	}
	return true, nil
}
