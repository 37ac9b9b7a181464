package mcpfront

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"

	"github.com/mcpqueue/mcpqueue/internal/mcpwire"
	"github.com/mcpqueue/mcpqueue/producer"
	"github.com/mcpqueue/mcpqueue/taskstate"
)

// Resources served by workers. Workers publish their resources and
// resource templates to the catalog (consumer.HandleResource,
// HandleResourceTemplate), so resources/list and resources/templates/list
// answer from it, as tools/list and prompts/list do; resources/read runs the
// resource's handler through the queue, inline (a record and a job on the
// resource's route, "resource/<uri>" or "template/<uri template>"), with the
// MRTR rounds a tool call has on 2026-07-28 and input requests on the
// response stream on 2025-11-25.

// maxSubscriptions bounds the resources one 2025-11-25 session subscribes to.
const maxSubscriptions = 256

// toWireResource is a catalog resource or template as resources/list and
// resources/templates/list give it.
func toWireResource(t *taskstate.ToolInfo) mcpwire.Resource {
	r := mcpwire.Resource{Name: t.ResourceName, Title: t.Title, Description: t.Description, MimeType: t.MimeType, Size: t.Size, Annotations: t.Annotations}
	if r.Name == "" {
		r.Name = t.Name
	}
	if t.Kind == taskstate.KindTemplate {
		r.URITemplate = t.Name
	} else {
		r.URI = t.Name
	}
	return r
}

// resourceList answers resources/list (kind KindResource, under
// "resources") or resources/templates/list (KindTemplate,
// "resourceTemplates"); modern adds what every 2026-07-28 list carries.
func (s *Server) resourceList(ctx context.Context, w http.ResponseWriter, id json.RawMessage, kind string, modern bool) {
	field := "resources"
	if kind == taskstate.KindTemplate {
		field = "resourceTemplates"
	}
	listEntries(s, ctx, w, id, kind, field, modern, toWireResource)
}

// resolveResource finds the catalog entry that serves uri: the resource of
// that URI, else the first template (in catalog order) that matches it.
// An unknown URI is -32602 "Resource not found" with the URI in its data
// (SEP-2164).
func (s *Server) resolveResource(ctx context.Context, uri string) (*taskstate.ToolInfo, *rpcError) {
	if err := taskstate.CheckResourceURI(uri); err != nil {
		return nil, invalidParams("invalid params: " + clip(err.Error())).withData(map[string]string{"uri": uri})
	}
	e, err := s.catalog.Tool(ctx, taskstate.CatalogKey(taskstate.KindResource, uri))
	if err == nil {
		return e, nil
	}
	if !errors.Is(err, taskstate.ErrNotFound) {
		return nil, s.internal("reading the catalog", err)
	}
	all, err := s.catalog.Tools(ctx)
	if err != nil {
		return nil, s.internal("reading the catalog", err)
	}
	for _, t := range all {
		if t.Kind != taskstate.KindTemplate {
			continue
		}
		if tmpl, err := taskstate.ParseTemplate(t.Name); err == nil {
			if _, ok := tmpl.Match(uri); ok {
				return t, nil
			}
		}
	}
	return nil, invalidParams("Resource not found: " + clip(uri)).withData(map[string]string{"uri": uri})
}

// resourceURI decodes params.uri.
func resourceURI(raw json.RawMessage) (string, *rpcError) {
	var uri string
	if raw != nil && string(raw) != "null" && unmarshalString(raw, &uri) != nil {
		return "", invalidParams(`invalid params: "uri" must be a string`)
	}
	if uri == "" {
		return "", invalidParams("invalid params: missing uri")
	}
	return uri, nil
}

// readJob resolves a read of params.uri (raw): the api's own answer for its
// builtin resources, or else the job that runs the read, and the catalog
// key of the entry that serves it; or the error to answer with.
func (s *Server) readJob(ctx context.Context, raw json.RawMessage, owner string) (builtin json.RawMessage, req *producer.Request, key string, rerr *rpcError) {
	uri, rerr := resourceURI(raw)
	if rerr != nil {
		return nil, nil, "", rerr
	}
	if res, handled, berr := s.readBuiltin(ctx, uri, owner); handled {
		return res, nil, "", berr
	}
	entry, rerr := s.resolveResource(ctx, uri)
	if rerr != nil {
		return nil, nil, "", rerr
	}
	args, _ := json.Marshal(map[string]string{"uri": uri})
	return nil, &producer.Request{
		ID: taskstate.NewID(), Kind: entry.Kind, Tool: entry.Name, Arguments: args, Owner: owner,
		StatusMessage: s.awaiting(entry),
	}, entry.Key(), nil
}

