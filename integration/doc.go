// Package integration holds the end-to-end tests: real nats-server,
// redis-server, api and worker processes (started by package harness), the
// official MCP clients and conformance suite (from integration/node), and the
// fault suite. It has no code of its own; go test ./integration/ runs it, and
// docs/testing.md says what it covers.
package integration
