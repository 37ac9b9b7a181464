package client

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/mcpqueue/mcpqueue/internal/mcpwire"
)

// The 2025 revisions: initialize opens a session; a tool whose
// execution.taskSupport allows it is called with params.task; input
// requests arrive as server-to-client requests on a response stream.

// initialize opens the session (under c.mu, from negotiate).
func (c *Client) initialize(ctx context.Context) (string, bool, error) {
	raw, err := c.call(ctx, &rpc{era: Version2025, method: "initialize", params: map[string]any{
		"protocolVersion": Version2025, "capabilities": c.capabilities(false), "clientInfo": c.o.info,
	}})
	if err != nil {
		return "", false, fmt.Errorf("client: initialize: %w", err)
	}
	var res mcpwire.InitializeResult
	if err := json.Unmarshal(raw, &res); err != nil || res.ProtocolVersion == "" {
		return "", false, fmt.Errorf("client: initialize: the answer names no protocolVersion: %s", raw)
	}
	if !strings.HasPrefix(res.ProtocolVersion, "2025-") && !strings.HasPrefix(res.ProtocolVersion, "2024-") {
		return "", false, fmt.Errorf("client: initialize: the server speaks %q, which this client does not", res.ProtocolVersion)
	}
	era := res.ProtocolVersion
	if _, err := c.call(ctx, &rpc{era: era, method: "notifications/initialized"}); err != nil {
		return "", false, fmt.Errorf("client: notifications/initialized: %w", err)
	}
	c.era = era
	c.tasks = era == Version2025 && res.Capabilities.TaskToolCalls()
	return c.era, c.tasks, nil
}

// taskSupport is tool's execution.taskSupport, from tools/list (read once,
// and again for a tool not seen yet).
func (c *Client) taskSupport(ctx context.Context, era, tool string) (string, error) {
	c.state.Lock()
	s, ok := c.support[tool]
	c.state.Unlock()
	if ok {
		return s, nil
	}
	if _, err := c.listTools(ctx, era); err != nil {
		return "", err
	}
	c.state.Lock()
	defer c.state.Unlock()
	return c.support[tool], nil
}

func (c *Client) start2025(ctx context.Context, era, tool string, args json.RawMessage, key string, tasks bool) (*Task, error) {
	params := map[string]any{"name": tool, "arguments": args}
	asTask := false
	if tasks {
		s, err := c.taskSupport(ctx, era, tool)
		if err != nil {
			return nil, err
		}
		asTask = s == mcpwire.TaskOptional || s == mcpwire.TaskRequired
	}
	if asTask {
		params["task"] = map[string]any{}
	}
	r := c.request(era, "tools/call", tool, params, key, false)
	r.serve = c.serveInput("")
	raw, err := c.call(ctx, r)
	if err != nil {
		return nil, err
	}
	t := &Task{c: c, era: era, key: key, answered: map[string]bool{}}
	if asTask {
		var created struct { // mcpwire.LegacyCreateTaskResult, read as both revisions' task
			Task *taskView `json:"task"`
		}
		if err := json.Unmarshal(raw, &created); err == nil && created.Task != nil && created.Task.TaskID != "" {
			t.id = created.Task.TaskID
			t.note(created.Task)
			return t, nil
		}
	}
	return t.settleInline(raw, tasks)
}

// serveInput answers the server's input requests read from a stream with
// the input handler (taskID: the task they belong to, if known).
func (c *Client) serveInput(taskID string) func(ctx context.Context, m *message) (json.RawMessage, error) {
	return func(ctx context.Context, m *message) (json.RawMessage, error) {
		var p struct {
			Meta map[string]mcpwire.RelatedTask `json:"_meta"`
		}
		_ = json.Unmarshal(m.Params, &p)
		req := InputRequest{Key: strings.Trim(string(m.ID), `"`), TaskID: taskID, Method: m.Method, Params: m.Params}
		if rt, ok := p.Meta[metaRelated]; ok && rt.TaskID != "" {
			req.TaskID = rt.TaskID
		}
		if c.o.input == nil {
			return nil, &Error{Code: -32601, Message: "this client answers no " + m.Method}
		}
		return c.answer(ctx, req)
	}
}
