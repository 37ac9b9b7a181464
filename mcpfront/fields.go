package mcpfront

import (
	"bytes"
	"encoding/json"
	"unicode/utf8"
)

// checkBody reads every request body before anything decodes it. On the way
// it notes where the values the front end reads are: the envelope's
// members, params' members and the _meta entries a call uses. ServeHTTP and
// decodeModern take them from there instead of running encoding/json over
// the body twice more (envelope, then params) and copying each value.
// Whenever encoding/json would do anything but copy bytes — a member of the
// wrong type (its error message), a string with escapes or invalid UTF-8, a
// params or _meta that is not an object — they fall back to it, so the
// result is the same either way.

// span is where a value is in the body; end 0: absent.
type span struct{ off, end int32 }

func (s span) in(b []byte) json.RawMessage {
	if s.end == 0 {
		return nil
	}
	return b[s.off:s.end:s.end]
}

// Members noted, in the order of these lists.
var (
	spanEnvelope = envelopeFields // jsonrpc id method params result error
	spanParams   = []string{"_meta", "name", "uri", "taskId", "arguments", "inputResponses", "requestState"}
	spanMeta     = []string{metaVersion, metaClientCaps, "progressToken", "traceparent", "tracestate", metaLogLevel}
)

const (
	envJSONRPC = iota
	envID
	envMethod
	envParams
	envResult
	envError
)

const (
	parMeta = iota
	parName
	parURI
	parTaskID
	parArguments
	parInputResponses
	parRequestState
)

type fieldSpans struct {
	env    [6]span
	params [7]span
	meta   [6]span
}

// capture notes the value [start, end) of key k in an object playing r.
// Envelope and params keys that fold to a field name and differ from it
// are refused by checkKey, except params' "uri" (no field the front end
// decodes besides this one), which encoding/json matches case-insensitively.
func (s *scanner) capture(r role, k []byte, start, end int) {
	var names []string
	var spans []span
	switch r {
	case roleEnvelope:
		names, spans = spanEnvelope, s.info.f.env[:]
	case roleParams:
		names, spans = spanParams, s.info.f.params[:]
		if foldEqual(k, []byte("uri")) {
			spans[parURI] = span{int32(start), int32(end)}
			return
		}
	case roleMeta:
		names, spans = spanMeta, s.info.f.meta[:]
	default:
		return
	}
	for i, n := range names {
		if string(k) == n {
			spans[i] = span{int32(start), int32(end)}
			return
		}
	}
}

// plainString is the value of a JSON string or null that needs no
// unescaping, and false for anything else.
func plainString(v []byte) (string, bool) {
	switch {
	case v == nil || string(v) == "null":
		return "", true
	case len(v) >= 2 && v[0] == '"' && bytes.IndexByte(v, '\\') < 0 && utf8.Valid(v):
		return string(v[1 : len(v)-1]), true
	}
	return "", false
}

// decodeRequest fills req from the spans checkBody noted in body, or
// reports false when encoding/json must decode it.
func (f *fieldSpans) decodeRequest(body []byte, req *request) bool {
	if len(body) == 0 || body[0] != '{' {
		return false
	}
	jsonrpc, ok1 := plainString(f.env[envJSONRPC].in(body))
	method, ok2 := plainString(f.env[envMethod].in(body))
	if !ok1 || !ok2 {
		return false
	}
	*req = request{
		JSONRPC: jsonrpc, Method: method,
		ID:     f.env[envID].in(body),
		Params: f.env[envParams].in(body),
		Result: f.env[envResult].in(body),
		Error:  f.env[envError].in(body),
		spans:  f,
		body:   body,
	}
	return true
}

// modernParams fills p from the spans, or reports false when encoding/json
// must decode the params.
func (f *fieldSpans) modernParams(body []byte, p *modernParams) bool {
	params := f.env[envParams].in(body)
	if params == nil || string(params) == "null" {
		return true
	}
	if params[0] != '{' {
		return false
	}
	meta := f.params[parMeta].in(body)
	switch {
	case meta == nil || string(meta) == "null":
	case meta[0] == '{':
		p.Meta = make(map[string]json.RawMessage, 4)
		for i, k := range spanMeta {
			if v := f.meta[i].in(body); v != nil {
				p.Meta[k] = v
			}
		}
	default:
		return false
	}
	p.Name = f.params[parName].in(body)
	p.URI = f.params[parURI].in(body)
	p.TaskID = f.params[parTaskID].in(body)
	p.Arguments = f.params[parArguments].in(body)
	p.InputResponses = f.params[parInputResponses].in(body)
	p.RequestState = f.params[parRequestState].in(body)
	return true
}

// unmarshalString is json.Unmarshal into a string, without its scan and
// reflection for a plain string (null leaves s as it is, as encoding/json does).
func unmarshalString(raw []byte, s *string) error {
	if string(raw) == "null" {
		return nil
	}
	if v, ok := plainString(raw); ok && len(raw) > 0 {
		*s = v
		return nil
	}
	return json.Unmarshal(raw, s)
}
