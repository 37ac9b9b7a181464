package mcpfront

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"mime"
	"net"
	"net/http"
	"strings"

	"github.com/mcpqueue/mcpqueue/internal/paramheader"
	"github.com/mcpqueue/mcpqueue/taskstate"
	"github.com/mcpqueue/mcpqueue/vocab"
)

// The HTTP headers of both revisions, and the rules each is held to:
//
//   - MCP-Protocol-Version tells the revisions apart (isLegacy). On
//     2026-07-28 it must equal _meta's protocol version (checkVersionHeader);
//     on 2025-11-25, when sent, the session's version (checkSessionVersion).
//   - Mcp-Session-Id names a 2025-11-25 session (legacy.go keeps them).
//   - Mcp-Method and Mcp-Name mirror the method and its target on 2026-07-28
//     (SEP-2243, checkRoutingHeaders); Mcp-Param-<Name> mirror marked
//     arguments (checkParamHeaders, below).
//   - Accept must allow JSON (acceptsJSON); SSE when it allows
//     text/event-stream (acceptsSSE). Host and Origin guard loopback servers
//     (checkOrigin).
const (
	headerVersion = "MCP-Protocol-Version"
	headerSession = "Mcp-Session-Id"
	headerMethod  = "Mcp-Method"
	headerName    = "Mcp-Name"
)

// checkVersionHeader pairs a 2026-07-28 request's MCP-Protocol-Version
// with the version in its _meta ("" when absent).
func checkVersionHeader(r *http.Request, version string) *rpcError {
	hv := r.Header.Get(headerVersion)
	switch {
	case version == "" && hv != "" && hv != version2026:
		return unsupportedVersion(hv)
	case version == "":
		return errorf(vocab.CodeInvalidParams, http.StatusBadRequest, "missing _meta."+metaVersion)
	case hv == "":
		return errorf(vocab.CodeHeaderMismatch, http.StatusBadRequest, "missing "+headerVersion+" header")
	case hv != version:
		return errorf(vocab.CodeHeaderMismatch, http.StatusBadRequest, fmt.Sprintf("%s header %q does not match _meta protocol version %q", headerVersion, hv, version))
	case version != version2026:
		return unsupportedVersion(version)
	}
	return nil
}

// checkSessionVersion refuses a 2025-11-25 request whose
// MCP-Protocol-Version, when sent, is not its session's.
func checkSessionVersion(r *http.Request, sess *taskstate.Session) *rpcError {
	if hv := r.Header.Get(headerVersion); hv != "" && hv != sess.ProtocolVersion {
		return errorf(vocab.CodeInvalidRequest, http.StatusBadRequest, fmt.Sprintf("%s %q does not match the session's version %q", headerVersion, hv, sess.ProtocolVersion))
	}
	return nil
}

// SEP-2243 custom headers: a tool whose input schema marks a property
// "x-mcp-header": "<Name>" gets that property's value mirrored by the client
// in the header Mcp-Param-<Name>. On the 2026-07-28 wire the header must
// agree with the arguments (after undoing =?base64?…?=): a missing,
// undecodable or different header is refused with -32020 and HTTP 400,
// before anything is written or enqueued (paramheader.Check says what
// disagrees). Headers no parameter declares are ignored.

// headerParams are the marked parameters of one schema text, parsed once.
type headerParams struct {
	raw    string
	params []paramheader.Param
	err    error
}

// paramsFor returns tool's marked parameters (cached per schema text).
func (s *Server) paramsFor(t *taskstate.ToolInfo) ([]paramheader.Param, error) {
	if v, ok := s.headerParams.Load(t.Name); ok {
		if h := v.(*headerParams); h.raw == string(t.InputSchema) {
			return h.params, h.err
		}
	}
	h := &headerParams{raw: string(t.InputSchema)}
	h.params, h.err = paramheader.Params(t.InputSchema)
	s.headerParams.Store(t.Name, h)
	return h.params, h.err
}

// checkParamHeaders refuses a tools/call whose Mcp-Param-* headers disagree
// with its arguments.
func (s *Server) checkParamHeaders(r *http.Request, tool *taskstate.ToolInfo, args json.RawMessage) *rpcError {
	params, err := s.paramsFor(tool)
	if err != nil {
		// The worker library refuses such schemas at registration; one
		// published by other means is served without the check.
		s.log.Error().Err(err).Str("tool", tool.Name).Msg("tool publishes invalid x-mcp-header marks; not checking its parameter headers")
		return nil
	}
	if len(params) == 0 {
		return nil
	}
	var body map[string]any
	if len(args) > 0 && string(args) != "null" {
		d := json.NewDecoder(bytes.NewReader(args))
		d.UseNumber()
		if d.Decode(&body) != nil {
			return nil // not an object: the schema check refuses it
		}
	}
	for _, p := range params {
		if err := paramheader.Check(p, body, r.Header.Values(paramheader.HeaderPrefix+p.Header)); err != nil {
			return errorf(vocab.CodeHeaderMismatch, http.StatusBadRequest, err.Error())
		}
	}
	return nil
}

