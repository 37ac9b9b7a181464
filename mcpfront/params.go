package mcpfront

import (
	"bytes"
	"encoding/json"
	"net/http"

	"github.com/mcpqueue/mcpqueue/internal/paramheader"
	"github.com/mcpqueue/mcpqueue/taskstate"
)

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
			return errorf(codeHeaderMismatch, http.StatusBadRequest, err.Error())
		}
	}
	return nil
}
