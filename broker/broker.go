// Package broker defines how a tool call travels to a worker. A Queue carries
// jobs (a Job is one tool call, routed by tool) to the workers that serve the
// tool, in the delivery vocabulary ack, retry, terminate and extend; a Bus
// carries the signals between the front end and workers (cancel broadcasts,
// notifications for a waiting request, resource changes) on topics. It
// imports only the standard library; the implementations live in
// sub-packages (natsbroker, asynqbroker) and all pass the contract suite in
// brokertest.
package broker

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// Job is one tool call to run. Its dedupe key (DedupeKey: Dedupe, or TaskID
// when that is empty) makes publishing the same job twice within the
// queue's dedupe window enqueue it once.
type Job struct {
	TaskID string `json:"taskId"`
	// Dedupe overrides the dedupe key. A reaper that republishes a task
	// whose worker was lost sets it (task id + attempt), so the new job is
	// not mistaken for the original still held by the broker.
	Dedupe string `json:"dedupe,omitempty"`
	// Kind is "" for a tool call, "prompt" for prompts/get.
	Kind      string          `json:"kind,omitempty"`
	Tool      string          `json:"tool"`
	Arguments json.RawMessage `json:"arguments,omitempty"`
	// ArgumentsRef names the blob holding the arguments instead, when
	// they are too large for a job (taskstate.Blobs).
	ArgumentsRef string `json:"argumentsRef,omitempty"`
	Owner        string `json:"owner,omitempty"`
	// Meta carries request context (trace parent, progress token).
	Meta map[string]json.RawMessage `json:"meta,omitempty"`
	// Record, when set, is the task's record as the producer stored it
	// (the store's encoding, opaque to the queue) at store revision
	// Revision; a worker of a Withdrawer queue starts from it instead of
	// reading the record. It holds the call's Arguments and Meta, so a
	// queue that carries it may send it in their place (natsbroker
	// does); it is not part of the JSON form (EncodeJob), and a delivery
	// of a queue that does not carry it has none.
	Record   json.RawMessage `json:"-"`
	Revision uint64          `json:"-"`
	// NotBefore, when set, is the time before which the job must not run
	// (a scheduled call, issue #32 item 1). A Scheduler queue holds it
	// until then; any other queue hands it out as usual, and the worker
	// defers a delivery that comes early.
	NotBefore time.Time `json:"notBefore,omitzero"`
}

// Route is what the queue routes the job by: the tool's name, or
// "prompt/<name>" for a prompt (the catalog key), so a tool and a prompt of
// one name never share a route.
func (j *Job) Route() string {
	if j.Kind == "" || j.Kind == "tool" {
		return j.Tool
	}
	return j.Kind + "/" + j.Tool
}

// DedupeKey is the key the queue dedupes the job by.
func (j *Job) DedupeKey() string {
	if j.Dedupe != "" {
		return j.Dedupe
	}
	return j.TaskID
}

// EncodeJob is a job's wire form, for a Queue implementation's Enqueue: its
// JSON, or an error for a job without a task id or a tool (no queue takes
// one) or one that does not encode.
func EncodeJob(j *Job) ([]byte, error) {
	if j == nil || j.TaskID == "" || j.Tool == "" {
		return nil, errors.New("broker: enqueue: a job needs a task id and a tool")
	}
	b, err := json.Marshal(j)
	if err != nil {
		return nil, fmt.Errorf("broker: enqueue: %w", err)
	}
	return b, nil
}

// Queue is the durable job queue.
type Queue interface {
	// Enqueue returns once the job is durably accepted by the broker.
	Enqueue(ctx context.Context, job *Job) error
	// Consumer returns a handle from which a worker pulls jobs.
	Consumer(ctx context.Context, opts ConsumerOptions) (Consumer, error)
}

// Holder is implemented by queues that can tell whether they still hold a
// task's job: waiting, scheduled for a retry, or handed out and not yet
// settled. The reaper asks before it republishes a job that no worker seems
// to have taken, so a long backlog is not flooded with copies.
type Holder interface {
	// Holds reports whether a job of the task with the given dedupe key
	// (see Job.DedupeKey) is still in the queue. route (the tool's catalog
	// key) routes the lookup for queues that keep tools apart.
	Holds(ctx context.Context, route, taskID, dedupe string) (bool, error)
}

