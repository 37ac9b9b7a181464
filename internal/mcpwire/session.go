package mcpwire

import "encoding/json"

// The protocol revisions, and the _meta keys and values of 2026-07-28.
const (
	// Version20251125 is the revision with experimental core tasks, the
	// newest of the session-based 2025 revisions.
	Version20251125 = "2025-11-25"
	// Version20260728 is the stateless revision; tasks are the
	// TasksExtension there.
	Version20260728 = "2026-07-28"
	// TasksExtension names the tasks extension in a 2026-07-28 client's
	// and server's capabilities.extensions.
	TasksExtension = "io.modelcontextprotocol/tasks"

	// _meta keys every 2026-07-28 request carries (the version, the
	// client's capabilities, and, SHOULD, its name), the log level it asks
	// for, and the server's name on results.
	MetaProtocolVersion    = "io.modelcontextprotocol/protocolVersion"
	MetaClientCapabilities = "io.modelcontextprotocol/clientCapabilities"
	MetaClientInfo         = "io.modelcontextprotocol/clientInfo"
	MetaLogLevel           = "io.modelcontextprotocol/logLevel"
	MetaServerInfo         = "io.modelcontextprotocol/serverInfo"
	// MetaRelatedTask names the task a 2025-11-25 message belongs to:
	// {"taskId": …}.
	MetaRelatedTask = "io.modelcontextprotocol/related-task"

	// The resultType of a 2026-07-28 result: done, an MRTR round, a task
	// handle.
	ResultComplete      = "complete"
	ResultInputRequired = "input_required"
	ResultTask          = "task"
)

// Empty is an empty object: the value of a capability a side declares
// without settings.
var Empty = json.RawMessage(`{}`)

// Implementation names a client or a server (clientInfo, serverInfo).
type Implementation struct {
	Name    string `json:"name"`
	Version string `json:"version"`
}

// ClientCapabilities are a client's capabilities: initialize's on the 2025
// revisions, every request's _meta entry on 2026-07-28. A member present
// (Empty, or its settings) declares the capability.
type ClientCapabilities struct {
	Elicitation json.RawMessage            `json:"elicitation,omitempty"`
	Roots       json.RawMessage            `json:"roots,omitempty"`
	Sampling    json.RawMessage            `json:"sampling,omitempty"`
	Tasks       json.RawMessage            `json:"tasks,omitempty"`
	Extensions  map[string]json.RawMessage `json:"extensions,omitempty"`
}

// Declares reports whether c declares extension ext with a settings object.
func (c *ClientCapabilities) Declares(ext string) bool {
	s := c.Extensions[ext]
	return len(s) > 0 && s[0] == '{'
}

// ServerCapabilities are a server's capabilities (initialize,
// server/discover). A member present declares the feature; the settings
// are passed on as they are.
type ServerCapabilities struct {
	Completions json.RawMessage            `json:"completions,omitempty"`
	Logging     json.RawMessage            `json:"logging,omitempty"`
	Prompts     json.RawMessage            `json:"prompts,omitempty"`
	Resources   json.RawMessage            `json:"resources,omitempty"`
	Tasks       *LegacyTasksCapability     `json:"tasks,omitempty"`
	Tools       json.RawMessage            `json:"tools,omitempty"`
	Extensions  map[string]json.RawMessage `json:"extensions,omitempty"`
}

// TaskToolCalls reports whether the server (2025-11-25) runs task-augmented
// tools/call: capabilities.tasks.requests.tools.call is declared.
func (c *ServerCapabilities) TaskToolCalls() bool {
	if c.Tasks == nil || len(c.Tasks.Requests) == 0 {
		return false
	}
	var r struct {
		Tools struct {
			Call json.RawMessage `json:"call"`
		} `json:"tools"`
	}
	return json.Unmarshal(c.Tasks.Requests, &r) == nil && len(r.Tools.Call) > 0
}

// LegacyTasksCapability is 2025-11-25's capabilities.tasks: list and
// cancel served, and the requests that may be task-augmented.
type LegacyTasksCapability struct {
	Cancel   json.RawMessage `json:"cancel,omitempty"`
	List     json.RawMessage `json:"list,omitempty"`
	Requests json.RawMessage `json:"requests,omitempty"`
}

// InitializeParams are initialize's params (the 2025 revisions). The
// capabilities and clientInfo stay raw: a server keeps them as sent.
type InitializeParams struct {
	ProtocolVersion string          `json:"protocolVersion"`
	Capabilities    json.RawMessage `json:"capabilities"`
	ClientInfo      json.RawMessage `json:"clientInfo"`
}

// InitializeResult is initialize's result.
type InitializeResult struct {
	ProtocolVersion string             `json:"protocolVersion"`
	Capabilities    ServerCapabilities `json:"capabilities"`
	ServerInfo      Implementation     `json:"serverInfo"`
	Instructions    string             `json:"instructions,omitempty"`
}

// DiscoverResult is 2026-07-28's server/discover result, as far as a client
// reads it.
type DiscoverResult struct {
	ResultType        string             `json:"resultType"`
	SupportedVersions []string           `json:"supportedVersions"`
	Capabilities      ServerCapabilities `json:"capabilities"`
	ServerInfo        *Implementation    `json:"serverInfo,omitempty"`
	Instructions      string             `json:"instructions,omitempty"`
	TTLMs             int64              `json:"ttlMs"`
	CacheScope        string             `json:"cacheScope"`
	Meta              json.RawMessage    `json:"_meta,omitempty"`
}