// isLegacy tells a 2025-era request from a 2026-07-28 one.
func isLegacy(r *http.Request, req *request) bool {
	hv := r.Header.Get(headerVersion)
	if hv == version2026 || hasModernMeta(req.Params) {
		return false
	}
	return req.Method == "initialize" || r.Header.Get(headerSession) != "" || hv != "" || req.isResponse()
}

func hasModernMeta(params json.RawMessage) bool {
	if len(params) == 0 {
		return false
	}
	var p modernParams
	_ = json.Unmarshal(params, &p)
	_, ok := p.Meta[metaVersion]
	return ok
}

// checkRoutingHeaders enforces Mcp-Method and Mcp-Name (SEP-2243).
func checkRoutingHeaders(r *http.Request, req *request, p *modernParams) *rpcError {
	hm := r.Header.Get(headerMethod)
	if hm == "" {
		return errorf(vocab.CodeHeaderMismatch, http.StatusBadRequest, "missing "+headerMethod+" header")
	}
	if hm != req.Method {
		return errorf(vocab.CodeHeaderMismatch, http.StatusBadRequest, fmt.Sprintf("%s header %q does not match method %q", headerMethod, hm, req.Method))
	}
	var field string
	var raw json.RawMessage
	switch req.Method {
	case "tools/call", "prompts/get":
		field, raw = "name", p.Name
	case "resources/read":
		field, raw = "uri", p.URI
	case "tasks/get", "tasks/update", "tasks/cancel":
		field, raw = "taskId", p.TaskID
	default:
		return nil
	}
	var want string
	if raw != nil {
		if err := unmarshalString(raw, &want); err != nil {
			return errorf(vocab.CodeInvalidParams, http.StatusOK, fmt.Sprintf("invalid params: %q must be a string", field))
		}
	}
	values := r.Header.Values(headerName)
	if len(values) == 0 {
		return errorf(vocab.CodeHeaderMismatch, http.StatusBadRequest, "missing "+headerName+" header")
	}
	got := decodeHeaderValue(values[0])
	for _, v := range values[1:] {
		if decodeHeaderValue(v) != got {
			return errorf(vocab.CodeHeaderMismatch, http.StatusBadRequest, fmt.Sprintf("conflicting %s headers", headerName))
		}
	}
	if got != want {
		return errorf(vocab.CodeHeaderMismatch, http.StatusBadRequest, fmt.Sprintf("%s header %q does not match params.%s %q", headerName, got, field, want))
	}
	return nil
}

// decodeHeaderValue undoes the =?base64?…?= wrapping of non-ASCII values.
func decodeHeaderValue(v string) string {
	if inner, ok := strings.CutPrefix(v, "=?base64?"); ok {
		if inner, ok = strings.CutSuffix(inner, "?="); ok {
			if b, err := base64.StdEncoding.DecodeString(inner); err == nil {
				return string(b)
			}
		}
	}
	return v
}

func acceptsSSE(r *http.Request) bool {
	for _, v := range r.Header.Values("Accept") {
		if strings.Contains(v, "text/event-stream") {
			return true
		}
	}
	return false
}

func acceptsJSON(r *http.Request) bool {
	a := r.Header.Values("Accept")
	if len(a) == 0 {
		return true
	}
	for _, v := range a {
		for _, part := range strings.Split(v, ",") {
			mt, _, _ := mime.ParseMediaType(strings.TrimSpace(part))
			if mt == "application/json" || mt == "*/*" || mt == "application/*" {
				return true
			}
		}
	}
	return false
}

// checkOrigin protects loopback servers from DNS rebinding: the Host must be
// a name this server answers to, and a browser Origin must be loopback or
// explicitly allowed.
func (s *Server) checkOrigin(r *http.Request) error {
	host := r.Host
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	host = strings.Trim(strings.ToLower(host), "[]")
	if !s.hosts[host] {
		return fmt.Errorf("host %q is not allowed", r.Host)
	}
	origin := r.Header.Get("Origin")
	if origin == "" || s.origins[strings.ToLower(origin)] {
		return nil
	}
	u := strings.ToLower(origin)
	for _, p := range []string{"http://", "https://"} {
		if rest, ok := strings.CutPrefix(u, p); ok {
			h := rest
			if i := strings.IndexByte(h, '/'); i >= 0 {
				h = h[:i]
			}
			if hh, _, err := net.SplitHostPort(h); err == nil {
				h = hh
			}
			h = strings.Trim(h, "[]")
			if h == "localhost" || h == "127.0.0.1" || h == "::1" {
				return nil
			}
		}
	}
	return fmt.Errorf("origin %q is not allowed", origin)
}
