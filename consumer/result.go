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

// toolError is an error the model should see as a tool result (isError: true).
type toolError struct{ err error }

func (e *toolError) Error() string { return e.err.Error() }
func (e *toolError) Unwrap() error { return e.err }

// ToolError marks err as a tool-level failure: the task completes with a
// result whose isError is true and whose text is err's message, rather than
// failing with a protocol error.
func ToolError(err error) error {
	if err == nil {
		return nil
	}
	return &toolError{err}
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

func asToolError(err error) (*toolError, bool) {
	var te *toolError
	ok := errors.As(err, &te)
	return te, ok
}
