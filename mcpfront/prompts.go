package mcpfront

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"

	"github.com/mcpqueue/mcpqueue/internal/mcpwire"
	"github.com/mcpqueue/mcpqueue/producer"
	"github.com/mcpqueue/mcpqueue/taskstate"
)

func (s *Server) promptsList(ctx context.Context, w http.ResponseWriter, _ *http.Request, c *call) {
	listEntries(s, ctx, w, c.req.ID, taskstate.KindPrompt, "prompts", true, toWirePrompt)
}

// toWirePrompt is a catalog prompt as prompts/list gives it.
func toWirePrompt(t *taskstate.ToolInfo) mcpwire.Prompt {
	return mcpwire.Prompt{Name: t.Name, Title: t.Title, Description: t.Description, Arguments: t.Arguments}
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
	answers, rerr := s.gatherAnswers(c.owner, prompt.Key(), p)
	s.syncAnswer(ctx, w, r, c, rerr, nil, s.promptJob(prompt, p.Arguments, c.owner), answers)
}

// promptJob is the job that runs prompt with args for owner.
func (s *Server) promptJob(prompt *taskstate.ToolInfo, args json.RawMessage, owner string) *producer.Request {
	return &producer.Request{
		ID: taskstate.NewID(), Kind: taskstate.KindPrompt, Tool: prompt.Name, Arguments: args, Owner: owner,
		StatusMessage: s.awaiting(prompt),
	}
}

// checkPrompt finds prompt name in the catalog and checks args (an object
// of strings holding every required argument) against it.
func (s *Server) checkPrompt(ctx context.Context, name string, rawArgs json.RawMessage) (*taskstate.ToolInfo, *rpcError) {
	prompt, err := s.catalog.Tool(ctx, taskstate.CatalogKey(taskstate.KindPrompt, name))
	if errors.Is(err, taskstate.ErrNotFound) {
		return nil, invalidParams("Unknown prompt: " + clip(name))
	}
	if err != nil {
		return nil, s.internal("reading the catalog", err)
	}
	var args map[string]string
	if len(rawArgs) > 0 && string(rawArgs) != "null" {
		if err := json.Unmarshal(rawArgs, &args); err != nil {
			return nil, invalidParams("invalid params: prompt arguments must be an object of strings")
		}
	}
	var declared []mcpwire.PromptArgument
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
	var p mcpwire.CallToolParams // prompts/get's params: name, arguments, _meta
	if err := json.Unmarshal(c.req.Params, &p); err != nil || p.Name == "" {
		writeError(w, c.req.ID, invalidParams("invalid params: prompts/get needs a prompt name"))
		return
	}
	prompt, rerr := s.checkPrompt(ctx, p.Name, p.Arguments)
	if rerr != nil {
		writeError(w, c.req.ID, rerr)
		return
	}
	s.legacyAnswer(ctx, w, r, c, nil, nil, s.promptJob(prompt, p.Arguments, c.owner), p.Meta)
}
