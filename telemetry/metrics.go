package telemetry

import (
	"context"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"
)

// metrics are the collectors. Every process registers all of them; each
// counts what happens in that process (the api creates and cancels tasks,
// workers run and finish them), so dashboards sum over processes.
type metrics struct {
	reg       prometheus.Registerer
	created   *prometheus.CounterVec
	finished  *prometheus.CounterVec
	run       *prometheus.HistogramVec
	pickup    *prometheus.HistogramVec
	inputWait *prometheus.HistogramVec
	redeliver *prometheus.CounterVec
	expired   *prometheus.CounterVec
	deferred  *prometheus.CounterVec
	http      *prometheus.CounterVec
}

func newMetrics(reg prometheus.Registerer) *metrics {
	m := &metrics{
		reg: reg,
		created: counter("mcpq_tasks_created_total",
			"Tasks created (record written and job queued), by tool. Counted by the api.",
			"tool"),
		finished: counter("mcpq_tasks_finished_total",
			"Tasks that reached a terminal status (completed, failed, cancelled), by tool and status. Counted by the process that wrote the status: workers for completed and failed, the api for cancelled and for jobs that could not be queued.",
			"tool", "status"),
		run: histogram("mcpq_task_run_seconds",
			"Time a handler ran, by tool (one observation per run; input waits included).",
			prometheus.ExponentialBuckets(0.005, 4, 10), // 5ms … 22min
			"tool"),
		pickup: histogram("mcpq_task_pickup_seconds",
			"Time from a task's creation to its first handler start, by tool.",
			prometheus.ExponentialBuckets(0.001, 4, 10), // 1ms … 4.4min
			"tool"),
		inputWait: histogram("mcpq_task_input_wait_seconds",
			"Time a task spent input_required until the client's answers arrived, by tool.",
			prometheus.ExponentialBuckets(0.1, 4, 9), // 100ms … 1.8h
			"tool"),
		redeliver: counter("mcpq_task_redeliveries_total",
			"Handler starts of a task that had run before (attempt > 1: a lost worker, a lost lease, a failed outcome write), by tool.",
			"tool"),
		expired: counter("mcpq_task_lease_expiries_total",
			"Task leases found expired (the worker holding the task was lost), by tool.",
			"tool"),
		deferred: counter("mcpq_fair_share_deferrals_total",
			"Jobs a worker handed back for a second because their principal, or its tenant, held its share of the worker's slots (--principal-share, --tenant-share), by tool and level (principal or tenant). Counted by workers; each waiting job adds at most about one a second.",
			"tool", "level"),
		http: counter("mcpq_http_requests_total",
			"HTTP requests served, by method and status code.",
			"method", "code"),
	}
	reg.MustRegister(m.created, m.finished, m.run, m.pickup, m.inputWait, m.redeliver, m.expired, m.deferred, m.http)
	return m
}

// counter makes a counter vector with the given labels.
func counter(name, help string, labels ...string) *prometheus.CounterVec {
	return prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: help}, labels)
}

// histogram makes a histogram vector with the given buckets and labels.
func histogram(name, help string, buckets []float64, labels ...string) *prometheus.HistogramVec {
	return prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: name, Help: help, Buckets: buckets}, labels)
}

// TaskCreated counts a task whose record and job are both durable.
func (t *Telemetry) TaskCreated(tool string) {
	if t != nil && t.m != nil {
		t.m.created.WithLabelValues(tool).Inc()
	}
}

// TaskFinished counts a task this process turned terminal (status is
// completed, failed or cancelled) and tags the current span with it.
func (t *Telemetry) TaskFinished(ctx context.Context, tool, status string) {
	if t == nil {
		return
	}
	if t.m != nil {
		t.m.finished.WithLabelValues(tool, status).Inc()
	}
	if t.tracing() {
		trace.SpanFromContext(ctx).SetAttributes(attribute.String("mcpq.task.status", status))
	}
}

// TaskStarted records a handler start: the pickup latency (queued: since
// the task was created) on a task's first attempt, a redelivery on later
// ones.
func (t *Telemetry) TaskStarted(tool string, attempt int, queued time.Duration) {
	if t == nil || t.m == nil {
		return
	}
	if attempt > 1 {
		t.m.redeliver.WithLabelValues(tool).Inc()
		return
	}
	t.m.pickup.WithLabelValues(tool).Observe(queued.Seconds())
}

