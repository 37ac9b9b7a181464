// Package telemetry owns what mcpqueue tells its operators: the Prometheus
// collectors (tasks created and finished, pickup latency, run time, input
// wait, redeliveries, lease expiries, queue depth, HTTP requests), the
// OpenTelemetry spans that follow one task from the api through the queue to
// the worker and its state writes, and the /healthz and /readyz handlers.
//
// A *Telemetry is nil-safe: every method of a nil one does nothing, so the
// library packages call their hooks unconditionally. It imports only the
// standard library, Prometheus, the OpenTelemetry API and the broker seam;
// exporters are chosen by the binaries (backend).
package telemetry
