package mcpfront

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"

	"github.com/mcpqueue/mcpqueue/producer"
	"github.com/mcpqueue/mcpqueue/taskstate"
	"github.com/mcpqueue/mcpqueue/vocab"
)

// completion/complete runs through the queue, inline, on a worker that
// serves the prompt or resource template named by the request's ref: the
// completion handler registered beside it (consumer: Prompt.Complete,
// ResourceTemplate.Complete), published as the catalog entry
// "completion/<ref key>". A prompt or template without one completes to no
// values; the method exists (and the completions capability is declared)
// only while some worker registers a completion handler.

type completeParams struct {
	Ref struct {
		Type string `json:"type"`
		Name string `json:"name"` // ref/prompt
		URI  string `json:"uri"`  // ref/resource: a URI template (or a resource's URI)
	} `json:"ref"`
	Argument *struct {
		Name  string `json:"name"`
		Value string `json:"value"`
	} `json:"argument"`
	Context struct {
		Arguments map[string]string `json:"arguments"`
	} `json:"context"`
	Meta map[string]json.RawMessage `json:"_meta"`
}

// emptyCompletion is the answer for a ref without a completion handler.
var emptyCompletion = json.RawMessage(`{"completion":{"values":[],"hasMore":false}}`)

// completeRequest checks the params and returns the job that answers them,
// or nil when the ref has no completion handler (answer emptyCompletion).
func (s *Server) completeRequest(ctx context.Context, raw json.RawMessage, owner string) (*completeParams, *producer.Request, *rpcError) {
	var p completeParams
	if err := json.Unmarshal(raw, &p); err != nil {
		return nil, nil, invalidParams("invalid params: completion/complete needs ref {type, name|uri} and argument {name, value} (" + clip(err.Error()) + ")")
	}
	if p.Argument == nil || p.Argument.Name == "" {
		return nil, nil, invalidParams("invalid params: completion/complete needs argument.name")
	}
	var keys []string // the ref's catalog entry, in the order tried
	switch p.Ref.Type {
	case "ref/prompt":
		if p.Ref.Name == "" {
			return nil, nil, invalidParams("invalid params: ref/prompt needs a name")
		}
		keys = []string{taskstate.CatalogKey(taskstate.KindPrompt, p.Ref.Name)}
	case "ref/resource":
		if p.Ref.URI == "" {
			return nil, nil, invalidParams("invalid params: ref/resource needs a uri")
		}
		keys = []string{taskstate.CatalogKey(taskstate.KindTemplate, p.Ref.URI), taskstate.CatalogKey(taskstate.KindResource, p.Ref.URI)}
	default:
		return nil, nil, invalidParams(`invalid params: ref.type must be "ref/prompt" or "ref/resource", not ` + clip(p.Ref.Type))
	}
	var ref string
	for _, k := range keys {
		_, err := s.catalog.Tool(ctx, k)
		if err == nil {
			ref = k
			break
		}
		if !errors.Is(err, taskstate.ErrNotFound) {
			return nil, nil, s.internal("reading the catalog", err)
		}
	}
	if ref == "" {
		what := "Unknown prompt: " + clip(p.Ref.Name)
		if p.Ref.Type == "ref/resource" {
			what = "Resource not found: " + clip(p.Ref.URI)
		}
		return nil, nil, invalidParams(what)
	}
	entry, err := s.catalog.Tool(ctx, taskstate.CompletionKey(ref))
	if errors.Is(err, taskstate.ErrNotFound) {
		return &p, nil, nil
	}
	if err != nil {
		return nil, nil, s.internal("reading the catalog", err)
	}
	args, _ := json.Marshal(map[string]any{"argument": p.Argument.Name, "value": p.Argument.Value, "context": p.Context.Arguments})
	return &p, &producer.Request{
		ID: taskstate.NewID(), Kind: taskstate.KindCompletion, Tool: ref, Arguments: args, Owner: owner,
		StatusMessage: s.awaiting(entry),
	}, nil
}

// hasCompletions reports whether some worker registers a completion handler.
func (s *Server) hasCompletions(ctx context.Context) bool {
	_, ok := s.catalogCapabilities(ctx)["completions"]
	return ok
}

// completionsUnknown answers completion/complete while no worker registers
// a completion handler (status: HTTP 404 on 2026-07-28, 200 on 2025-11-25).
func completionsUnknown(status int) *rpcError {
	return errorf(vocab.CodeMethodNotFound, status, "Method not found: completion/complete (no worker registers a completion handler)")
}

// complete serves a 2026-07-28 completion/complete.
func (s *Server) complete(ctx context.Context, w http.ResponseWriter, r *http.Request, c *call) {
	var req *producer.Request
	rerr := completionsUnknown(http.StatusNotFound)
	if s.hasCompletions(ctx) {
		_, req, rerr = s.completeRequest(ctx, c.req.Params, c.owner)
	}
	s.syncAnswer(ctx, w, r, c, rerr, emptyCompletion, req, nil)
}

// legacyComplete serves a 2025-11-25 completion/complete.
func (s *Server) legacyComplete(ctx context.Context, w http.ResponseWriter, r *http.Request, c *legacyCall) {
	var meta map[string]json.RawMessage
	var req *producer.Request
	rerr := completionsUnknown(http.StatusOK)
	if s.hasCompletions(ctx) {
		var p *completeParams
		if p, req, rerr = s.completeRequest(ctx, c.req.Params, c.owner); p != nil {
			meta = p.Meta
		}
	}
	s.legacyAnswer(ctx, w, r, c, rerr, emptyCompletion, req, meta)
}
