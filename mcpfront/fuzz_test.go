package mcpfront_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mcpqueue/mcpqueue/mcpfront"
)

// fuzzStatuses are the HTTP statuses the endpoint may answer with.
var fuzzStatuses = []int{200, 202, 400, 401, 403, 404, 405, 406, 413, 415, 429}

// fuzzHeaders picks the headers of a fuzzed request. The low two bits choose
// the wire: 0 a 2026-07-28 request whose routing headers mirror the body (so
// the fuzzer gets past them), 1 a 2025-11-25 request in a session, 2 bare
// (Content-Type only), 3 odd (charset, SSE only, no Mcp-Method); bit 2 adds
// a principal, bit 3 a cross-site Origin.
func fuzzHeaders(variant byte, body []byte, session string) http.Header {
	h := http.Header{}
	h.Set("Content-Type", "application/json")
	switch variant & 3 {
	case 0:
		var m struct {
			Method string `json:"method"`
			Params struct {
				Name   string `json:"name"`
				TaskID string `json:"taskId"`
			} `json:"params"`
		}
		_ = json.Unmarshal(body, &m)
		h.Set("Accept", "application/json, text/event-stream")
		h.Set("MCP-Protocol-Version", version)
		h.Set("Mcp-Method", m.Method)
		if n := m.Params.Name + m.Params.TaskID; n != "" {
			h.Set("Mcp-Name", n)
		}
	case 1:
		h.Set("Accept", "application/json, text/event-stream")
		h.Set("MCP-Protocol-Version", "2025-11-25")
		h.Set("Mcp-Session-Id", session)
	case 3:
		h.Set("Content-Type", "application/json; charset=utf-8")
		h.Set("Accept", "text/event-stream")
		h.Set("MCP-Protocol-Version", version)
	}
	if variant&4 != 0 {
		h.Set("Authorization", "Bearer fuzz")
	}
	if variant&8 != 0 {
		h.Set("Origin", "https://evil.example")
	}
	return h
}

// FuzzServeHTTP sends arbitrary bodies, with a few header variants, through
// the real handler (store, queue and a worker on an embedded NATS) and
// checks that every answer is a well-formed one: a known status, never 5xx,
// and a JSON-RPC 2.0 message whenever the body is JSON.
func FuzzServeHTTP(f *testing.F) {
	e := newEnv(f, func(c *mcpfront.Config) {
		c.Auth = headerAuth{}
		c.HandleAfter = 300 * time.Millisecond // a call that waits on a busy worker costs little
		c.MaxArgs = 4 << 10
		c.MaxInputKeys = 8
		c.MaxActiveTasks = 50
	})
	init, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": map[string]any{
		"protocolVersion": "2025-11-25", "capabilities": map[string]any{}, "clientInfo": map[string]any{"name": "fuzz", "version": "1"},
	}})
	req := httptest.NewRequestWithContext(f.Context(), http.MethodPost, "/mcp", bytes.NewReader(init))
	req.Host = "localhost"
	req.Header.Set("Content-Type", "application/json")
	rec := httptest.NewRecorder()
	e.handler.ServeHTTP(rec, req)
	session := rec.Header().Get("Mcp-Session-Id")
	if session == "" {
		f.Fatalf("initialize: HTTP %d %s", rec.Code, rec.Body)
	}

	f.Fuzz(func(t *testing.T, variant byte, body []byte) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		req := httptest.NewRequestWithContext(ctx, http.MethodPost, "/mcp", bytes.NewReader(body))
		req.Host = "localhost"
		req.Header = fuzzHeaders(variant, body, session)
		rec := httptest.NewRecorder()
		e.handler.ServeHTTP(rec, req)

		if !slices.Contains(fuzzStatuses, rec.Code) {
			t.Fatalf("HTTP %d for %q: %s", rec.Code, body, rec.Body)
		}
		switch ct := rec.Header().Get("Content-Type"); {
		case strings.HasPrefix(ct, "application/json"):
			checkMessage(t, rec.Body.Bytes(), body)
		case strings.HasPrefix(ct, "text/event-stream"):
			for line := range strings.SplitSeq(rec.Body.String(), "\n") {
				if d, ok := strings.CutPrefix(line, "data: "); ok {
					checkMessage(t, []byte(d), body)
				}
			}
		}
	})
}

// checkMessage fails unless msg is one JSON-RPC 2.0 message.
func checkMessage(t *testing.T, msg, body []byte) {
	t.Helper()
	var m struct {
		JSONRPC string          `json:"jsonrpc"`
		ID      json.RawMessage `json:"id"`
		Method  string          `json:"method"`
		Result  json.RawMessage `json:"result"`
		Error   *struct {
			Code    int    `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	if err := json.Unmarshal(msg, &m); err != nil || m.JSONRPC != "2.0" {
		t.Fatalf("answer is not a JSON-RPC 2.0 message (%v): %s\nrequest: %q", err, msg, body)
	}
	if m.Method != "" {
		return // a request or notification to the client on a stream
	}
	if (m.Result == nil) == (m.Error == nil) {
		t.Fatalf("answer needs exactly one of result and error: %s\nrequest: %q", msg, body)
	}
	if m.Error != nil && (m.Error.Code == 0 || m.Error.Message == "") {
		t.Fatalf("error without code or message: %s\nrequest: %q", msg, body)
	}
}
