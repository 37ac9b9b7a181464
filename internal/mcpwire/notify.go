package mcpwire

import "encoding/json"

// ProgressParams are the params of notifications/progress.
type ProgressParams struct {
	ProgressToken json.RawMessage `json:"progressToken"`
	Progress      float64         `json:"progress"`
	Total         float64         `json:"total,omitempty"`
	Message       string          `json:"message,omitempty"`
}

// LogMessageParams are the params of notifications/message.
type LogMessageParams struct {
	Level  string          `json:"level"`
	Logger string          `json:"logger,omitempty"`
	Data   json.RawMessage `json:"data"`
}

// CancelledParams are the params of notifications/cancelled: the request
// (by its id) the sender no longer wants answered.
type CancelledParams struct {
	RequestID json.RawMessage `json:"requestId"`
	Reason    string          `json:"reason,omitempty"`
}

// SetLevelParams are the params of logging/setLevel.
type SetLevelParams struct {
	Level string `json:"level"`
}
