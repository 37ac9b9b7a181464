package mcpfront

import (
	"encoding/json"
	"net/http"

	"github.com/mcpqueue/mcpqueue/internal/jsonscan"
	"github.com/mcpqueue/mcpqueue/internal/mcpwire"
	"github.com/mcpqueue/mcpqueue/telemetry"
	"github.com/mcpqueue/mcpqueue/vocab"
)

// checkBody reads every request body once, before anything decodes it
// (internal/jsonscan says what it refuses: syntax errors (-32700), and
// nesting deeper than Config.MaxDepth, duplicate keys and keys that
// encoding/json would match to another field than they name (-32600)). The
// schema below is the shape of a request: the envelope, params and the top
// level of params.arguments, which a worker decodes into its argument type,
// are decoded into Go structs.
//
// On the way it notes where the values the front end reads are: the
// envelope's members, params' members and the _meta entries a call uses.
// ServeHTTP and decodeModern take them from there instead of running
// encoding/json over the body twice more (envelope, then params) and
// copying each value; the size limits read the length of params.arguments
// and the number of params.inputResponses from there too. Whenever
// encoding/json would do anything but copy bytes — a member of the wrong
// type (its error message), a string with escapes or invalid UTF-8, a params
// or _meta that is not an object — they fall back to it, so the result is
// the same either way.

// Field names the front end decodes into Go structs, where encoding/json
// would take any case variant for them.
var (
	envelopeFields = []string{"jsonrpc", "id", "method", "params", "result", "error"}
	paramsFields   = []string{"_meta", "name", "arguments", "inputResponses", "requestState", "taskId", "cursor", "task", "protocolVersion", "capabilities", "clientInfo", "level"}
)

// Where the members are noted in jsonscan.Result.Spans.
const (
	envJSONRPC = iota
	envID
	envMethod
	envParams
	envResult
	envError
	parMeta
	parName
	parURI
	parTaskID
	parArguments
	parInputResponses
	parRequestState
	metaFirst // the entries of spanMeta follow
)

// spanMeta are the _meta entries noted, from slot metaFirst on.
var spanMeta = []string{metaVersion, metaClientCaps, vocab.MetaProgressToken, telemetry.MetaTraceParent, telemetry.MetaTraceState, metaLogLevel, vocab.MetaIdempotencyKey,
	vocab.MetaNotBefore, // scheduled calls: schedule.go
	vocab.MetaWebhook}   // completion webhooks: webhook.go

// requestSchema is the shape of a request body.
var requestSchema = jsonscan.NewSchema(&jsonscan.Object{
	Fold:   true,
	Fields: envelopeFields,
	Members: []jsonscan.Member{
		{Name: "jsonrpc", Slot: envJSONRPC},
		{Name: "id", Slot: envID},
		{Name: "method", Slot: envMethod},
		{Name: "params", Slot: envParams, Object: &jsonscan.Object{
			Fold:   true,
			Fields: paramsFields,
			Members: []jsonscan.Member{
				{Name: "_meta", Slot: parMeta, Object: metaSchema()},
				{Name: "name", Slot: parName},
				{Name: "uri", Slot: parURI}, // no other field: encoding/json finds it under any case
				{Name: "taskId", Slot: parTaskID},
				{Name: "arguments", Slot: parArguments, Object: &jsonscan.Object{Fold: true}},
				{Name: "inputResponses", Slot: parInputResponses},
				{Name: "requestState", Slot: parRequestState},
			},
		}},
		{Name: "result", Slot: envResult},
		{Name: "error", Slot: envError},
	},
})

func metaSchema() *jsonscan.Object {
	o := &jsonscan.Object{}
	for i, k := range spanMeta {
		o.Members = append(o.Members, jsonscan.Member{Name: k, Slot: metaFirst + i})
	}
	return o
}

// bodyInfo is what checkBody learned about a well-formed body.
type bodyInfo struct{ jsonscan.Result }

func (b *bodyInfo) argsLen() int   { return b.Spans[parArguments].Len() }
func (b *bodyInfo) inputKeys() int { return int(b.Spans[parInputResponses].Members) }

// checkBody checks a whole request body; a refusal is the error to answer
// with, echoing the id when it was read before the problem (and is not the
// problem).
func checkBody(body []byte, maxDepth int) (bodyInfo, json.RawMessage, *rpcError) {
	res, err := requestSchema.Check(body, maxDepth)
	if err == nil {
		return bodyInfo{res}, nil, nil
	}
	if err.Syntax {
		return bodyInfo{}, nil, errorf(vocab.CodeParseError, http.StatusBadRequest, "parse error: "+err.What)
	}
	msg := "invalid request: " + err.What
	if err.Path != "" {
		msg += " in " + err.Path
	}
	var id json.RawMessage
	if v := res.Spans[envID].In(body); len(v) > 0 && v[0] != '{' && v[0] != '[' && !(err.Path == "" && jsonscan.EqualFold(err.Key, "id")) {
		id = v
	}
	return bodyInfo{}, id, errorf(vocab.CodeInvalidRequest, http.StatusBadRequest, msg)
}

// decodeRequest fills req from the spans checkBody noted in body, or
// reports false when encoding/json must decode it.
func (b *bodyInfo) decodeRequest(body []byte, req *request) bool {
	if len(body) == 0 || body[0] != '{' {
		return false
	}
	jsonrpc, ok1 := jsonscan.PlainString(b.Spans[envJSONRPC].In(body))
	method, ok2 := jsonscan.PlainString(b.Spans[envMethod].In(body))
	if !ok1 || !ok2 {
		return false
	}
	*req = request{
		Message: mcpwire.Message{
			JSONRPC: jsonrpc, Method: method,
			ID:     b.Spans[envID].In(body),
			Params: b.Spans[envParams].In(body),
			Result: b.Spans[envResult].In(body),
			Error:  b.Spans[envError].In(body),
		},
		spans: b,
		body:  body,
	}
	return true
}

// modernParams fills p from the spans, or reports false when encoding/json
// must decode the params.
func (b *bodyInfo) modernParams(body []byte, p *modernParams) bool {
	params := b.Spans[envParams].In(body)
	if params == nil || string(params) == "null" {
		return true
	}
	if params[0] != '{' {
		return false
	}
	meta := b.Spans[parMeta].In(body)
	switch {
	case meta == nil || string(meta) == "null":
	case meta[0] == '{':
		p.Meta = make(map[string]json.RawMessage, 4)
		for i, k := range spanMeta {
			if v := b.Spans[metaFirst+i].In(body); v != nil {
				p.Meta[k] = v
			}
		}
	default:
		return false
	}
	p.Name = b.Spans[parName].In(body)
	p.URI = b.Spans[parURI].In(body)
	p.TaskID = b.Spans[parTaskID].In(body)
	p.Arguments = b.Spans[parArguments].In(body)
	p.InputResponses = b.Spans[parInputResponses].In(body)
	p.RequestState = b.Spans[parRequestState].In(body)
	return true
}

// unmarshalString is json.Unmarshal into a string, without its scan and
// reflection for a plain string (null leaves s as it is, as encoding/json does).
func unmarshalString(raw []byte, s *string) error {
	if string(raw) == "null" {
		return nil
	}
	if v, ok := jsonscan.PlainString(raw); ok && len(raw) > 0 {
		*s = v
		return nil
	}
	return json.Unmarshal(raw, s)
}
