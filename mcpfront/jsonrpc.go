package mcpfront

import (
	"context"
	"net/http"

	"github.com/mcpqueue/mcpqueue/internal/mcpwire"
	"github.com/mcpqueue/mcpqueue/vocab"
)

// request is one JSON-RPC message as received (mcpwire.Message). Params
// stay raw until the method is known, so every body is decoded once into
// its final type; a client's error object is passed on as sent.
type request struct {
	mcpwire.Message

	// Where checkBody found the members (body.go), when they came from
	// there; nil when encoding/json decoded the request.
	spans *bodyInfo
	body  []byte
}

func (r *request) isNotification() bool { return len(r.ID) == 0 && r.Method != "" }
func (r *request) isResponse() bool {
	return r.Method == "" && len(r.ID) > 0 && (len(r.Result) > 0 || len(r.Error) > 0)
}

// methods is one revision's method table: each method's handler, called
// with the request decoded as that revision decodes it (C).
type methods[C any] map[string]func(s *Server, ctx context.Context, w http.ResponseWriter, r *http.Request, c C)

// serve runs req's handler, or answers "Method not found" with the HTTP
// status the revision gives it.
func (m methods[C]) serve(s *Server, w http.ResponseWriter, r *http.Request, req *request, notFound int, c C) {
	h, ok := m[req.Method]
	if !ok {
		writeError(w, req.ID, errorf(vocab.CodeMethodNotFound, notFound, "Method not found: "+clip(req.Method)))
		return
	}
	h(s, r.Context(), w, r, c)
}

// response is a JSON-RPC response as written.
type response = mcpwire.Response

// wireError is the JSON-RPC error object (rpcError's wire part).
type wireError = mcpwire.Error

// rpcError is a JSON-RPC error plus the HTTP status it travels with.
type rpcError struct {
	wireError
	status int
}

func (e *rpcError) Error() string { return e.Message }

// wire is the error object e writes.
func (e *rpcError) wire() *mcpwire.Error { return &e.wireError }

func errorf(code int, status int, msg string) *rpcError {
	return &rpcError{wireError: wireError{Code: code, Message: msg}, status: status}
}

func invalidParams(msg string) *rpcError { return errorf(vocab.CodeInvalidParams, http.StatusOK, msg) }

// withData sets the error's data (d encoded) and returns e.
func (e *rpcError) withData(d any) *rpcError { _ = e.WithData(d); return e }

// httpStatus is the status an error reply carries: 400 for transport-level
// protocol errors, 404 for unknown methods, 200 otherwise.
func (e *rpcError) httpStatus() int {
	if e.status != 0 {
		return e.status
	}
	return http.StatusOK
}
