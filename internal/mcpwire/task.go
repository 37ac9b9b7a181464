package mcpwire

import "encoding/json"

// Task is a task on the 2026-07-28 wire (the tasks extension): tools/call's
// CreateTaskResult (ResultType ResultTask) and tasks/get's DetailedTask
// (ResultComplete, with Result, Error or InputRequests as the status
// implies). TTLMs is null for a task kept without limit. The members are in
// the order mcpfront writes them.
type Task struct {
	ResultType     string                     `json:"resultType,omitempty"`
	TaskID         string                     `json:"taskId"`
	Status         string                     `json:"status"`
	CreatedAt      string                     `json:"createdAt"`
	LastUpdatedAt  string                     `json:"lastUpdatedAt"`
	TTLMs          *int64                     `json:"ttlMs"`
	PollIntervalMs *int64                     `json:"pollIntervalMs,omitempty"`
	StatusMessage  string                     `json:"statusMessage,omitempty"`
	Result         json.RawMessage            `json:"result,omitempty"`
	Error          *Error                     `json:"error,omitempty"`
	InputRequests  map[string]json.RawMessage `json:"inputRequests,omitempty"`
	Meta           json.RawMessage            `json:"_meta,omitempty"`
}

// LegacyTask is a task on the 2025-11-25 wire (core experimental tasks):
// tasks/get, tasks/cancel, tasks/list entries, notifications/tasks/status,
// and nested in LegacyCreateTaskResult. TTL is null for a task kept
// without limit. The members are in name order, as encoding/json writes a
// map of them.
type LegacyTask struct {
	CreatedAt     string `json:"createdAt"`
	LastUpdatedAt string `json:"lastUpdatedAt"`
	PollInterval  *int64 `json:"pollInterval,omitempty"`
	Status        string `json:"status"`
	StatusMessage string `json:"statusMessage,omitempty"`
	TaskID        string `json:"taskId"`
	TTL           *int64 `json:"ttl"`
}

// LegacyCreateTaskResult is a 2025-11-25 task-augmented tools/call's result.
type LegacyCreateTaskResult struct {
	Task *LegacyTask     `json:"task"`
	Meta json.RawMessage `json:"_meta,omitempty"`
}

// LegacyListTasksResult is one page of 2025-11-25's tasks/list.
type LegacyListTasksResult struct {
	NextCursor string        `json:"nextCursor,omitempty"`
	Tasks      []*LegacyTask `json:"tasks"`
}

// TaskParams are the params of the task methods (tasks/get, tasks/result,
// tasks/cancel, tasks/update with InputResponses, tasks/list with Cursor).
type TaskParams struct {
	TaskID         string                     `json:"taskId,omitempty"`
	Cursor         string                     `json:"cursor,omitempty"`
	InputResponses map[string]json.RawMessage `json:"inputResponses,omitempty"`
	Meta           json.RawMessage            `json:"_meta,omitempty"`
}

// RelatedTask is the value of _meta[MetaRelatedTask].
type RelatedTask struct {
	TaskID string `json:"taskId"`
}

// InputRequest is one request for input as a 2026-07-28 task or MRTR
// round lists it under inputRequests, and as a task's record keeps it: the
// method (elicitation/create, sampling/createMessage, roots/list) and its
// params, without jsonrpc or id. On 2025-11-25 it travels as a
// server-to-client JSON-RPC request instead.
type InputRequest struct {
	Method string          `json:"method"`
	Params json.RawMessage `json:"params"`
}

// InputRequiredResult is a 2026-07-28 MRTR round: the call needs the
// answers to InputRequests, sent with requestState on the next call.
type InputRequiredResult struct {
	ResultType    string                  `json:"resultType"`
	InputRequests map[string]InputRequest `json:"inputRequests"`
	RequestState  *string                 `json:"requestState,omitempty"`
	Meta          json.RawMessage         `json:"_meta,omitempty"`
}

// CallToolParams are the params of tools/call (and, with Name and
// Arguments only, prompts/get): on 2025-11-25 Task asks for a task; on
// 2026-07-28 InputResponses (an object of answers by request key) and
// RequestState (a string) answer an MRTR round. Those two stay raw, so a
// 2025 request that carries them malformed decodes as before they existed;
// the 2026-07-28 front end checks their types itself.
type CallToolParams struct {
	Name           string                     `json:"name"`
	Arguments      json.RawMessage            `json:"arguments,omitempty"`
	Task           *TaskMetadata              `json:"task,omitempty"`
	InputResponses json.RawMessage            `json:"inputResponses,omitempty"`
	RequestState   json.RawMessage            `json:"requestState,omitempty"`
	Meta           map[string]json.RawMessage `json:"_meta,omitempty"`
}

// TaskMetadata is a 2025-11-25 request's task member: run it as a task,
// kept TTL milliseconds (the server may choose another).
type TaskMetadata struct {
	TTL *int64 `json:"ttl"`
}
