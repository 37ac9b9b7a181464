package client

import (
	"context"
	"encoding/json"
	"fmt"
)

// The methods of the input requests a server may send.
const (
	MethodElicit = "elicitation/create"
	MethodSample = "sampling/createMessage"
	MethodRoots  = "roots/list"
)

// InputHandler answers a server's request for input during a call. An
// error refuses the request: on the 2025-11-25 wire the server gets it as
// the JSON-RPC error of its request; on 2026-07-28 the call ends with it
// (and its task is cancelled).
type InputHandler func(ctx context.Context, req InputRequest) (InputResponse, error)

// InputRequest is one request for input: an elicitation, a sampling request
// or a roots listing.
type InputRequest struct {
	// Key names the request: the key of inputRequests (2026-07-28), or the
	// JSON-RPC id of the server's request (2025-11-25). A request is passed
	// to the handler once per key.
	Key string
	// TaskID is the task that asks; "" for a call answered inline.
	TaskID string
	// Method is MethodElicit, MethodSample or MethodRoots.
	Method string
	// Params are the request's params as sent.
	Params json.RawMessage
}

// Message is an elicitation's message ("" for other requests).
func (r InputRequest) Message() string {
	var p struct {
		Message string `json:"message"`
	}
	_ = json.Unmarshal(r.Params, &p)
	return p.Message
}

// Decode decodes the request's params into v.
func (r InputRequest) Decode(v any) error {
	if err := json.Unmarshal(r.Params, v); err != nil {
		return fmt.Errorf("client: decoding the params of %s: %w", r.Method, err)
	}
	return nil
}

// InputResponse is the answer to an InputRequest: build it with Accept,
// Decline or Dismiss (elicitation), RootsResponse, SampledText, or
// RawResponse for any other result.
type InputResponse struct {
	result any
}

// Accept accepts an elicitation with content (the fields its schema asks for).
func Accept(content map[string]any) InputResponse {
	return InputResponse{map[string]any{"action": "accept", "content": content}}
}

// Decline declines an elicitation: the user said no.
func Decline() InputResponse { return InputResponse{map[string]any{"action": "decline"}} }

// Dismiss answers an elicitation with the action "cancel": the user
// dismissed it without choosing.
func Dismiss() InputResponse { return InputResponse{map[string]any{"action": "cancel"}} }

// Root is one of the client's roots.
type Root struct {
	URI  string `json:"uri"`
	Name string `json:"name,omitempty"`
}

// RootsResponse answers roots/list.
func RootsResponse(roots ...Root) InputResponse {
	if roots == nil {
		roots = []Root{}
	}
	return InputResponse{map[string]any{"roots": roots}}
}

// SampledText answers sampling/createMessage with an assistant message of
// text, produced by model.
func SampledText(model, text string) InputResponse {
	return InputResponse{map[string]any{
		"role": "assistant", "model": model, "stopReason": "endTurn",
		"content": map[string]any{"type": "text", "text": text},
	}}
}

// RawResponse answers with result, encoded as JSON as it is.
func RawResponse(result any) InputResponse { return InputResponse{result} }

// encode is the response as the result of the server's request.
func (r InputResponse) encode() (json.RawMessage, error) {
	if r.result == nil {
		return nil, fmt.Errorf("client: the input handler returned an empty InputResponse")
	}
	b, err := json.Marshal(r.result)
	if err != nil {
		return nil, fmt.Errorf("client: encoding the input response: %w", err)
	}
	return b, nil
}

// answer runs the input handler on req and encodes its response.
func (c *Client) answer(ctx context.Context, req InputRequest) (json.RawMessage, error) {
	if c.o.input == nil {
		return nil, fmt.Errorf("%w (%s, key %q)", ErrNoInputHandler, req.Method, req.Key)
	}
	resp, err := c.o.input(ctx, req)
	if err != nil {
		return nil, err
	}
	return resp.encode()
}
