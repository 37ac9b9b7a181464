// Package mcpwire is the one set of MCP wire types the module's MCP code
// shares: the front end (mcpfront), the bridge to existing MCP servers
// (bridge) and the Go client (client). It holds the JSON-RPC envelopes and
// error object, the list entries (Tool, Prompt, Resource), the session
// handshake of the 2025 revisions (initialize) and the capabilities, the
// notifications a call's server sends (progress, log messages,
// cancellation), and the task shapes of both protocol revisions: the
// 2025-11-25 core Task (LegacyTask) and the 2026-07-28 tasks extension's
// flat Task, with the input requests a task or an MRTR round lists.
//
// The types are the JSON as it travels: field names, omitempty and null
// exactly as the revisions send them (../shared/PROTOCOL.md), and members a
// side only passes on (schemas, annotations, _meta, capabilities, results)
// stay json.RawMessage, so nothing the peer sent is lost or reordered on
// the way through. Where the two revisions disagree (ttl/ttlMs,
// pollInterval/pollIntervalMs, the nested or flat create result) there is a
// type per revision. The round-trip test holds each type to fixtures of what
// each revision sends (testdata).
//
// The package imports only the standard library (internal/layout holds it
// to that), so the Go client, which users import into their agents, stays
// free of dependencies. Error codes are in package vocab.
package mcpwire
