package natsbroker

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/mcpqueue/mcpqueue/broker"
	"github.com/mcpqueue/mcpqueue/internal/jsdurable"
)

// Config names the stream and subjects. A nil Config is valid.
type Config struct {
	// Prefix is what every name derives from (see Names). Default "mcpq".
	Prefix string
	// Stream, Subject and BusPrefix override the names derived from
	// Prefix; leave them empty.
	Stream, Subject, BusPrefix string
	// Duplicates is the dedupe window for task ids. Default 10m.
	Duplicates time.Duration
	// Replicas for the stream: 3 on a 3-node cluster keeps every
	// acknowledged job through the loss of one node. Default 1. An existing
	// stream is updated to this count.
	Replicas int
	// Memory keeps the stream in memory instead of files: a NATS restart
	// loses every queued job. JetStream cannot change the storage type of
	// an existing stream, so NewQueue refuses one that differs
	// (*jsdurable.StorageMismatchError).
	Memory bool
}

// Names are the JetStream and NATS names of one system.
type Names struct {
	Stream    string // the job stream
	Subject   string // job subjects start with Subject + "."
	BusPrefix string // bus subjects start with BusPrefix + "."
}

// NamesFor derives the names from a prefix ("" is "mcpq").
func NamesFor(prefix string) Names {
	if prefix == "" {
		prefix = "mcpq"
	}
	return Names{Stream: strings.ToUpper(prefix) + "_JOBS", Subject: prefix + ".jobs", BusPrefix: prefix + ".bus"}
}

// ToolSubjects is the filter of a tool's jobs: <Subject>.<token>.>.
func (n Names) ToolSubjects(tool string) string { return n.Subject + "." + Token(tool) + ".>" }

// ConsumerName is the durable consumer of a tool's jobs: tool_<token>. An
// autoscaler of the pool that serves the tool reads its pending count.
func ConsumerName(tool string) string { return "tool_" + Token(tool) }

// Token maps a tool name onto one subject token that no other tool name
// maps onto: the name itself when it holds only letters, digits, "_" and
// "-", else the name with every other character replaced by "_", then "_"
// and the first 8 hex digits of the name's SHA-256.
func Token(tool string) string {
	plain := true
	t := strings.Map(func(r rune) rune {
		if r >= 'A' && r <= 'Z' || r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '_' || r == '-' {
			return r
		}
		plain = false
		return '_'
	}, tool)
	if plain && tool != "" {
		return t
	}
	sum := sha256.Sum256([]byte(tool))
	return t + "_" + hex.EncodeToString(sum[:4])
}

func (c *Config) withDefaults() Config {
	var out Config
	if c != nil {
		out = *c
	}
	n := NamesFor(out.Prefix)
	out.Stream = cmp.Or(out.Stream, n.Stream)
	out.Subject = cmp.Or(out.Subject, n.Subject)
	out.BusPrefix = cmp.Or(out.BusPrefix, n.BusPrefix)
	out.Duplicates = cmp.Or(max(out.Duplicates, 0), 10*time.Minute)
	out.Replicas = cmp.Or(max(out.Replicas, 0), 1)
	return out
}

func (c *Config) names() Names {
	return Names{Stream: c.Stream, Subject: c.Subject, BusPrefix: c.BusPrefix}
}

// Queue is the JetStream implementation of broker.Queue.
type Queue struct {
	js     jetstream.JetStream
	stream jetstream.Stream
	cfg    Config
}

var (
	_ broker.Queue      = (*Queue)(nil)
	_ broker.Holder     = (*Queue)(nil)
	_ broker.Withdrawer = (*Queue)(nil)
)

// NewQueue creates (or updates) the job stream.
func NewQueue(ctx context.Context, js jetstream.JetStream, cfg *Config) (*Queue, error) {
	c := cfg.withDefaults()
	storage := jsdurable.Storage(c.Memory)
	want := jetstream.StreamConfig{
		Name:        c.Stream,
		Description: "mcpqueue jobs: one message per task, removed on ack",
		Subjects:    []string{c.Subject + ".>"},
		Retention:   jetstream.WorkQueuePolicy,
		Storage:     storage,
		Replicas:    c.Replicas,
		Duplicates:  c.Duplicates,
	}
	// Every process of a system calls this as it starts, often together:
	// update the stream only when it differs (each update is a replicated
	// configuration change).
	var st jetstream.Stream
	err := jsdurable.Retry(ctx, func(ctx context.Context) (err error) {
		if err := jsdurable.CheckStorage(ctx, js, c.Stream, storage); err != nil {
			return err
		}
		st, err = js.Stream(ctx, c.Stream)
		if err == nil && !streamMatches(st.CachedInfo().Config, want) || errors.Is(err, jetstream.ErrStreamNotFound) {
			st, err = js.CreateOrUpdateStream(ctx, want)
		}
		return err
	})
	var mismatch *jsdurable.StorageMismatchError
	if errors.As(err, &mismatch) {
		return nil, fmt.Errorf("natsbroker: %w", err)
	}
	if err != nil {
		return nil, fmt.Errorf("natsbroker: stream %s: %w", c.Stream, jsdurable.ExplainReplicas(err, c.Replicas))
	}
	return &Queue{js: js, stream: st, cfg: c}, nil
}

// Names are the names this queue uses.
func (q *Queue) Names() Names { return q.cfg.names() }

// Enqueue publishes the job and waits for the stream's ack.
func (q *Queue) Enqueue(ctx context.Context, job *broker.Job) error {
	b, err := encodeJob(job)
	if err != nil {
		return fmt.Errorf("natsbroker: %w", err)
	}
	if _, err := q.js.Publish(ctx, q.jobSubject(job.Route(), job.TaskID), b, jetstream.WithMsgID(job.DedupeKey())); err != nil {
		return fmt.Errorf("natsbroker: enqueue %s: %w", job.TaskID, err)
	}
	return nil
}

// jobSubject is where a task's jobs go: <Subject>.<token>.<task id>. One
// subject per task lets Holds find a job without reading the queue, and
// operators filter by tool with <Subject>.<token>.>.
func (q *Queue) jobSubject(tool, taskID string) string {
	return q.cfg.Subject + "." + Token(tool) + "." + taskID
}

// Holds implements broker.Holder: a work-queue stream keeps a job until it
// is acked, so any message on the task's subject is a job still held
// (waiting or handed out). Requeues share the subject, so dedupe is moot.
func (q *Queue) Holds(ctx context.Context, tool, taskID, _ string) (bool, error) {
	_, err := q.stream.GetLastMsgForSubject(ctx, q.jobSubject(tool, taskID))
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("natsbroker: holds %s: %w", taskID, err)
	}
	return true, nil
}

// Withdraw implements broker.Withdrawer: it purges the task's subject, so
// a job waiting there (or handed out and not acked) is gone.
func (q *Queue) Withdraw(ctx context.Context, tool, taskID string) error {
	if !broker.SafeName(taskID) {
		return fmt.Errorf("natsbroker: withdraw: invalid task id %q", taskID)
	}
	if err := q.stream.Purge(ctx, jetstream.WithPurgeSubject(q.jobSubject(tool, taskID))); err != nil {
		return fmt.Errorf("natsbroker: withdraw %s: %w", taskID, err)
	}
	return nil
}

func streamMatches(have, want jetstream.StreamConfig) bool {
	return have.Description == want.Description && slices.Equal(have.Subjects, want.Subjects) &&
		have.Retention == want.Retention && have.Storage == want.Storage &&
		have.Replicas == want.Replicas && have.Duplicates == want.Duplicates
}
