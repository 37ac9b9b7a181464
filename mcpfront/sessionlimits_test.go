package mcpfront_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/mcpqueue/mcpqueue/mcpfront"
)

// A principal's 2025-11-25 sessions are capped (a deleted one gives its
// place back), what a session keeps of its initialize is bounded, and every
// GET stream of every session counts against the principal's listen
// streams; another principal is unaffected by all three.
func TestSessionLimits(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(c *mcpfront.Config) {
		c.Auth = headerAuth{}
		c.MaxSessions = 3
		c.MaxListenStreams = 5
		c.MaxClientData = 1024
	})
	as := func(who string) http.Header { return http.Header{"Authorization": {"Bearer " + who}} }
	initialize := func(who string, clientInfo any) reply {
		h := as(who)
		h.Set("Content-Type", "application/json")
		h.Set("Accept", "application/json, text/event-stream")
		body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": map[string]any{
			"protocolVersion": "2025-11-25", "capabilities": map[string]any{}, "clientInfo": clientInfo,
		}})
		return e.send(t, h, body, sendOpts{})
	}

	var alice []http.Header
	for range 3 {
		alice = append(alice, e.legacySession(t, as("alice")))
	}
	r := initialize("alice", map[string]any{"name": "t", "version": "1"})
	limitedReply(t, r, http.StatusOK, "too many sessions: a principal keeps at most 3")
	if r.header.Get("Mcp-Session-Id") != "" {
		t.Fatalf("a refused initialize handed out a session: %s", r.header.Get("Mcp-Session-Id"))
	}
	bob := e.legacySession(t, as("bob"))
	if d := e.send(t, alice[2], nil, sendOpts{verb: http.MethodDelete}); d.status != 200 {
		t.Fatalf("DELETE of alice's session: %s", d)
	}
	alice[2] = e.legacySession(t, as("alice")) // the deleted session's place

	big := map[string]any{"name": "t", "version": strings.Repeat("x", 2000)}
	r = initialize("carol", big)
	if r.err == nil || r.err.Code != -32602 || !strings.Contains(r.err.Message, "a session keeps at most 1024") || r.header.Get("Mcp-Session-Id") != "" {
		t.Fatalf("initialize with 2 KB of clientInfo: %s, want -32602 and no session", r)
	}

	// GET streams: up to 4 per session, 5 in all for alice.
	open := func(h http.Header) (bool, reply) {
		t.Helper()
		ctx, cancel := context.WithCancel(t.Context())
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, e.url, nil)
		req.Header = h.Clone()
		req.Header.Set("Accept", "text/event-stream")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			cancel()
			t.Fatal(err)
		}
		if strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
			t.Cleanup(func() { cancel(); resp.Body.Close() })
			return true, reply{}
		}
		defer cancel()
		r, err := readReply(resp)
		if err != nil {
			t.Fatal(err)
		}
		return false, r
	}
	for i := range 5 {
		if ok, r := open(alice[i%3]); !ok {
			t.Fatalf("alice's stream %d of 5: %s", i+1, r)
		}
	}
	ok, r := open(alice[2]) // the session has one stream only: the principal's cap refuses it
	if ok {
		t.Fatal("alice's sixth stream (in a session with one) was opened past the cap of 5")
	}
	limitedReply(t, r, http.StatusTooManyRequests, "too many open streams: at most 5")
	if ok, r := open(bob); !ok {
		t.Fatalf("bob's stream while alice holds 5: %s", r)
	}
}
