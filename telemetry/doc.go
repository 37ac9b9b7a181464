// Package telemetry owns what mcpqueue tells its operators: the Prometheus
// collectors (tasks created and finished, pickup latency, run time, input
// wait, redeliveries, lease expiries, queue depth, HTTP requests), the
// OpenTelemetry spans that follow one task from the api through the queue to
// the worker and its state writes, and the /healthz and /readyz handlers.
//
// A *Telemetry is nil-safe: every method of a nil one does nothing, so the
// library packages call their hooks unconditionally. It imports only the
// standard library, Prometheus and the OpenTelemetry API, no package of
// this module: callers pass plain values (a job's task id, kind, tool and
// Meta; a queue's depth as a DepthFunc, which internal/cli.QueueDepth makes);
// exporters are chosen by the binaries (backend).
package telemetry
