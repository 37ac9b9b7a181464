package mcpwire

import "encoding/json"

// Tool is a tool as tools/list gives it. The schemas and annotations are
// passed on as they are. Execution is the 2025-11-25 task support; the
// 2026-07-28 wire has none (its servers decide per call).
type Tool struct {
	Name         string          `json:"name"`
	Title        string          `json:"title,omitempty"`
	Description  string          `json:"description,omitempty"`
	InputSchema  json.RawMessage `json:"inputSchema"`
	OutputSchema json.RawMessage `json:"outputSchema,omitempty"`
	Annotations  json.RawMessage `json:"annotations,omitempty"`
	Execution    *ToolExecution  `json:"execution,omitempty"`
}

// ToolExecution is a 2025-11-25 tool's execution member.
type ToolExecution struct {
	// TaskSupport is TaskForbidden (also when absent), TaskOptional or
	// TaskRequired.
	TaskSupport string `json:"taskSupport"`
}

// The values of ToolExecution.TaskSupport.
const (
	TaskForbidden = "forbidden"
	TaskOptional  = "optional"
	TaskRequired  = "required"
)

// TaskSupport is t's execution.taskSupport, "" when it has none.
func (t *Tool) TaskSupport() string {
	if t.Execution == nil {
		return ""
	}
	return t.Execution.TaskSupport
}

// Prompt is a prompt as prompts/list gives it. Arguments (a list of
// PromptArgument) are passed on as they are.
type Prompt struct {
	Name        string          `json:"name"`
	Title       string          `json:"title,omitempty"`
	Description string          `json:"description,omitempty"`
	Arguments   json.RawMessage `json:"arguments,omitempty"`
}

// PromptArgument is one argument a prompt declares.
type PromptArgument struct {
	Name        string `json:"name"`
	Description string `json:"description,omitempty"`
	Required    bool   `json:"required,omitempty"`
}

// Resource is a Resource (URI set) or a ResourceTemplate (URITemplate set)
// as resources/list and resources/templates/list give them.
type Resource struct {
	URI         string          `json:"uri,omitempty"`
	URITemplate string          `json:"uriTemplate,omitempty"`
	Name        string          `json:"name"`
	Title       string          `json:"title,omitempty"`
	Description string          `json:"description,omitempty"`
	MimeType    string          `json:"mimeType,omitempty"`
	Size        int64           `json:"size,omitempty"`
	Annotations json.RawMessage `json:"annotations,omitempty"`
}

// ListParams are the params of a paginated list method.
type ListParams struct {
	Cursor string `json:"cursor,omitempty"`
}

// ListToolsResult is one page of tools/list. A 2026-07-28 list also
// carries ListMeta.
type ListToolsResult struct {
	Tools      []Tool `json:"tools"`
	NextCursor string `json:"nextCursor,omitempty"`
	ListMeta
}

// ListPromptsResult is one page of prompts/list.
type ListPromptsResult struct {
	Prompts    []Prompt `json:"prompts"`
	NextCursor string   `json:"nextCursor,omitempty"`
	ListMeta
}

// ListMeta is what every 2026-07-28 list result carries besides its
// entries: resultType, how long it may be cached and by whom, and _meta.
// All absent on the 2025 revisions.
type ListMeta struct {
	ResultType string          `json:"resultType,omitempty"`
	TTLMs      *int64          `json:"ttlMs,omitempty"`
	CacheScope string          `json:"cacheScope,omitempty"`
	Meta       json.RawMessage `json:"_meta,omitempty"`
}
