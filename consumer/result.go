package consumer

import (
	"encoding/base64"
	"errors"
	"fmt"
)

// Result is an MCP CallToolResult. Return *Result from a handler to control the
// content exactly; any other output type becomes structuredContent plus a
// text copy.
type Result struct {
	Content           []Content      `json:"content"`
	StructuredContent any            `json:"structuredContent,omitempty"`
	IsError           bool           `json:"isError,omitempty"`
	Meta              map[string]any `json:"_meta,omitempty"`
}

// Content is one content block of a tool result.
type Content struct {
	Type     string            `json:"type"`
	Text     *string           `json:"text,omitempty"`
	Data     string            `json:"data,omitempty"`
	MimeType string            `json:"mimeType,omitempty"`
	Resource *ResourceContents `json:"resource,omitempty"`
	// URI, Name and Size are a resource_link's (ResourceLink).
	URI         string         `json:"uri,omitempty"`
	Name        string         `json:"name,omitempty"`
	Size        *int64         `json:"size,omitempty"`
	Annotations map[string]any `json:"annotations,omitempty"`
}

// ResourceContents is the body of an embedded resource.
type ResourceContents struct {
	URI      string `json:"uri"`
	MimeType string `json:"mimeType,omitempty"`
	Text     string `json:"text,omitempty"`
	Blob     string `json:"blob,omitempty"`
}

// Text returns a text content block.
func Text(s string) Content { return Content{Type: "text", Text: &s} }

// Image returns an image content block from raw bytes.
func Image(data []byte, mimeType string) Content {
	return Content{Type: "image", Data: base64.StdEncoding.EncodeToString(data), MimeType: mimeType}
}

// Audio returns an audio content block from raw bytes.
func Audio(data []byte, mimeType string) Content {
	return Content{Type: "audio", Data: base64.StdEncoding.EncodeToString(data), MimeType: mimeType}
}

// Resource returns an embedded text resource block.
func Resource(uri, mimeType, text string) Content {
	return Content{Type: "resource", Resource: &ResourceContents{URI: uri, MimeType: mimeType, Text: text}}
}

// ResourceLink returns a resource_link block: a resource the client reads
// with resources/read instead of receiving it inline.
func ResourceLink(uri, name, mimeType string, size int64) Content {
	return Content{Type: "resource_link", URI: uri, Name: name, MimeType: mimeType, Size: &size}
}

// TextResult is a result holding one text block.
func TextResult(s string) *Result { return &Result{Content: []Content{Text(s)}} }

// ToolExecutionError is the error ToolError returns: a tool execution
// error in MCP's terms, which the model sees as the tool's result (isError:
// true) and can act on. Test for one with errors.As, in a middleware (see
// Mux.Use) say; make one with ToolError.
type ToolExecutionError struct{ err error }

// Error is the message of the error ToolError was given: the text of the
// result.
func (e *ToolExecutionError) Error() string { return e.err.Error() }

// Unwrap returns the error ToolError was given.
func (e *ToolExecutionError) Unwrap() error { return e.err }

// ToolError marks err as a tool-level failure: the task completes with a
// result whose isError is true and whose text is err's message, rather than
// failing with a protocol error. ToolError(nil) is nil.
//
// A handler returns one of four kinds of error, by who should act on it:
//
//   - ToolError, when the model can do something about it: bad or
//     inconsistent arguments, a missing file, a query that found nothing.
//     The call is done; it does not run again.
//   - Retryable, when this run failed but another may not: a process or
//     connection the handler depends on died mid-call. The job runs again
//     while the tool's attempts last (Tool.MaxAttempts); the last failure
//     fails the task.
//   - *ProtocolError, to fail the call with a JSON-RPC error of a code of
//     its own (invalid params, -32602, for arguments the schema let through
//     but the tool cannot take).
//   - Any other error fails the task with an internal error (-32603) and
//     its message, at once, as a panic or a timeout does.
//
// For a prompt, a resource read or a completion, which have no isError
// result, a ToolError fails the call like any other error.
func ToolError(err error) error {
	if err == nil {
		return nil
	}
	return &ToolExecutionError{err}
}

// ProtocolError fails the task with this JSON-RPC error object.
type ProtocolError struct {
	Code    int
	Message string
	Data    any
}

func (e *ProtocolError) Error() string {
	return fmt.Sprintf("consumer: protocol error %d: %s", e.Code, e.Message)
}

func asToolError(err error) (*ToolExecutionError, bool) {
	var te *ToolExecutionError
	ok := errors.As(err, &te)
	return te, ok
}