// Withdrawer is implemented by queues that can take back the jobs of a
// task before any worker has them: the producer withdraws a cancelled
// task's jobs. A worker of such a queue starts the first delivery of a
// task's first job from the record the job carries (Job.Record) without
// reading it: a cancel written before the job reached the worker has
// withdrawn it, and any other change since the create fails the run's
// first compare-and-set on Job.Revision, which then reads the record.
type Withdrawer interface {
	// Withdraw removes the jobs of task taskID on route (see Holder)
	// that no worker has settled, waiting or handed out: the task has
	// ended, so nothing is to run them again.
	Withdraw(ctx context.Context, route, taskID string) error
}

// Scheduler is implemented by queues that keep a job whose NotBefore is
// still ahead out of every consumer's reach until then (Asynq's scheduled
// set), durably, so the producer enqueues a scheduled call's job at once.
// A queue without it gets the job only when it is due (the producer's
// reaper publishes it). Unschedule takes back such a job before it is
// due: the task was cancelled (issue #32 item 1).
type Scheduler interface {
	// Unschedule removes the job of task taskID on route (see Holder)
	// while it still waits for its NotBefore; a job that is due, handed
	// out or gone is left alone, and no error.
	Unschedule(ctx context.Context, route, taskID string) error
}

// ConsumerOptions tunes a worker's subscription. Zero values are defaults.
type ConsumerOptions struct {
	// Tools are the tools this consumer takes jobs of, each with its own
	// settings; a job of any other tool is never handed to it, and stays
	// queued until a consumer of its tool takes it. At least one is
	// required, and a tool name may appear once.
	Tools []ToolRoute
	// Lease is how long a delivery stays with one worker without Extend before
	// the broker hands it to another, for tools that set none. Default 30s.
	Lease time.Duration
	// MaxDeliveries bounds how often a job is handed out, for tools that
	// set none. Default 5; negative: no bound (for workers that count
	// attempts themselves).
	MaxDeliveries int
	// Slots is how many goroutines call Next: the consumer never holds more
	// undelivered-to-Next jobs than it must (see the implementations) and
	// never hands out more than Slots at once. 0 lets the implementation
	// choose.
	Slots int
	// Pool is the pool the consumer's worker belongs to: a queue that keeps
	// one queue per pool (Asynq) takes the consumer's jobs from that pool's
	// queue; one that routes by tool alone (JetStream) ignores it. A plain
	// name (SafeName); "" is DefaultPool.
	Pool string
}

// DefaultPool is the pool of a consumer (and a worker) that names none.
const DefaultPool = "default"

// PoolOf is opts.Pool, or DefaultPool when it is empty.
func (o ConsumerOptions) PoolOf() string { return cmp.Or(o.Pool, DefaultPool) }

// ToolRoute is one tool a consumer serves and the broker settings of its
// jobs. Lease and MaxDeliveries are the tool's own (0: the consumer's), not
// a property of the whole queue, so pools that serve different tools never
// overwrite each other's settings.
type ToolRoute struct {
	// Tool is the route of the jobs (Job.Route): a tool's name, or
	// "prompt/<name>".
	Tool  string
	Lease time.Duration
	// MaxDeliveries: 0 takes the consumer's; negative is no bound.
	MaxDeliveries int
	// MaxConcurrency bounds this consumer's deliveries of the tool that are
	// handed out and not yet settled (a GPU tool one at a time while other
	// tools use the remaining slots). 0: only Slots bounds it.
	MaxConcurrency int
}

// Settings is the lease and delivery bound of route r's jobs under o: the
// route's own, else the consumer's, else the defaults (30s, 5 deliveries).
// No bound (a negative setting) is -1.
func (o ConsumerOptions) Settings(r ToolRoute) (lease time.Duration, maxDeliveries int) {
	lease = cmp.Or(max(r.Lease, 0), max(o.Lease, 0), 30*time.Second)
	maxDeliveries = cmp.Or(r.MaxDeliveries, o.MaxDeliveries, 5)
	if maxDeliveries < 0 {
		maxDeliveries = -1
	}
	return lease, maxDeliveries
}