// resourcesRead serves a 2026-07-28 resources/read.
func (s *Server) resourcesRead(ctx context.Context, w http.ResponseWriter, r *http.Request, c *call) {
	if uri, err := uriParam(c.req.Params); err == nil && s.readArtifact(ctx, w, c.req.ID, c.req.Method, c.owner, uri, false) {
		return // a task's artifact (artifacts.go)
	}
	builtin, req, key, rerr := s.readJob(ctx, c.p.URI, c.owner)
	var p *callParams
	if rerr == nil && req != nil {
		p, rerr = c.callParams()
	}
	var answers map[string]json.RawMessage
	if rerr == nil && req != nil {
		p.Arguments = req.Arguments // the requestState binds the URI read
		answers, rerr = s.gatherAnswers(c.owner, key, p)
	}
	s.syncAnswer(ctx, w, r, c, rerr, builtin, req, answers)
}

// legacyResourcesRead serves a 2025-11-25 resources/read.
func (s *Server) legacyResourcesRead(ctx context.Context, w http.ResponseWriter, r *http.Request, c *legacyCall) {
	var p struct {
		URI  json.RawMessage            `json:"uri"`
		Meta map[string]json.RawMessage `json:"_meta"`
	}
	_ = json.Unmarshal(c.req.Params, &p)
	if uri, err := uriParam(c.req.Params); err == nil && s.readArtifact(ctx, w, c.req.ID, c.req.Method, c.owner, uri, true) {
		return // a task's artifact (artifacts.go)
	}
	builtin, req, _, rerr := s.readJob(ctx, p.URI, c.owner)
	s.legacyAnswer(ctx, w, r, c, rerr, builtin, req, p.Meta)
}

// legacySubscribe serves resources/subscribe and resources/unsubscribe: the
// session keeps the URIs it subscribed to, and every stream of the session
// (its GET stream) receives notifications/resources/updated for them.
func (s *Server) legacySubscribe(ctx context.Context, w http.ResponseWriter, _ *http.Request, c *legacyCall) {
	var p struct {
		URI json.RawMessage `json:"uri"`
	}
	_ = json.Unmarshal(c.req.Params, &p)
	uri, rerr := resourceURI(p.URI)
	subscribe := c.req.Method == "resources/subscribe"
	if rerr == nil && subscribe {
		_, rerr = s.resolveResource(ctx, uri)
	}
	if rerr != nil {
		writeError(w, c.req.ID, rerr)
		return
	}
	subs := c.sess.Subscriptions
	i := slices.Index(subs, uri)
	switch {
	case subscribe && i >= 0, !subscribe && i < 0:
		writeResult(w, c.req.ID, map[string]any{}) // nothing to change
		return
	case subscribe && len(subs) >= maxSubscriptions:
		writeError(w, c.req.ID, invalidParams(fmt.Sprintf("invalid params: a session subscribes to at most %d resources; unsubscribe from some first", maxSubscriptions)))
		return
	case subscribe:
		c.sess.Subscriptions = append(subs, uri)
	default:
		c.sess.Subscriptions = slices.Delete(subs, i, i+1)
	}
	if err := s.sessions.PutSession(ctx, c.sess); err != nil {
		s.internalError(w, c.req.ID, "storing the subscription", err)
		return
	}
	writeResult(w, c.req.ID, map[string]any{})
}

// catalogCapabilities are the capabilities the catalog's entries imply:
// completions when a worker registers a completion handler. Resources are
// always served, whatever the catalog holds (resources/read answers for
// task artifacts, the lists may be empty): initialize and server/discover
// declare them themselves.
func (s *Server) catalogCapabilities(ctx context.Context) map[string]any {
	out := map[string]any{}
	all, err := s.catalog.Tools(ctx)
	if err != nil {
		s.log.Warn().Err(err).Msg("reading the catalog for capabilities")
		return out
	}
	for _, t := range all {
		if t.Kind == taskstate.KindCompletion {
			out["completions"] = map[string]any{}
		}
	}
	return out
}

// builtinScheme is the URI scheme of the api's own resources, which no
// worker may register (consumer refuses it).
const builtinScheme = "mcpq"

// readBuiltin answers a read of the api's own resources, before the catalog
// is asked; handled is false for any other URI. Task artifacts
// (mcpq://tasks/<taskId>/artifacts/<name>) are to be served here; until they
// are, every mcpq:// URI is not found.
func (s *Server) readBuiltin(ctx context.Context, uri, owner string) (result json.RawMessage, handled bool, rerr *rpcError) {
	scheme, _, _ := strings.Cut(uri, ":")
	switch strings.ToLower(scheme) {
	case builtinScheme:
		return nil, true, invalidParams("Resource not found: " + clip(uri)).withData(map[string]string{"uri": uri})
	}
	return nil, false, nil
}
