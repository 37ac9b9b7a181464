package client

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
)

// Result is a tool's result (CallToolResult). A tool error is a Result with
// IsError set: its text says what went wrong, for the model to act on.
type Result struct {
	Content           []Content                  `json:"content"`
	StructuredContent json.RawMessage            `json:"structuredContent,omitempty"`
	IsError           bool                       `json:"isError,omitempty"`
	Meta              map[string]json.RawMessage `json:"_meta,omitempty"`
	// TaskID is the task that produced the result; "" for a call answered
	// inline.
	TaskID string `json:"-"`
	// Raw is the result as the server sent it.
	Raw json.RawMessage `json:"-"`
}

// Content is one block of a result's content. Type says which fields are
// set: "text" (Text), "image" and "audio" (Data, base64, and MIMEType),
// "resource_link" (URI, Name, MIMEType) and "resource" (Resource).
type Content struct {
	Type     string          `json:"type"`
	Text     string          `json:"text,omitempty"`
	Data     string          `json:"data,omitempty"`
	MIMEType string          `json:"mimeType,omitempty"`
	URI      string          `json:"uri,omitempty"`
	Name     string          `json:"name,omitempty"`
	Resource json.RawMessage `json:"resource,omitempty"`
}

// Text is the text of the result's text blocks, one per line.
func (r *Result) Text() string {
	var parts []string
	for _, c := range r.Content {
		if c.Type == "text" {
			parts = append(parts, c.Text)
		}
	}
	return strings.Join(parts, "\n")
}

// String is the result as the server sent it (JSON).
func (r *Result) String() string { return string(r.Raw) }

// Decode decodes the result's structured content into v; a result without
// structured content decodes its first text block as JSON.
func (r *Result) Decode(v any) error {
	if len(r.StructuredContent) > 0 && string(r.StructuredContent) != "null" {
		if err := json.Unmarshal(r.StructuredContent, v); err != nil {
			return fmt.Errorf("client: decoding structuredContent: %w", err)
		}
		return nil
	}
	for _, c := range r.Content {
		if c.Type == "text" {
			if err := json.Unmarshal([]byte(c.Text), v); err != nil {
				return fmt.Errorf("client: decoding the result's text as JSON: %w", err)
			}
			return nil
		}
	}
	return errors.New("client: the result has neither structuredContent nor text to decode")
}

func decodeResult(raw json.RawMessage, taskID string) (*Result, error) {
	r := &Result{TaskID: taskID, Raw: raw}
	if err := json.Unmarshal(raw, r); err != nil {
		return nil, fmt.Errorf("client: the result is not a CallToolResult: %w", err)
	}
	return r, nil
}

// Tool is a tool the server lists.
type Tool struct {
	Name         string          `json:"name"`
	Title        string          `json:"title,omitempty"`
	Description  string          `json:"description,omitempty"`
	InputSchema  json.RawMessage `json:"inputSchema,omitempty"`
	OutputSchema json.RawMessage `json:"outputSchema,omitempty"`
	Annotations  json.RawMessage `json:"annotations,omitempty"`
	// TaskSupport is the tool's execution.taskSupport on the 2025-11-25 wire
	// ("forbidden", "optional" or "required"); "" on 2026-07-28, whose
	// servers decide per call.
	TaskSupport string `json:"-"`
}
