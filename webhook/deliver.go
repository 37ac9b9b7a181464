package webhook

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

	"github.com/mcpqueue/mcpqueue/internal/slogzero"
	"github.com/mcpqueue/mcpqueue/taskstate"
)

// Config tunes a Deliverer. Allow and Key are required.
type Config struct {
	// Allow is where deliveries may go; each connection's address is
	// checked against it again (see AllowList).
	Allow *AllowList
	// Key signs every attempt (ParseSecret of --webhook-secret).
	Key []byte
	// RetryBase is the wait after the first failed attempt; each later
	// failure doubles it, up to RetryMax. Default 5s.
	RetryBase time.Duration
	// RetryMax caps the wait between attempts. Default 1h.
	RetryMax time.Duration
	// RetryFor is how long after its first attempt a delivery is retried
	// before it is given up. Default 24h.
	RetryFor time.Duration
	// Interval is the wait between passes over the outbox. Default 1s.
	Interval time.Duration
	// Timeout bounds one attempt (connect, send, response headers).
	// Default 10s.
	Timeout time.Duration
	// Concurrency is how many attempts one pass makes at once. Default 16.
	Concurrency int
	// Holder names this Deliverer for the store's "webhook" lease
	// (taskstate.Leaser): only the holder delivers. Default: random.
	Holder string
	// Registerer, when set, gets the metrics mcpq_webhook_deliveries_total,
	// mcpq_webhook_failures_total and mcpq_webhook_pending.
	Registerer prometheus.Registerer
	// Logger gets the log lines; Slog, when set, instead. Default: none.
	Logger zerolog.Logger
	Slog   *slog.Logger
	// Now is the clock. Default time.Now.
	Now func() time.Time
}

// Deliverer sends the completion webhooks of a store's outbox
// (taskstate.Outbox): each pending delivery whose task is terminal is
// POSTed, signed (Sign), until the receiver answers 2xx, with retries
// (RetryBase, doubling) for RetryFor. A delivery is removed only after
// its receiver took it or it was given up, so a Deliverer that dies
// mid-attempt leaves it to the next holder of the lease: delivery is at
// least once, and every attempt of one delivery carries the same
// webhook-id and body.
type Deliverer struct {
	store  taskstate.Store
	outbox taskstate.Outbox
	cfg    Config
	client *http.Client
	log    zerolog.Logger
	m      *metrics

	mu      sync.Mutex
	waiting map[string]recheck // tasks found not terminal: when to look again
}

// recheck is when a delivery whose task was still running is looked at
// next, and how long the wait before that was.
type recheck struct {
	at   time.Time
	wait time.Duration
}

// ErrNoOutbox is New's refusal of a store without taskstate.Outbox.
var ErrNoOutbox = errors.New("webhook: the store keeps no outbox (taskstate.Outbox)")