// TaskRan records how long one run of a handler took.
func (t *Telemetry) TaskRan(tool string, took time.Duration) {
	if t != nil && t.m != nil {
		t.m.run.WithLabelValues(tool).Observe(took.Seconds())
	}
}

// InputWaited records how long a task waited for the client's answers.
func (t *Telemetry) InputWaited(tool string, waited time.Duration) {
	if t != nil && t.m != nil {
		t.m.inputWait.WithLabelValues(tool).Observe(waited.Seconds())
	}
}

// LeaseExpired counts a task whose lease ran out without its worker
// finishing it: the reaper calls it for every task it takes back.
func (t *Telemetry) LeaseExpired(tool string) {
	if t != nil && t.m != nil {
		t.m.expired.WithLabelValues(tool).Inc()
	}
}

// FairShareDeferred counts a job handed back because its principal or its
// tenant (level) held its share of the worker's slots.
func (t *Telemetry) FairShareDeferred(tool, level string) {
	if t != nil && t.m != nil {
		t.m.deferred.WithLabelValues(tool, level).Inc()
	}
}

// InstrumentHTTP counts the requests h serves by method and status code
// (mcpq_http_requests_total). The wrapper keeps http.Flusher, so SSE
// responses still stream.
func (t *Telemetry) InstrumentHTTP(h http.Handler) http.Handler {
	if t == nil || t.m == nil {
		return h
	}
	return promhttp.InstrumentHandlerCounter(t.m.http, h)
}

// QueueDepth is one route's backlog as the broker reports it: Pending jobs
// are queued and not handed to a worker yet (including retries waiting out
// their delay), InFlight jobs are handed to a worker and not settled yet.
type QueueDepth struct {
	Pending  int64
	InFlight int64
}

// DepthFunc reports the depth of the given routes (tool names,
// "prompt/<name>" for prompts); a route the broker does not know yet may be
// missing from the map.
type DepthFunc func(ctx context.Context, routes []string) (map[string]QueueDepth, error)

// WatchQueue registers the queue gauges, read from depth on every scrape
// for the routes routes returns; with a nil depth (a broker that cannot
// tell) it does nothing:
//
//	mcpq_queue_pending{tool}   jobs queued, not yet handed to a worker
//	mcpq_queue_inflight{tool}  jobs handed to a worker, not yet settled
//	mcpq_queue_depth           the sum of mcpq_queue_pending
func (t *Telemetry) WatchQueue(depth DepthFunc, routes func(context.Context) ([]string, error)) {
	if t == nil || t.m == nil || depth == nil {
		return
	}
	t.m.reg.MustRegister(&depthCollector{depth: depth, routes: routes,
		total: prometheus.NewDesc("mcpq_queue_depth",
			"Jobs waiting for a worker (queued, not yet handed out) over every tool, read from the broker on scrape; the same figure on every process of one system.", nil, nil),
		pending: prometheus.NewDesc("mcpq_queue_pending",
			"Jobs of a tool queued and not yet handed to a worker (including retries waiting out their delay), read from the broker on scrape: the backlog an autoscaler of the tool's pool reads.", []string{"tool"}, nil),
		inflight: prometheus.NewDesc("mcpq_queue_inflight",
			"Jobs of a tool handed to a worker and not yet settled, read from the broker on scrape.", []string{"tool"}, nil),
	})
}

// depthCollector asks the broker for its depth on each scrape.
type depthCollector struct {
	depth                    DepthFunc
	routes                   func(context.Context) ([]string, error)
	total, pending, inflight *prometheus.Desc
}

func (c *depthCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.total
	ch <- c.pending
	ch <- c.inflight
}

// Collect leaves the gauges out when the broker does not answer in time: a
// missing sample is an honest "unknown", and the rest of the scrape stays.
func (c *depthCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	tools, err := c.routes(ctx)
	if err != nil {
		return
	}
	by, err := c.depth(ctx, tools)
	if err != nil {
		return
	}
	var total int64
	for _, tool := range tools {
		td, ok := by[tool]
		if !ok {
			continue
		}
		total += td.Pending
		ch <- prometheus.MustNewConstMetric(c.pending, prometheus.GaugeValue, float64(td.Pending), tool)
		ch <- prometheus.MustNewConstMetric(c.inflight, prometheus.GaugeValue, float64(td.InFlight), tool)
	}
	ch <- prometheus.MustNewConstMetric(c.total, prometheus.GaugeValue, float64(total))
}
