package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mcpqueue/mcpqueue/internal/procs"
)

// mcp is a lean 2026-07-28 client: the harness's wire (headers, _meta,
// capabilities), without per-call maps, on keep-alive connections (one per
// concurrent caller, see conns).
type mcp struct {
	path string
	pool *conns
	seq  atomic.Int64
	auth []byte // header lines every request carries ("Authorization: Bearer …\r\n"), or none
}

// newMCP returns a client of the MCP endpoint at url
// ("http://host:port/mcp"; a URL without a path means /mcp) for up to conc
// concurrent callers.
func newMCP(rawURL string, conc int) (*mcp, error) {
	u, err := url.Parse(rawURL)
	if err != nil || u.Scheme != "http" || u.Host == "" || u.RawQuery != "" {
		return nil, fmt.Errorf("MCP endpoint %q: want http://host:port/path (the client speaks plain HTTP/1.1)", rawURL)
	}
	path := u.EscapedPath()
	if path == "" {
		path = "/mcp"
	}
	host := u.Host
	if u.Port() == "" {
		host += ":80"
	}
	return &mcp{path: path, pool: newConns(host, conc+8)}, nil
}

const (
	capsPlain = `{"elicitation":{},"sampling":{}}`
	capsTasks = `{"elicitation":{},"sampling":{},"extensions":{"io.modelcontextprotocol/tasks":{}}}`
)

// toolCall is the tool a row calls: its name (also the Mcp-Name header),
// its arguments (compact JSON) and the tools/call params built from both.
type toolCall struct {
	name, args string
	params     string // "name":…,"arguments":…
}

// newToolCall checks name and the JSON object args and builds the params.
func newToolCall(name, args string) (toolCall, error) {
	if name == "" || strings.ContainsFunc(name, func(r rune) bool { return r < 0x20 || r == 0x7f }) {
		return toolCall{}, fmt.Errorf("tool name %q: want a non-empty name without control characters", name)
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal([]byte(args), &obj); err != nil || obj == nil {
		return toolCall{}, fmt.Errorf("arguments of %s %q: want a JSON object such as {} or {\"seconds\":0}", name, args)
	}
	var compact bytes.Buffer
	_ = json.Compact(&compact, []byte(args)) // valid: it decoded
	quoted, _ := json.Marshal(name)
	return toolCall{name: name, args: compact.String(), params: `"name":` + string(quoted) + `,"arguments":` + compact.String()}, nil
}

// String is the tool as the report names it: `noop` {}.
func (t toolCall) String() string { return "`" + t.name + "` " + t.args }

type rpcError struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
}

func (e *rpcError) Error() string { return fmt.Sprintf("rpc error %d: %s", e.Code, e.Message) }

// call sends one request; params is the inside of the params object without
// _meta; name goes in Mcp-Name. It decodes the reply's result into result
// (any JSON-RPC error is returned as *rpcError) and returns the raw reply.
func (m *mcp) call(ctx context.Context, method, name, params string, tasks bool, result any) ([]byte, error) {
	caps := capsPlain
	if tasks {
		caps = capsTasks
	}
	b := make([]byte, 0, 320)
	b = append(b, `{"jsonrpc":"2.0","id":`...)
	b = strconv.AppendInt(b, m.seq.Add(1), 10)
	b = append(b, `,"method":"`...)
	b = append(b, method...)
	b = append(b, `","params":{`...)
	if params != "" {
		b = append(b, params...)
		b = append(b, ',')
	}
	b = append(b, `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":`...)
	b = append(b, caps...)
	b = append(b, `}}}`...)

	h := make([]byte, 0, 128)
	h = append(h, "Mcp-Protocol-Version: 2026-07-28\r\nMcp-Method: "...)
	h = append(h, method...)
	h = append(h, "\r\n"...)
	h = append(h, m.auth...)
	if name != "" {
		h = append(h, "Mcp-Name: "...)
		h = append(h, name...)
		h = append(h, "\r\n"...)
	}
	resp, err := m.pool.post(ctx, m.path, h, b)
	if err != nil {
		return nil, err
	}
	raw := resp.body
	if resp.sse {
		raw = procs.LastSSEData(raw)
	}
	env := struct {
		Result any       `json:"result"`
		Error  *rpcError `json:"error"`
	}{Result: result}
	if err := json.Unmarshal(raw, &env); err != nil {
		return raw, fmt.Errorf("HTTP %d: undecodable body %.200q", resp.status, raw)
	}
	if env.Error != nil {
		return raw, env.Error
	}
	return raw, nil
}

