// Package bridge runs an existing MCP server's tools and prompts on the
// queue: it opens client sessions with the server (a child process speaking
// MCP over stdio, a remote server speaking Streamable HTTP: HTTPServer, or
// any other Conn, e.g. an in-process go-sdk server: package gosdk), lists what the server offers and registers each tool in a
// consumer.Mux under its own name (with a prefix, if configured), input and
// output schema, title and annotations. Every job of such a tool becomes a
// tools/call on one of a pool of sessions.
//
// What the server does during a call maps onto the task:
//
//   - notifications/progress → Call.Progress: the task's statusMessage (the
//     server's message, or "progress P/T"), and progress notifications for
//     an inline client that sent a progress token;
//   - elicitation/create, sampling/createMessage, roots/list → Call.Ask: the
//     task turns input_required and the answers (tasks/update, or a
//     2025-11-25 client's response, on any api replica) go back to the
//     server as the request's result;
//   - notifications/message → the worker's log (and the client's, if it
//     asked for a log level);
//   - notifications/tools/list_changed, notifications/prompts/list_changed
//     → the lists are read again and the running worker serves the new set
//     (consumer.Mux.Replace).
//
// The handler's context ending (tasks/cancel, the tool's timeout, shutdown)
// sends notifications/cancelled for the call. A session serves one call at a
// time, so whatever the server sends belongs to that call; a session whose
// call was cancelled and that does not answer within CancelGrace is closed
// rather than reused, so a cancelled call can never leak into the next one.
// A session that dies mid-call (the child process exits) fails the run with
// consumer.Retryable: it runs again on a fresh session while the tool's
// attempts last, then fails with a message naming the server and how it
// ended. Sessions that die are replaced on demand, with backoff.
//
// A remote server (HTTPServer) may speak either protocol era: 2025-11-25
// (initialize, a session) or 2026-07-28 (per-request _meta and headers,
// server/discover), probed or configured (HTTPServer.Protocol). A
// 2026-07-28 server with the tasks extension may answer a call with a task
// of its own: the bridge then follows it (tasks/get at its poll interval:
// its statusMessage as progress, its inputRequests as input requests
// answered with tasks/update, its result or error as the call's), and the
// call's cancel becomes tasks/cancel.
//
// Resources are not relayed: workers serve tools and prompts only.
// Server tools that require task-augmented execution (execution.taskSupport
// "required") are skipped with a warning unless the server runs upstream
// tasks the bridge follows (2026-07-28 above); otherwise the bridge is a
// plain client.
package bridge
