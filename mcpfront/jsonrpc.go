package mcpfront

import (
	"encoding/json"
	"net/http"
)

// JSON-RPC and MCP error codes.
const (
	codeParse             = -32700
	codeInvalidRequest    = -32600
	codeMethodNotFound    = -32601
	codeInvalidParams     = -32602
	codeInternal          = -32603
	codeHeaderMismatch    = -32020
	codeMissingCapability = -32021
	codeUnsupportedVer    = -32022
)

// request is one JSON-RPC message as received. Params stay raw until the
// method is known, so every body is decoded once into its final type.
type request struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id,omitempty"`
	Method  string          `json:"method"`
	Params  json.RawMessage `json:"params,omitempty"`
	Result  json.RawMessage `json:"result,omitempty"`
	Error   json.RawMessage `json:"error,omitempty"`

	// Where checkBody found the members (body.go), when they came from
	// there; nil when encoding/json decoded the request.
	spans *bodyInfo
	body  []byte
}

func (r *request) isNotification() bool { return len(r.ID) == 0 && r.Method != "" }
func (r *request) isResponse() bool {
	return r.Method == "" && len(r.ID) > 0 && (len(r.Result) > 0 || len(r.Error) > 0)
}

type response struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Result  any             `json:"result,omitempty"`
	Error   *rpcError       `json:"error,omitempty"`
}

// rpcError is a JSON-RPC error plus the HTTP status it travels with.
type rpcError struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
	Data    any    `json:"data,omitempty"`
	status  int
}

func (e *rpcError) Error() string { return e.Message }

func errorf(code int, status int, msg string) *rpcError {
	return &rpcError{Code: code, Message: msg, status: status}
}

func invalidParams(msg string) *rpcError { return errorf(codeInvalidParams, http.StatusOK, msg) }

func (e *rpcError) withData(d any) *rpcError { e.Data = d; return e }

// httpStatus is the status an error reply carries: 400 for transport-level
// protocol errors, 404 for unknown methods, 200 otherwise.
func (e *rpcError) httpStatus() int {
	if e.status != 0 {
		return e.status
	}
	return http.StatusOK
}
