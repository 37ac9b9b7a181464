// Command conformance is a worker serving the fixture tools the official MCP
// conformance suite (github.com/modelcontextprotocol/conformance) calls; see
// docs/testing.md. Run it beside `api --nats URL` and point
// scripts/conformance.sh at the api: every scenario then exercises the whole
// queue path, api → broker → worker → state → api.
package main

import (
	"github.com/mcpqueue/mcpqueue/examples/conformance/fixtures"
	"github.com/mcpqueue/mcpqueue/worker"
)

func main() { worker.Main("conformance", worker.Static(fixtures.Register)) }