var errToolError = errors.New("tool returned isError: true")

// pollPolicy is how the task path waits before each tasks/get: as the
// server suggests — the pollIntervalMs of the last answer, the create answer
// for the first wait, as the official clients do — or a fixed interval
// (0: again as soon as an answer says working). It is the value of --poll.
type pollPolicy struct {
	server bool
	every  time.Duration
}

func (p *pollPolicy) String() string {
	if p.server {
		return "server"
	}
	return p.every.String()
}

func (p *pollPolicy) Set(v string) error {
	if v == "server" {
		*p = pollPolicy{server: true}
		return nil
	}
	d, err := time.ParseDuration(v)
	if err != nil || d <= 0 {
		return errors.New(`want "server" (follow the pollIntervalMs the server suggests) or a fixed interval > 0 such as 2ms`)
	}
	*p = pollPolicy{every: d}
	return nil
}

// wait is how long to wait before the next tasks/get, after an answer that
// suggested suggestedMs.
func (p pollPolicy) wait(suggestedMs int64) (time.Duration, error) {
	if !p.server {
		return p.every, nil
	}
	if suggestedMs <= 0 {
		return 0, errors.New("the answer suggests no pollIntervalMs to wait (--poll server)")
	}
	return time.Duration(suggestedMs) * time.Millisecond, nil
}

// describe says how the policy polls, for the report.
func (p pollPolicy) describe() string {
	switch {
	case p.server:
		return "as the server suggests (pollIntervalMs)"
	case p.every == 0:
		return "again as soon as an answer says working (back to back)"
	}
	return "every " + p.every.String()
}

// terminal reports whether a task status is final.
func terminal(status string) bool {
	return status == "completed" || status == "failed" || status == "cancelled"
}

// taskOnce runs one task: tools/call declaring the tasks extension, then
// tasks/get until the task is terminal. Every legal answer to the call is
// taken: the plain result (the server finished the task within its inline
// wait: one round trip, no polls), a handle already terminal (fetched at
// once), or a handle still working (polled, each tasks/get after the wait
// poll sets).
func (m *mcp) taskOnce(ctx context.Context, t toolCall, poll pollPolicy) (sample, error) {
	t0 := time.Now()
	var h struct {
		ResultType     string `json:"resultType"`
		TaskID         string `json:"taskId"`
		Status         string `json:"status"`
		PollIntervalMs int64  `json:"pollIntervalMs"`
		IsError        bool   `json:"isError"`
	}
	raw, err := m.call(ctx, "tools/call", t.name, t.params, true, &h)
	if err != nil {
		return sample{}, fmt.Errorf("tools/call: %w", err)
	}
	s := sample{created: time.Now()}
	s.create = s.created.Sub(t0)
	switch {
	case h.ResultType == "complete":
		s.e2e, s.inline = s.create, true
		if h.IsError {
			return s, errToolError
		}
		return s, nil
	case h.ResultType != "task" || h.TaskID == "":
		return s, fmt.Errorf("tools/call: want a result or a task handle, got %.200s", raw)
	}
	get := `"taskId":"` + h.TaskID + `"`
	suggested, answer := h.PollIntervalMs, "tools/call"
	for wait := !terminal(h.Status); ; wait = true {
		if wait {
			d, err := poll.wait(suggested)
			if err != nil {
				return s, fmt.Errorf("%s: %w", answer, err)
			}
			if err := procs.Sleep(ctx, d); err != nil {
				return s, err
			}
			s.waits++
			s.pollWait += d
		}
		var g struct {
			Status         string    `json:"status"`
			CreatedAt      time.Time `json:"createdAt"`
			LastUpdatedAt  time.Time `json:"lastUpdatedAt"`
			PollIntervalMs int64     `json:"pollIntervalMs"`
			Result         struct {
				IsError bool `json:"isError"`
			} `json:"result"`
			Error *rpcError `json:"error"`
		}
		_, err = m.call(ctx, "tasks/get", h.TaskID, get, true, &g)
		s.polls++
		if err != nil {
			return s, fmt.Errorf("tasks/get: %w", err)
		}
		switch g.Status {
		case "working", "input_required":
			if time.Since(t0) > time.Minute {
				return s, fmt.Errorf("task %s still %s after a minute", h.TaskID, g.Status)
			}
			suggested, answer = g.PollIntervalMs, "tasks/get"
			continue
		case "completed":
			s.e2e = time.Since(t0)
			s.server = recordLife(g.CreatedAt, g.LastUpdatedAt)
			if g.Result.IsError {
				return s, errToolError
			}
			return s, nil
		default:
			return s, fmt.Errorf("task %s ended %s: %w", h.TaskID, g.Status, g.Error)
		}
	}
}