// CheckRoutes validates opts.Tools: at least one, each named, no name twice,
// no negative setting, and a pool that is "" or a plain name.
// Implementations call it first.
func CheckRoutes(opts ConsumerOptions) error {
	if opts.Pool != "" && !SafeName(opts.Pool) {
		return fmt.Errorf("broker: consumer: pool %q is not a plain name (letters, digits, _ and -)", opts.Pool)
	}
	if len(opts.Tools) == 0 {
		return errors.New("broker: consumer: no tools (ConsumerOptions.Tools is empty)")
	}
	seen := make(map[string]bool, len(opts.Tools))
	for _, r := range opts.Tools {
		switch {
		case r.Tool == "":
			return errors.New("broker: consumer: a tool route without a tool name")
		case seen[r.Tool]:
			return fmt.Errorf("broker: consumer: tool %q routed twice", r.Tool)
		case r.Lease < 0 || r.MaxConcurrency < 0:
			return fmt.Errorf("broker: consumer: tool %q: negative lease or concurrency", r.Tool)
		}
		seen[r.Tool] = true
	}
	return nil
}

// Consumer hands out one job per call to Next: one per free worker slot.
type Consumer interface {
	// Next blocks until a job is available or ctx ends.
	Next(ctx context.Context) (Delivery, error)
}

// Delivery is one hand-out of a job to a worker.
type Delivery interface {
	Job() *Job
	// Delivered counts deliveries of this job, this one included (1 on the
	// first). A run of a handler is an attempt (taskstate.Task.Attempt);
	// a delivery is a hand-out by the queue.
	Delivered() int
	// Ack removes the job: it is done, whatever the outcome.
	Ack(ctx context.Context) error
	// Retry returns the job to the queue to be delivered again after delay.
	Retry(ctx context.Context, delay time.Duration) error
	// Term removes the job without running it again.
	Term(ctx context.Context, reason string) error
	// Extend renews the lease.
	Extend(ctx context.Context) error
}

// Deferrer is an optional ability of a Delivery: Defer returns the job to
// the queue to be delivered again after delay without counting this
// delivery against MaxDeliveries, for a job the worker chose not to run yet
// (its principal holds its share of the slots) rather than one that failed.
// A delivery without it is deferred with Retry.
type Deferrer interface {
	Defer(ctx context.Context, delay time.Duration) error
}

// Redeliverer is an optional ability of a Delivery: its broker itself hands
// the job out again once the route's lease lapses without an ack or an
// Extend (JetStream's ack wait), so a run lost with its worker comes back
// without anyone reading a lease off the task record. A worker may then
// defer writing its take (consumer's lazy take); without it, the record's
// lease is how a lost run is found, and the take is written first.
type Redeliverer interface {
	RedeliversAfterLease()
}

// Topic names a bus channel.
type Topic string

const (
	// TopicCancel carries cancellations: a task was cancelled; every worker hears it.
	TopicCancel Topic = "cancel"
	// TopicNotify carries a JSON-RPC notification (progress, log message) for the
	// request waiting on a task, forwarded by whichever api replica holds it.
	// An empty message ends a task's notifications: it follows the outcome
	// write, so a subscriber that sees it has seen every notification.
	TopicNotify Topic = "notify"
)

// Bus carries signals keyed by task id. Delivery is best effort: anything that
// must not be lost is also written to the task record first.
type Bus interface {
	Publish(ctx context.Context, topic Topic, taskID string, data []byte) error
	// Subscribe calls fn for every message on topic for taskID, or for every
	// task when taskID is "". It returns once the subscription is live.
	Subscribe(ctx context.Context, topic Topic, taskID string, fn func(taskID string, data []byte)) (Subscription, error)
}

// Subscription ends with Close.
type Subscription interface{ Close() error }

// SafeName reports whether s is one plain name — not empty, and only ASCII
// letters, digits, "_" and "-" — so that it cannot widen a wildcard
// subscription or reach another channel when a bus puts it into a subject or
// channel name, and is safe in an HTTP header or a store key. Every task id
// taskstate.NewID makes is one; taskstate.ValidID applies the same rule (its
// test holds the two together, since neither seam imports the other).
func SafeName(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

// ErrClosed is returned by Next once the consumer can deliver no more.
var ErrClosed = errors.New("broker: closed")
