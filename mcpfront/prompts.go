package mcpfront

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"

	"github.com/mcpqueue/mcpqueue/producer"
	"github.com/mcpqueue/mcpqueue/taskstate"
	"github.com/mcpqueue/mcpqueue/vocab"
)

type wirePrompt struct {
	Name        string          `json:"name"`
	Title       string          `json:"title,omitempty"`
	Description string          `json:"description,omitempty"`
	Arguments   json.RawMessage `json:"arguments,omitempty"`
}

func (s *Server) promptsList(ctx context.Context, w http.ResponseWriter, _ *http.Request, c *call) {
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
	prompt, rerr := s.checkPrompt(ctx, p.Name, p.Arguments)
	if rerr != nil {
		writeError(w, c.req.ID, rerr)
		return
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

// checkPrompt finds prompt name in the catalog and checks args (an object
// of strings holding every required argument) against it.
func (s *Server) checkPrompt(ctx context.Context, name string, rawArgs json.RawMessage) (*taskstate.ToolInfo, *rpcError) {
	prompt, err := s.catalog.Tool(ctx, taskstate.CatalogKey(taskstate.KindPrompt, name))
	if errors.Is(err, taskstate.ErrNotFound) {
		return nil, invalidParams("Unknown prompt: " + clip(name))
	}
	if err != nil {
		s.log.Error().Err(err).Msg("reading the catalog")
		return nil, errorf(vocab.CodeInternalError, http.StatusInternalServerError, "internal error: reading the catalog")
	}
	var args map[string]string
	if len(rawArgs) > 0 && string(rawArgs) != "null" {
		if err := json.Unmarshal(rawArgs, &args); err != nil {
			return nil, invalidParams("invalid params: prompt arguments must be an object of strings")
		}
	}
	var declared []struct {
		Name     string `json:"name"`
		Required bool   `json:"required"`
	}
	_ = json.Unmarshal(prompt.Arguments, &declared)
	for _, a := range declared {
		if _, ok := args[a.Name]; a.Required && !ok {
			return nil, invalidParams(fmt.Sprintf("invalid params: prompt %q needs argument %q", clip(name), a.Name))
		}
	}
	return prompt, nil
}

// legacyPromptsGet serves a 2025-11-25 prompts/get: the prompt's handler
// runs through the queue while the client waits.
func (s *Server) legacyPromptsGet(ctx context.Context, w http.ResponseWriter, r *http.Request, c *legacyCall) {
	var p struct {
		Name      string                     `json:"name"`
		Arguments json.RawMessage            `json:"arguments"`
		Meta      map[string]json.RawMessage `json:"_meta"`
	}
	if err := json.Unmarshal(c.req.Params, &p); err != nil || p.Name == "" {
		writeError(w, c.req.ID, invalidParams("invalid params: prompts/get needs a prompt name"))
		return
	}
	prompt, rerr := s.checkPrompt(ctx, p.Name, p.Arguments)
	if rerr != nil {
		writeError(w, c.req.ID, rerr)
		return
	}
	if s.refuseTask(ctx, w, c.req.ID, c.owner) {
		return
	}
	s.legacyInline(ctx, w, r, c, &producer.Request{
		ID: taskstate.NewID(), Kind: taskstate.KindPrompt, Tool: p.Name, Arguments: p.Arguments, Owner: c.owner,
		Meta: legacyMeta(c, p.Meta), StatusMessage: s.awaiting(prompt),
	})
}
