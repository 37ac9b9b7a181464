// Package client calls MCP tools from Go, running each call as a task
// where the server offers tasks and inline where it does not.
//
// A Client speaks both protocol revisions an mcpqueue api serves on one
// endpoint, and any other server of either:
//
//   - 2026-07-28 (stateless): every request carries its version and client
//     capabilities in _meta; tasks are the io.modelcontextprotocol/tasks
//     extension, declared per request. A task's input requests are listed by
//     tasks/get and answered with tasks/update; an inline call's are MRTR
//     rounds (resultType "input_required", answered by calling again with
//     inputResponses and requestState).
//   - 2025-11-25 (and the older 2025 revisions): initialize opens a session
//     (Mcp-Session-Id); a tool whose execution.taskSupport allows it is
//     called with params.task; tasks/get is polled and tasks/result returns
//     the outcome; input requests arrive as server-to-client JSON-RPC
//     requests on a response stream, and the client answers each with a POST.
//
// New does no I/O; the first call asks the server what it speaks
// (server/discover, else initialize) unless WithVersion names the revision.
//
// What a call does:
//
//   - Call runs a tool and returns its result: Start, then Task.Wait.
//   - Wait polls tasks/get at the task's pollIntervalMs, never faster than
//     the poll floor (WithPollFloor); a server that gives no interval is
//     polled at the floor, doubling up to 5 s.
//   - Input requests (elicitation, sampling, roots) go to the InputHandler
//     (WithInputHandler); the client declares those capabilities only when it
//     has one.
//   - When the context of Call or Wait ends before the task does, the task is
//     cancelled (tasks/cancel) and the context's error returned; Call also
//     cancels a task it gives up on for another reason. Start alone
//     never cancels: its task outlives the call, to be waited for or resumed
//     by id (Resume) later, from this process or another.
//   - Every logical call carries one random idempotency key, as the header
//     Idempotency-Key and as _meta["io.mcpqueue/idempotency-key"]; a request
//     that fails in transit (connection error, HTTP 429, 502, 503, 504) is
//     sent again with the same key (WithRetries), so a server that honours
//     keys runs the tool once. WithKey sets the key of one call.
//   - A server that answers a call made without tasks with structured content
//     {taskId, status, pollAfterMs} (mcpqueue's hand-over, past its inline
//     wait) is followed by calling its tool tasks_result with the task id until
//     the task's own result comes; ending the context calls tasks_cancel.
//   - WithTokenSource adds a bearer token to every request.
//   - A tool that mirrors parameters in headers (SEP-2243, x-mcp-header) gets
//     its Mcp-Param-* headers: the client reads the tool's schema from
//     tools/list the first time the server refuses a call for them.
//   - On the 2025 wire a session that ended (HTTP 404) is replaced by a new
//     one on the next request; the old session's tasks are gone with it
//     (without authentication a task belongs to its session).
//
// A tool error (isError: true) is a Result with IsError set, not an error;
// a task that failed returns its JSON-RPC error as an *Error; a cancelled
// one ErrCancelled.
//
// The package depends on nothing but the standard library.
package client