// New returns a Deliverer of store's outbox.
func New(store taskstate.Store, cfg *Config) (*Deliverer, error) {
	o, ok := store.(taskstate.Outbox)
	if !ok {
		return nil, ErrNoOutbox
	}
	var c Config
	if cfg != nil {
		c = *cfg
	}
	if c.Allow == nil || len(c.Key) == 0 {
		return nil, errors.New("webhook: a Deliverer needs an AllowList and a Key")
	}
	c.RetryBase = cmp.Or(max(c.RetryBase, 0), 5*time.Second)
	c.RetryMax = cmp.Or(max(c.RetryMax, 0), time.Hour)
	c.RetryFor = cmp.Or(max(c.RetryFor, 0), 24*time.Hour)
	c.Interval = cmp.Or(max(c.Interval, 0), time.Second)
	c.Timeout = cmp.Or(max(c.Timeout, 0), 10*time.Second)
	c.Concurrency = cmp.Or(max(c.Concurrency, 0), 16)
	if c.Holder == "" {
		c.Holder = "webhook-" + taskstate.NewID()[:16]
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	d := &Deliverer{
		store: store, outbox: o, cfg: c, log: slogzero.Logger(c.Logger, c.Slog),
		client: newClient(c.Allow, c.Timeout), m: newMetrics(c.Registerer),
		waiting: map[string]recheck{},
	}
	return d, nil
}

// newClient is the HTTP client of deliveries: no proxy (it would dial for
// us), every dialled address checked against allow, no redirects followed.
func newClient(allow *AllowList, timeout time.Duration) *http.Client {
	dialer := &net.Dialer{Timeout: timeout, Control: allow.control}
	return &http.Client{
		Timeout: timeout,
		Transport: &http.Transport{
			Proxy:               nil,
			DialContext:         dialer.DialContext,
			TLSHandshakeTimeout: timeout,
			MaxIdleConnsPerHost: 4,
			IdleConnTimeout:     time.Minute,
		},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
}

// lease is the name of the lease the Deliverers of one store share.
const lease = "webhook"

// Run makes a pass every Interval until ctx ends, while it holds the
// store's "webhook" lease (taken for three Intervals and a Timeout, and
// renewed before each pass; a store without leases lets every Deliverer deliver, which
// costs duplicates, not losses).
func (d *Deliverer) Run(ctx context.Context) {
	t := time.NewTimer(d.cfg.Interval)
	defer t.Stop()
	held := false
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		now := d.holdsLease(ctx)
		if now && !held {
			d.mu.Lock()
			clear(d.waiting) // another holder may have delivered meanwhile: look at everything
			d.mu.Unlock()
		}
		held = now
		if !held {
			d.m.pending.Set(0) // the holder reports the outbox
		}
		if held {
			if _, err := d.Pass(ctx); err != nil && ctx.Err() == nil {
				d.log.Warn().Err(err).Msg("webhook pass failed")
			}
		}
		t.Reset(d.cfg.Interval)
	}
}

func (d *Deliverer) holdsLease(ctx context.Context) bool {
	l, ok := d.store.(taskstate.Leaser)
	if !ok {
		return true
	}
	// A pass may wait out one attempt's Timeout: the lease outlives it,
	// so no other Deliverer starts the same attempts meanwhile.
	held, err := l.Lease(ctx, lease, d.cfg.Holder, 3*d.cfg.Interval+d.cfg.Timeout)
	if err != nil {
		if ctx.Err() == nil {
			d.log.Warn().Err(err).Msg("webhook lease: delivering anyway")
		}
		return true
	}
	return held
}

// PassStats counts what one pass saw and did.
type PassStats struct {
	Pending   int // deliveries in the outbox
	Attempted int // POSTs made
	Delivered int // taken by their receivers
	GaveUp    int // given up: retried for RetryFor, or their task is gone
}

// Pass goes once over the outbox: every delivery that is due and whose
// task is terminal is attempted. It reads the record of each pending
// delivery (less often while the task runs on), so its cost follows the
// pending deliveries, not the records stored.
func (d *Deliverer) Pass(ctx context.Context) (PassStats, error) {
	var st PassStats
	var due []*taskstate.Delivery
	now := d.cfg.Now()
	err := d.outbox.Deliveries(ctx, func(dv *taskstate.Delivery) bool {
		st.Pending++
		if dv.NextAt.After(now) || !d.recheckDue(dv.TaskID, now) {
			return true
		}
		due = append(due, dv)
		return true
	})
	d.m.pending.Set(float64(st.Pending))
	if err != nil {
		return st, err
	}
	var mu sync.Mutex
	var wg sync.WaitGroup
	sem := make(chan struct{}, d.cfg.Concurrency)
	for _, dv := range due {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			out := d.attempt(ctx, dv)
			mu.Lock()
			defer mu.Unlock()
			st.Attempted += out.attempted
			st.Delivered += out.delivered
			st.GaveUp += out.gaveUp
		})
	}
	wg.Wait()
	return st, ctx.Err()
}

// recheckDue reports whether a delivery whose task was found running is
// to be looked at again now.
func (d *Deliverer) recheckDue(id string, now time.Time) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	r, ok := d.waiting[id]
	return !ok || !now.Before(r.at)
}

// running notes that id's task was not terminal at now: it is looked at
// again after twice the last wait, from Interval up to ten Intervals.
func (d *Deliverer) running(id string, now time.Time) {
	d.mu.Lock()
	defer d.mu.Unlock()
	r := d.waiting[id]
	r.wait = min(max(2*r.wait, d.cfg.Interval), 10*d.cfg.Interval)
	r.at = now.Add(r.wait)
	d.waiting[id] = r
}

