package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// mcp is a lean 2026-07-28 client: the harness's wire (headers, _meta,
// capabilities), without per-call maps, on a transport that keeps one idle
// connection per concurrent caller.
type mcp struct {
	url string
	hc  *http.Client
	seq atomic.Int64
}

func newMCP(url string, conc int) *mcp {
	tr := &http.Transport{
		Proxy:               nil,
		DialContext:         (&net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		MaxIdleConns:        2*conc + 8,
		MaxIdleConnsPerHost: 2*conc + 8,
		IdleConnTimeout:     90 * time.Second,
		DisableCompression:  true,
		ForceAttemptHTTP2:   false,
	}
	return &mcp{url: url, hc: &http.Client{Transport: tr, Timeout: 3 * time.Minute}}
}

const (
	capsPlain = `{"elicitation":{},"sampling":{}}`
	capsTasks = `{"elicitation":{},"sampling":{},"extensions":{"io.modelcontextprotocol/tasks":{}}}`
	waitCall  = `"name":"noop","arguments":{}`
)

type rpcError struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
}

func (e *rpcError) Error() string { return fmt.Sprintf("rpc error %d: %s", e.Code, e.Message) }

// call sends one request; params is the inside of the params object without
// _meta; name goes in Mcp-Name. It returns the raw result.
func (m *mcp) call(ctx context.Context, method, name, params string, tasks bool) (json.RawMessage, error) {
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

	req, err := http.NewRequestWithContext(ctx, http.MethodPost, m.url, bytes.NewReader(b))
	if err != nil {
		return nil, err
	}
	h := req.Header
	h["Content-Type"] = []string{"application/json"}
	h["Accept"] = []string{"application/json, text/event-stream"}
	h["Mcp-Protocol-Version"] = []string{"2026-07-28"}
	h["Mcp-Method"] = []string{method}
	if name != "" {
		h["Mcp-Name"] = []string{name}
	}
	resp, err := m.hc.Do(req)
	if err != nil {
		return nil, err
	}
	raw, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		return nil, err
	}
	if ct := resp.Header.Get("Content-Type"); len(ct) >= 17 && ct[:17] == "text/event-stream" {
		raw = lastSSEData(raw)
	}
	var env struct {
		Result json.RawMessage `json:"result"`
		Error  *rpcError       `json:"error"`
	}
	if err := json.Unmarshal(raw, &env); err != nil {
		return nil, fmt.Errorf("HTTP %d: undecodable body %.200q", resp.StatusCode, raw)
	}
	if env.Error != nil {
		return nil, env.Error
	}
	return env.Result, nil
}

func lastSSEData(b []byte) []byte {
	var last []byte
	for _, line := range bytes.Split(b, []byte("\n")) {
		if d, ok := bytes.CutPrefix(line, []byte("data: ")); ok {
			last = d
		}
	}
	return last
}

var errToolError = errors.New("tool returned isError: true")

// taskOnce runs one task: tools/call declaring the tasks extension, then
// tasks/get every poll until the task is terminal.
func (m *mcp) taskOnce(ctx context.Context, poll time.Duration) (sample, error) {
	t0 := time.Now()
	raw, err := m.call(ctx, "tools/call", "noop", waitCall, true)
	if err != nil {
		return sample{}, fmt.Errorf("tools/call: %w", err)
	}
	var h struct {
		ResultType string `json:"resultType"`
		TaskID     string `json:"taskId"`
	}
	if err := json.Unmarshal(raw, &h); err != nil || h.ResultType != "task" || h.TaskID == "" {
		return sample{}, fmt.Errorf("tools/call: want a task handle, got %.200s", raw)
	}
	s := sample{create: time.Since(t0)}
	get := `"taskId":"` + h.TaskID + `"`
	for {
		if err := sleepCtx(ctx, poll); err != nil {
			return s, err
		}
		raw, err := m.call(ctx, "tasks/get", h.TaskID, get, true)
		s.polls++
		if err != nil {
			return s, fmt.Errorf("tasks/get: %w", err)
		}
		var g struct {
			Status        string    `json:"status"`
			CreatedAt     time.Time `json:"createdAt"`
			LastUpdatedAt time.Time `json:"lastUpdatedAt"`
			Result        struct {
				IsError bool `json:"isError"`
			} `json:"result"`
			Error *rpcError `json:"error"`
		}
		if err := json.Unmarshal(raw, &g); err != nil {
			return s, fmt.Errorf("tasks/get: %w", err)
		}
		switch g.Status {
		case "working", "input_required":
			if time.Since(t0) > time.Minute {
				return s, fmt.Errorf("task %s still %s after a minute", h.TaskID, g.Status)
			}
			continue
		case "completed":
			s.e2e = time.Since(t0)
			s.server = g.LastUpdatedAt.Sub(g.CreatedAt)
			if g.Result.IsError {
				return s, errToolError
			}
			return s, nil
		default:
			return s, fmt.Errorf("task %s ended %s: %v", h.TaskID, g.Status, g.Error)
		}
	}
}

// syncOnce calls the tool without the tasks extension: the api waits for
// the record to turn terminal and answers with the result inline.
func (m *mcp) syncOnce(ctx context.Context) (sample, error) {
	t0 := time.Now()
	raw, err := m.call(ctx, "tools/call", "noop", waitCall, false)
	if err != nil {
		return sample{}, fmt.Errorf("tools/call: %w", err)
	}
	var r struct {
		ResultType string `json:"resultType"`
		IsError    bool   `json:"isError"`
	}
	if err := json.Unmarshal(raw, &r); err != nil || r.ResultType != "complete" {
		return sample{}, fmt.Errorf("tools/call: want a complete result, got %.200s", raw)
	}
	if r.IsError {
		return sample{}, errToolError
	}
	return sample{e2e: time.Since(t0)}, nil
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
					_ = sleepCtx(ctx, 10*time.Millisecond) // no hot error loop
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
