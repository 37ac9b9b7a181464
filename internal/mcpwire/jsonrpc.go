package mcpwire

import (
	"encoding/json"
	"fmt"
)

// Version is the JSON-RPC version every message carries.
const Version = "2.0"

// Message is any JSON-RPC 2.0 message as read: a request (Method and ID),
// a notification (Method, no ID) or a response (ID, and Result or Error).
// Every member but the method stays raw until its reader knows what to
// expect; Err decodes the error object.
type Message struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id,omitempty"`
	Method  string          `json:"method,omitempty"`
	Params  json.RawMessage `json:"params,omitempty"`
	Result  json.RawMessage `json:"result,omitempty"`
	Error   json.RawMessage `json:"error,omitempty"`
}

// IsRequest reports whether m is a request: a method and an id.
func (m *Message) IsRequest() bool { return m.Method != "" && len(m.ID) > 0 }

// IsNotification reports whether m is a notification: a method, no id.
func (m *Message) IsNotification() bool { return m.Method != "" && len(m.ID) == 0 }

// IsResponse reports whether m is a response: an id and no method.
func (m *Message) IsResponse() bool { return m.Method == "" && len(m.ID) > 0 }

// Err is m's error object, nil when it has none (absent or null). An error
// member that is not a JSON-RPC error object is reported as an internal
// error (-32603) that quotes it.
func (m *Message) Err() *Error {
	if len(m.Error) == 0 || string(m.Error) == "null" {
		return nil
	}
	var e Error
	if err := json.Unmarshal(m.Error, &e); err != nil {
		return &Error{Code: codeInternalError, Message: fmt.Sprintf("malformed JSON-RPC error object %s: %v", clip(m.Error), err)}
	}
	return &e
}

// codeInternalError is JSON-RPC's internal error (vocab.CodeInternalError;
// this package imports only the standard library).
const codeInternalError = -32603

// Request is a request or a notification to send: a nil ID makes it a
// notification. Params are encoded as they are (nil: no params member).
type Request struct {
	JSONRPC string `json:"jsonrpc"`
	ID      any    `json:"id,omitempty"`
	Method  string `json:"method"`
	Params  any    `json:"params,omitempty"`
}

// NewRequest is a request with id (nil: a notification).
func NewRequest(id any, method string, params any) *Request {
	return &Request{JSONRPC: Version, ID: id, Method: method, Params: params}
}

// Response is a response to send: Result, or Error when set. ID is written
// even when null (an error answering a request whose id could not be read).
type Response struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Result  any             `json:"result,omitempty"`
	Error   *Error          `json:"error,omitempty"`
}

// Error is a JSON-RPC error object. Data is kept as sent.
type Error struct {
	Code    int             `json:"code"`
	Message string          `json:"message"`
	Data    json.RawMessage `json:"data,omitempty"`
}

func (e *Error) Error() string { return fmt.Sprintf("rpc error %d: %s", e.Code, e.Message) }

// WithData sets e's data to d encoded (nothing when d cannot be encoded)
// and returns e.
func (e *Error) WithData(d any) *Error {
	if b, err := json.Marshal(d); err == nil {
		e.Data = b
	}
	return e
}

func clip(b []byte) string {
	if len(b) > 200 {
		return string(b[:200]) + "…"
	}
	return string(b)
}