func (d *Deliverer) forget(id string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	delete(d.waiting, id)
}

// outcome is what one delivery's turn in a pass did.
type outcome struct{ attempted, delivered, gaveUp int }

// orphanGrace is how old a delivery whose record is missing must be
// before it is dropped: younger, its Create may still be under way.
const orphanGrace = time.Minute

// attempt makes one delivery's turn: its body is made from its terminal
// record at the first attempt, then POSTed; the outcome is written back.
func (d *Deliverer) attempt(ctx context.Context, dv *taskstate.Delivery) outcome {
	now := d.cfg.Now()
	log := d.log.With().Str("task", dv.TaskID).Str("url", dv.URL).Logger()
	if len(dv.Body) == 0 {
		t, err := d.store.Get(ctx, dv.TaskID)
		switch {
		case errors.Is(err, taskstate.ErrNotFound):
			if now.Sub(dv.CreatedAt) < orphanGrace {
				return outcome{}
			}
			log.Warn().Msg("webhook dropped: its task is gone (never created, or expired before it ended)")
			d.remove(ctx, dv, "task_gone")
			return outcome{gaveUp: 1}
		case err != nil:
			log.Warn().Err(err).Msg("webhook: reading the task")
			return outcome{}
		case !t.Status.Terminal():
			d.running(dv.TaskID, now)
			return outcome{}
		}
		if dv.Body, err = Payload(t); err != nil {
			log.Error().Err(err).Msg("webhook: encoding the payload")
			return outcome{}
		}
		dv.FirstAt = now
	}
	err := d.post(ctx, dv, now)
	dv.Attempts++
	if err == nil {
		d.m.deliveries.WithLabelValues("delivered").Inc()
		log.Info().Int("attempts", dv.Attempts).Msg("webhook delivered")
		d.remove(ctx, dv, "")
		return outcome{attempted: 1, delivered: 1}
	}
	d.m.failures.WithLabelValues(failureReason(err)).Inc()
	dv.LastError = err.Error()
	if now.Sub(dv.FirstAt) >= d.cfg.RetryFor {
		log.Error().Err(err).Int("attempts", dv.Attempts).Msg("webhook given up: retried for --webhook-retry-for")
		d.remove(ctx, dv, "gave_up")
		return outcome{attempted: 1, gaveUp: 1}
	}
	wait := d.backoff(dv.Attempts)
	dv.NextAt = now.Add(wait)
	log.Warn().Err(err).Int("attempts", dv.Attempts).Dur("retry_in", wait).Msg("webhook attempt failed")
	if err := d.outbox.PutDelivery(ctx, dv); err != nil && !errors.Is(err, taskstate.ErrNotFound) {
		log.Warn().Err(err).Msg("webhook: writing the attempt back")
	}
	return outcome{attempted: 1}
}

// backoff is the wait after the n-th failed attempt: RetryBase doubled
// n-1 times, at most RetryMax.
func (d *Deliverer) backoff(n int) time.Duration {
	wait := d.cfg.RetryBase
	for i := 1; i < n && wait < d.cfg.RetryMax; i++ {
		wait *= 2
	}
	return min(wait, d.cfg.RetryMax)
}

// remove takes a finished delivery out of the outbox; gaveUp, when set,
// is the reason it was given up (a metric label).
func (d *Deliverer) remove(ctx context.Context, dv *taskstate.Delivery, gaveUp string) {
	d.forget(dv.TaskID)
	if gaveUp != "" {
		d.m.deliveries.WithLabelValues(gaveUp).Inc()
	}
	if err := d.outbox.RemoveDelivery(ctx, dv.TaskID); err != nil {
		d.log.Warn().Err(err).Str("task", dv.TaskID).Msg("webhook: removing a finished delivery (it may be sent again)")
	}
}

// StatusError is an attempt's failure by the receiver's answer.
type StatusError struct{ Code int }

func (e *StatusError) Error() string {
	return fmt.Sprintf("the receiver answered HTTP %d", e.Code)
}

