package consumer

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"

	"github.com/mcpqueue/mcpqueue/taskstate"
	"github.com/mcpqueue/mcpqueue/vocab"
)

// CompleteRequest is a completion/complete request for one argument of a
// prompt (Prompt.Complete) or one variable of a resource template
// (ResourceTemplate.Complete).
type CompleteRequest struct {
	// Argument is the argument's (or variable's) name, Value what the user
	// typed so far.
	Argument string `json:"argument"`
	Value    string `json:"value"`
	// Context holds the arguments already resolved, if the client sent them.
	Context map[string]string `json:"context,omitempty"`
}

// Completion is the answer: at most 100 values, best first. Total (when
// known) and HasMore say whether more exist than Values holds.
type Completion struct {
	Values  []string `json:"values"`
	Total   int      `json:"total,omitempty"`
	HasMore bool     `json:"hasMore,omitempty"`
}

// CompleteFunc suggests values for an argument. It runs through the queue,
// inline, on a worker that serves the prompt or template it belongs to.
type CompleteFunc func(ctx context.Context, call *Call[CompleteRequest]) (*Completion, error)

// maxCompletionValues is MCP's bound on CompleteResult.completion.values.
const maxCompletionValues = 100

// handleCompletion registers f beside the catalog entry ref ("prompt/<name>"
// or "template/<uri template>"), for the arguments names.
func handleCompletion(m *Mux, ref string, names []string, f CompleteFunc) {
	key := taskstate.CompletionKey(ref)
	if _, dup := m.tools[key]; dup {
		panic(fmt.Sprintf("consumer: completion of %q registered twice", ref))
	}
	m.tools[key] = &entry{
		info: taskstate.ToolInfo{Kind: taskstate.KindCompletion, Name: ref, TaskSupport: TaskForbidden},
		run: func(ctx context.Context, cs *callState) (json.RawMessage, error) {
			call, err := decodeCall[CompleteRequest](cs, "completion request")
			if err != nil {
				return nil, err
			}
			if !slices.Contains(names, call.Args.Argument) {
				return nil, &ProtocolError{Code: vocab.CodeInvalidParams, Message: fmt.Sprintf("invalid params: %s has no argument %q", ref, call.Args.Argument)}
			}
			c, err := f(ctx, call)
			if err != nil {
				return nil, err
			}
			if c == nil {
				c = &Completion{}
			}
			if c.Values == nil {
				c.Values = []string{}
			}
			if len(c.Values) > maxCompletionValues {
				c.HasMore = true
				c.Values = c.Values[:maxCompletionValues]
			}
			return json.Marshal(map[string]any{"completion": c})
		},
	}
}
