package consumer

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/mcpqueue/mcpqueue/taskstate"
)

// Prompt describes a prompt to register.
type Prompt struct {
	Name        string
	Title       string
	Description string
	Arguments   []PromptArgument
	// Complete, when set, answers completion/complete for the prompt's
	// arguments (registered beside the prompt, routed like it).
	Complete CompleteFunc
}

// PromptArgument is one argument a prompt takes.
type PromptArgument struct {
	Name        string `json:"name"`
	Description string `json:"description,omitempty"`
	Required    bool   `json:"required,omitempty"`
}

// PromptResult is an MCP GetPromptResult.
type PromptResult struct {
	Description string          `json:"description,omitempty"`
	Messages    []PromptMessage `json:"messages"`
}

// PromptMessage is one message of a prompt.
type PromptMessage struct {
	Role    string  `json:"role"` // "user" or "assistant"
	Content Content `json:"content"`
}

// HandlePrompt registers h as prompt p. Prompts run through the queue like
// tool calls (always inline: prompts/get never becomes a task), so a prompt
// handler can ask the client for input the same way (MRTR).
func HandlePrompt(m *Mux, p Prompt, h func(ctx context.Context, call *Call[map[string]string]) (*PromptResult, error)) {
	if !toolName.MatchString(p.Name) {
		panic(fmt.Sprintf("consumer: invalid prompt name %q", p.Name))
	}
	key := taskstate.CatalogKey(taskstate.KindPrompt, p.Name)
	args, _ := json.Marshal(p.Arguments)
	if p.Arguments == nil {
		args = nil
	}
	m.add(key, &entry{
		info: taskstate.ToolInfo{
			Kind: taskstate.KindPrompt, Name: p.Name, Title: p.Title, Description: p.Description,
			Arguments: args, TaskSupport: TaskForbidden,
		},
		run: func(ctx context.Context, cs *callState) (json.RawMessage, error) {
			call, err := decodeCall[map[string]string](cs, "prompt arguments")
			if err != nil {
				return nil, err
			}
			res, err := h(ctx, call)
			if err != nil {
				return nil, err
			}
			if res == nil || res.Messages == nil {
				res = &PromptResult{Messages: []PromptMessage{}}
			}
			return json.Marshal(res)
		},
	})
	if p.Complete != nil {
		names := make([]string, len(p.Arguments))
		for i, a := range p.Arguments {
			names[i] = a.Name
		}
		handleCompletion(m, key, names, p.Complete)
	}
}