// recordLife is createdAt → lastUpdatedAt, or 0 (no figure) when both are
// whole seconds: a server that stamps seconds says nothing at this scale.
func recordLife(created, updated time.Time) time.Duration {
	if created.Nanosecond() == 0 && updated.Nanosecond() == 0 {
		return 0
	}
	return updated.Sub(created)
}

// taskOp is taskOnce of t under poll, as drive wants it.
func (m *mcp) taskOp(t toolCall, poll pollPolicy) func(context.Context) (sample, error) {
	return func(ctx context.Context) (sample, error) { return m.taskOnce(ctx, t, poll) }
}

// syncOnce calls the tool without the tasks extension: the api waits for
// the record to turn terminal and answers with the result inline.
func (m *mcp) syncOnce(ctx context.Context, t toolCall) (sample, error) {
	t0 := time.Now()
	var r struct {
		ResultType string `json:"resultType"`
		IsError    bool   `json:"isError"`
	}
	raw, err := m.call(ctx, "tools/call", t.name, t.params, false, &r)
	if err != nil {
		return sample{}, fmt.Errorf("tools/call: %w", err)
	}
	if r.ResultType != "complete" {
		return sample{}, fmt.Errorf("tools/call: want a complete result, got %.200s", raw)
	}
	if r.IsError {
		return sample{}, errToolError
	}
	return sample{e2e: time.Since(t0)}, nil
}

// syncOp is syncOnce of t, as drive wants it.
func (m *mcp) syncOp(t toolCall) func(context.Context) (sample, error) {
	return func(ctx context.Context) (sample, error) { return m.syncOnce(ctx, t) }
}

// drive runs op in conc closed loops until win ends; operations that
// complete inside win (which starts after the warm-up) are counted. Loops finish
// the operation they are in, so the system is quiet when drive returns.
func drive(ctx context.Context, name string, conc int, win window, pids map[string]int, op func(context.Context) (sample, error)) (*result, error) {
	rec := newRecorder(name, conc, win)
	cpu := watchCPU(pids, win)
	var wg sync.WaitGroup
	for range conc {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Now().Before(win.to) && ctx.Err() == nil {
				s, err := op(ctx)
				if ctx.Err() != nil {
					return
				}
				if err != nil {
					rec.fail(err)
					_ = procs.Sleep(ctx, 10*time.Millisecond) // no hot error loop
					continue
				}
				rec.done(time.Now(), s)
			}
		}()
	}
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	r := rec.result()
	r.cpu = cpu.wait()
	return r, nil
}