// post sends one signed attempt of dv: nil when the receiver answered 2xx.
func (d *Deliverer) post(ctx context.Context, dv *taskstate.Delivery, now time.Time) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, dv.URL, bytes.NewReader(dv.Body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "mcpqueue-webhook")
	SetHeaders(req.Header, d.cfg.Key, DeliveryID(dv.TaskID), now, dv.Body)
	resp, err := d.client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return &StatusError{Code: resp.StatusCode}
	}
	return nil
}

// DeliveryID is the webhook-id of a task's completion webhook: the same
// on every attempt, so a receiver drops retries it has seen.
func DeliveryID(taskID string) string { return "msg_" + taskID }

// failureReason names an attempt's failure for the failures metric.
func failureReason(err error) string {
	var se *StatusError
	var ne net.Error
	switch {
	case errors.As(err, &se) && se.Code >= 500:
		return "http_5xx"
	case errors.As(err, &se) && se.Code >= 300 && se.Code < 400:
		return "redirect"
	case errors.As(err, &se):
		return "http_4xx"
	case errors.Is(err, ErrNotAllowed):
		return "address_not_allowed"
	case errors.As(err, &ne) && ne.Timeout():
		return "timeout"
	default:
		return "connect"
	}
}

// MaxInlineResult is the largest result a payload carries; a larger one
// (or one kept in a blob) is left out, its size said, to be read with
// tasks/result.
const MaxInlineResult = 64 << 10

// Payload is the body of a task's completion webhook: {taskId, status,
// statusMessage, tool, result or resultOmitted, error}.
func Payload(t *taskstate.Task) ([]byte, error) {
	p := struct {
		Type          string              `json:"type"`
		TaskID        string              `json:"taskId"`
		Tool          string              `json:"tool,omitempty"`
		Status        taskstate.Status    `json:"status"`
		StatusMessage string              `json:"statusMessage,omitempty"`
		Result        json.RawMessage     `json:"result,omitempty"`
		ResultOmitted *omitted            `json:"resultOmitted,omitempty"`
		Error         *taskstate.RPCError `json:"error,omitempty"`
		LastUpdatedAt time.Time           `json:"lastUpdatedAt"`
	}{
		Type: "io.mcpqueue/task." + string(t.Status), TaskID: t.ID, Tool: t.Tool, Status: t.Status,
		StatusMessage: t.StatusMessage, Error: t.Error, LastUpdatedAt: t.LastUpdatedAt,
	}
	switch {
	case t.ResultRef != nil:
		p.ResultOmitted = &omitted{Size: t.ResultRef.Size, ReadWith: "tasks/result"}
	case len(t.Result) > MaxInlineResult:
		p.ResultOmitted = &omitted{Size: int64(len(t.Result)), ReadWith: "tasks/result"}
	default:
		p.Result = t.Result
	}
	return json.Marshal(p)
}

// omitted stands for a result too large for the payload.
type omitted struct {
	Size     int64  `json:"size"`
	ReadWith string `json:"readWith"`
}

// metrics are a Deliverer's collectors.
type metrics struct {
	deliveries *prometheus.CounterVec
	failures   *prometheus.CounterVec
	pending    prometheus.Gauge
}

func newMetrics(reg prometheus.Registerer) *metrics {
	m := &metrics{
		deliveries: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "mcpq_webhook_deliveries_total",
			Help: "Completion webhooks finished, by outcome: delivered (the receiver answered 2xx), gave_up (retried for --webhook-retry-for), task_gone (the task never existed or expired first). Counted by the api holding the webhook lease."},
			[]string{"outcome"}),
		failures: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "mcpq_webhook_failures_total",
			Help: "Failed webhook attempts (each is retried), by reason: http_5xx, http_4xx, redirect (not followed), timeout, connect, address_not_allowed."},
			[]string{"reason"}),
		pending: prometheus.NewGauge(prometheus.GaugeOpts{Name: "mcpq_webhook_pending",
			Help: "Completion webhooks in the outbox (tasks not yet ended, and deliveries waiting for a retry), as the api holding the webhook lease saw it at its last pass; 0 on the other replicas."}),
	}
	if reg != nil {
		reg.MustRegister(m.deliveries, m.failures, m.pending)
	}
	return m
}
