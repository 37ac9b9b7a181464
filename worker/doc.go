// Package worker is the main of a worker process: flags and environment,
// signals, the backend connection, the admin endpoints, and a consumer.Worker
// that runs the tools you register until SIGINT or SIGTERM, then drains.
//
// A worker binary is one line:
//
//	func main() { worker.Main("reports", register) }
//
// where register adds tools to a consumer.Mux (consumer.Handle). The binary
// takes the same flags and environment as cmd/worker (see Options.Flags and
// docs/configuration.md), and derives every stream, consumer, bucket, queue
// and subject name from --prefix the way api does, so a worker built in
// another module and an api built here always agree.
//
// A program that configures itself instead connects a backend.Backend from
// values (backend/natsbackend, backend/redisbackend) and calls Run with it
// and an Options: its consumer.Config (every worker setting, under one name
// each, a *slog.Logger among them) and what the process adds (Admin, Tools,
// relayed MCP servers).
package worker
