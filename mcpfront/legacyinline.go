package mcpfront

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"

	"github.com/mcpqueue/mcpqueue/producer"
	"github.com/mcpqueue/mcpqueue/taskstate"
)

// legacyMeta is the job meta of a 2025-11-25 call: the request's progress
// token, and the session's log level and client capabilities.
func legacyMeta(c *legacyCall, reqMeta map[string]json.RawMessage) map[string]json.RawMessage {
	meta := map[string]json.RawMessage{}
	if v, ok := reqMeta["progressToken"]; ok {
		meta["progressToken"] = v
	}
	if c.sess.LogLevel != "" {
		meta["logLevel"], _ = json.Marshal(c.sess.LogLevel)
	}
	if len(c.sess.ClientCapabilities) > 0 {
		meta["clientCapabilities"] = c.sess.ClientCapabilities
	}
	return meta
}

// legacyInline runs req (a tool call, prompts/get, resources/read or
// completion/complete of a 2025-era session) while the client waits: input
// requests reach it as server-to-client requests on the response stream,
// and the reply is the outcome. The call is cancelled if the client goes
// away or SyncTimeout passes.
func (s *Server) legacyInline(ctx context.Context, w http.ResponseWriter, r *http.Request, c *legacyCall, req *producer.Request) {
	// Input requests of a 2025-era call travel on the record (as in a task)
	// and reach the client as server-to-client requests on a stream.
	req.Era, req.Mode = taskstate.Era20251125, taskstate.ModeTask
	ctx, cancel := context.WithTimeout(ctx, s.cfg.SyncTimeout)
	defer cancel()
	out := &replier{w: w, id: c.req.ID}
	final, err := s.streamTask(ctx, r, out, req.ID, streamOpts{
		progress: req.Meta["progressToken"] != nil || req.Meta["logLevel"] != nil,
		create:   func() error { _, err := s.prod.Create(ctx, req); return err },
	})
	if errors.Is(err, errNotStarted) {
		s.internalError(w, c.req.ID, "starting the call", err)
		return
	}
	if err != nil {
		dctx, dcancel := detach(ctx)
		defer dcancel()
		_, _ = s.prod.Cancel(dctx, req.ID, "the waiting client went away or the wait timed out")
		if errors.Is(err, context.DeadlineExceeded) {
			out.fail(errorf(codeInternal, http.StatusOK, fmt.Sprintf("%s did not finish within %s; the call was cancelled", describe(req), s.cfg.SyncTimeout)))
		} else if e := shutdownError(ctx, "the call was cancelled: call again"); e != nil {
			out.fail(e)
		}
		return
	}
	s.replyOutcome(out, final, nil)
}

// describe names what a request runs, for messages.
func describe(req *producer.Request) string {
	switch req.Kind {
	case taskstate.KindTool:
		return fmt.Sprintf("tool %q", clip(req.Tool))
	case taskstate.KindResource, taskstate.KindTemplate:
		return "resources/read"
	}
	return fmt.Sprintf("%s %q", req.Kind, clip(req.Tool))
}
