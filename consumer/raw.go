package consumer

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/mcpqueue/mcpqueue/vocab"
)

// HandleRaw registers h as tool t with its arguments and result as raw JSON:
// t.InputSchema (required) and t.OutputSchema are published as given, the
// call's arguments reach h undecoded (Args, a JSON object or empty), and
// h's result, an MCP CallToolResult object, is the tool's result byte for
// byte (content blocks of every kind, structuredContent, isError, _meta).
// Errors mean what they mean for Handle. It is for tools whose schemas are
// not Go types: another MCP server's tools relayed to the queue (package
// bridge). Registration mistakes panic.
func HandleRaw(m *Mux, t Tool, h func(ctx context.Context, call *Call[json.RawMessage]) (json.RawMessage, error)) {
	t = checkTool(t)
	if len(t.InputSchema) == 0 {
		panic(fmt.Sprintf("consumer: tool %q: HandleRaw needs an InputSchema", t.Name))
	}
	for which, s := range map[string]json.RawMessage{"input": t.InputSchema, "output": t.OutputSchema} {
		if len(s) > 0 && !isObject(s) {
			panic(fmt.Sprintf("consumer: tool %q: the %s schema is not a JSON object", t.Name, which))
		}
	}
	m.add(t.Name, toolEntry(t, t.InputSchema, t.OutputSchema, func(ctx context.Context, cs *callState) (json.RawMessage, error) {
		res, err := h(ctx, &Call[json.RawMessage]{Args: cs.args, callState: cs})
		if err != nil {
			return nil, err
		}
		if !isObject(res) {
			return nil, &ProtocolError{Code: vocab.CodeInternalError, Message: fmt.Sprintf("tool %q returned a result that is not a JSON object", t.Name)}
		}
		return res, nil
	}))
}

// isObject reports whether raw is one valid JSON object.
func isObject(raw json.RawMessage) bool {
	var v map[string]json.RawMessage
	return json.Unmarshal(raw, &v) == nil && v != nil
}
