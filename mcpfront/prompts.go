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

type wirePrompt struct {
	Name        string          `json:"name"`
	Title       string          `json:"title,omitempty"`
	Description string          `json:"description,omitempty"`
	Arguments   json.RawMessage `json:"arguments,omitempty"`
}

func (s *Server) promptsList(ctx context.Context, w http.ResponseWriter, c *call) {
	prompts, ok := s.entries(ctx, w, c.req.ID, taskstate.KindPrompt)
	if !ok {
		return
	}
	writeResult(w, c.req.ID, map[string]any{"resultType": resultComplete, "prompts": toWirePrompts(prompts), "ttlMs": listTTLMs, "cacheScope": "public", "_meta": s.resultMeta()})
}

func toWirePrompts(prompts []*taskstate.ToolInfo) []wirePrompt {
	out := make([]wirePrompt, len(prompts))
	for i, t := range prompts {
		out[i] = wirePrompt{Name: t.Name, Title: t.Title, Description: t.Description, Arguments: t.Arguments}
	}
	return out
}

// promptsGet runs a prompt handler through the queue, inline, with the same
// MRTR rounds a tool call has.
func (s *Server) promptsGet(ctx context.Context, w http.ResponseWriter, r *http.Request, c *call) {
	p, rerr := c.callParams()
	if rerr == nil && p.Name == "" {
		rerr = invalidParams("invalid params: prompts/get needs a prompt name")
	}
	if rerr != nil {
		writeError(w, c.req.ID, rerr)
		return
	}
	prompt, err := s.catalog.Tool(ctx, taskstate.CatalogKey(taskstate.KindPrompt, p.Name))
	if errors.Is(err, taskstate.ErrNotFound) {
		writeError(w, c.req.ID, invalidParams("Unknown prompt: "+clip(p.Name)))
		return
	}
	if err != nil {
		s.internalError(w, c.req.ID, "reading the catalog", err)
		return
	}
	var args map[string]string
	if len(p.Arguments) > 0 && string(p.Arguments) != "null" {
		if err := json.Unmarshal(p.Arguments, &args); err != nil {
			writeError(w, c.req.ID, invalidParams("invalid params: prompt arguments must be an object of strings"))
			return
		}
	}
	var declared []struct {
		Name     string `json:"name"`
		Required bool   `json:"required"`
	}
	_ = json.Unmarshal(prompt.Arguments, &declared)
	for _, a := range declared {
		if _, ok := args[a.Name]; a.Required && !ok {
			writeError(w, c.req.ID, invalidParams(fmt.Sprintf("invalid params: prompt %q needs argument %q", p.Name, a.Name)))
			return
		}
	}
	answers, rerr := s.gatherAnswers(prompt.Key(), p)
	if rerr != nil {
		writeError(w, c.req.ID, rerr)
		return
	}
	if s.refuseTask(ctx, w, c.req.ID, c.owner) {
		return
	}
	s.syncCall(ctx, w, r, c, &producer.Request{
		ID: taskstate.NewID(), Kind: taskstate.KindPrompt, Tool: p.Name, Arguments: p.Arguments, Owner: c.owner,
		Era: taskstate.Era20260728, Mode: taskstate.ModeSync, Meta: jobMeta(c.meta, answers),
		StatusMessage: s.awaiting(prompt),
	}, answers)
}
