// Package vocab is the words every part of mcpqueue shares, in one place so
// that two binaries built from different modules cannot disagree on them:
// the keys of a job's meta (what the front end fills in and a handler's call
// reads) and the JSON-RPC and MCP error codes. It imports only the standard
// library. The seams broker and taskstate import nothing of this module, not
// even this: the meta keys are plain strings on broker.Job.Meta to them, and
// the plain-name rule is theirs (broker.SafeName, taskstate.ValidID).
package vocab

// Keys of a job's meta (broker.Job.Meta, taskstate.Task.Meta) the front end
// fills in from the request and a handler's call reads. The trace context
// travels under telemetry.MetaTraceParent and telemetry.MetaTraceState.
const (
	// MetaProgressToken is the client's progress token: the call may report
	// progress.
	MetaProgressToken = "progressToken"
	// MetaLogLevel is the least level of log messages the client wants.
	MetaLogLevel = "logLevel"
	// MetaClientCaps are the client's capabilities (elicitation, sampling…).
	MetaClientCaps = "clientCapabilities"
	// MetaInputResponses are the client's answers to the call's input
	// requests, gathered before the job was enqueued.
	MetaInputResponses = "inputResponses"
)

// A tools/call's idempotency key, on either wire: the HTTP header
// HeaderIdempotencyKey or the request's params._meta entry
// MetaIdempotencyKey (both: they must agree). The same principal calling
// with the same key within the task's TTL gets the task the first call
// created, and the tool runs once.
const (
	HeaderIdempotencyKey = "Idempotency-Key"
	MetaIdempotencyKey   = "io.mcpqueue/idempotency-key"
)

// MetaNotBefore is a tools/call's params._meta entry that schedules the
// call (issue #32 item 1): an RFC 3339 time before which its handler does
// not start. The task is created at once (working, "scheduled for …");
// the record and the job keep the time under this key (taskstate.MetaNotBefore).
const MetaNotBefore = "io.mcpqueue/not-before"

// JSON-RPC 2.0 error codes.
const (
	CodeParseError     = -32700 // the body is not JSON
	CodeInvalidRequest = -32600 // JSON, but not a valid request
	CodeMethodNotFound = -32601
	CodeInvalidParams  = -32602
	CodeInternalError  = -32603
)

// MCP error codes, in the implementation-defined server range (-32000 to
// -32099).
const (
	// CodeResourceNotFound is 2025-11-25's unknown resource (2026-07-28
	// answers CodeInvalidParams).
	CodeResourceNotFound = -32002
	// CodeHeaderMismatch: a required header is missing or disagrees with the
	// body (MCP-Protocol-Version, Mcp-Method, Mcp-Name, Mcp-Param-*).
	CodeHeaderMismatch = -32020
	// CodeMissingCapability: the request needs a capability or extension the
	// client did not declare.
	CodeMissingCapability = -32021
	// CodeUnsupportedVersion: the protocol version is not one the server
	// speaks.
	CodeUnsupportedVersion = -32022
	// CodeLimited: refused by a limit (rate, active tasks, open streams).
	CodeLimited = -32029
)
