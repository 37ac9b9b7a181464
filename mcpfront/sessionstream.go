package mcpfront

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"time"

	"github.com/mcpqueue/mcpqueue/broker"
	"github.com/mcpqueue/mcpqueue/vocab"
)

// The 2025-11-25 session stream: GET /mcp with a session's Mcp-Session-Id
// opens an SSE stream that carries notifications/resources/updated for the
// resources the session subscribed to (resources/subscribe, on any
// replica). Workers report changes on the bus (consumer:
// Mux.ResourceUpdated, Call.ResourceUpdated, topic broker.TopicResource);
// every replica hears every change and forwards it to its streams whose
// session holds that URI, read from the store at the change, so a
// subscription made through another replica counts at once. Delivery is
// best effort, like the bus. A session keeps at most 4 streams open on a
// replica, and every one counts against its principal's listen streams
// (Config.MaxListenStreams). The stream ends when the client closes it,
// when the session is gone (checked at each change and keep-alive), or on
// shutdown (EndListens). Without a session header GET stays 405: the
// 2026-07-28 wire has no GET stream.

// maxSessionStreams bounds the streams one session keeps open on a replica.
const maxSessionStreams = 4

func (s *Server) sessionStream(w http.ResponseWriter, r *http.Request) {
	sess, rerr := s.sessionOf(r)
	if rerr != nil {
		writeError(w, nil, rerr)
		return
	}
	if !acceptsSSE(r) {
		writeError(w, nil, errorf(vocab.CodeInvalidRequest, http.StatusNotAcceptable, "Accept must allow text/event-stream"))
		return
	}
	key := "session-stream:" + sess.ID
	if !s.listens.acquire(key, maxSessionStreams) {
		writeError(w, nil, errorf(vocab.CodeLimited, http.StatusTooManyRequests, fmt.Sprintf("a session keeps at most %d streams open", maxSessionStreams)))
		return
	}
	defer s.listens.release(key)
	// Every stream counts against the principal's listen streams, whichever
	// session it belongs to: more sessions do not open more streams.
	pkey, limit := limitKey(r), s.maxListenStreams()
	if !s.listens.acquire(pkey, limit) {
		writeError(w, nil, errorf(vocab.CodeLimited, http.StatusTooManyRequests, fmt.Sprintf("too many open streams: at most %d per client on one server (subscriptions/listen and session streams together); close one first", limit)).
			withData(map[string]any{"maxListenStreams": limit}))
		return
	}
	defer s.listens.release(pkey)
	closing := s.listens.closingCh()
	ctx := r.Context()

	changed := make(chan string, 64)
	sub, err := s.bus.Subscribe(ctx, broker.TopicResource, "", func(_ string, data []byte) {
		var m struct {
			URI string `json:"uri"`
		}
		if json.Unmarshal(data, &m) != nil || m.URI == "" {
			return
		}
		select {
		case changed <- m.URI:
		default: // a reader this slow misses changes (best effort)
		}
	})
	if err != nil {
		s.internalError(w, nil, "subscribing to resource changes", err)
		return
	}
	defer sub.Close()

	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	flush := func() bool {
		f, ok := w.(http.Flusher)
		if ok {
			f.Flush()
		}
		return ok
	}
	if _, err := fmt.Fprint(w, ": session stream\n\n"); err != nil || !flush() {
		return
	}
	keepalive := time.NewTicker(s.listenKeepalive())
	defer keepalive.Stop()
	for {
		var uri string
		select {
		case <-ctx.Done():
			return
		case <-closing:
			return
		case <-keepalive.C:
		case uri = <-changed:
		}
		cur, err := s.sessions.Session(ctx, sess.ID)
		if err != nil {
			return // deleted, expired, or the store is away: the client reconnects
		}
		if uri == "" {
			_, err = fmt.Fprint(w, ": keep-alive\n\n")
		} else if slices.Contains(cur.Subscriptions, uri) {
			b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "method": "notifications/resources/updated", "params": map[string]string{"uri": uri}})
			_, err = fmt.Fprintf(w, "event: message\ndata: %s\n\n", b)
		} else {
			continue
		}
		if err != nil || !flush() {
			return
		}
	}
}
