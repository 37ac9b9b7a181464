package natskv

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/mcpqueue/mcpqueue/internal/jsdurable"
	"github.com/mcpqueue/mcpqueue/taskstate"
)

// Config names the buckets. A nil Config is valid.
type Config struct {
	// Prefix is what the bucket names derive from: <prefix>_tasks,
	// <prefix>_tools, <prefix>_tasks_owners, <prefix>_tasks_sessions.
	// Default "mcpq".
	Prefix string
	// TaskBucket holds task records. Default <prefix>_tasks.
	TaskBucket string
	// ToolBucket holds the tool catalog. Default <prefix>_tools.
	ToolBucket string
	// ToolRetention is how long a catalog entry is kept after its last
	// refresh: a tool whose workers are all gone (a pool scaled to zero)
	// stays listed and callable this long. Default 7 days (DefaultToolRetention).
	ToolRetention time.Duration
	// OwnerBucket indexes tasks by owner (tasks/list). Default TaskBucket+"_owners".
	OwnerBucket string
	// SessionBucket holds 2025-11-25 sessions. Default TaskBucket+"_sessions".
	SessionBucket string
	// SessionTTL is a session's lifetime. Default 24h.
	SessionTTL time.Duration
	// Replicas of every bucket: 3 on a 3-node cluster keeps every
	// acknowledged write through the loss of one node. Default 1. Existing
	// buckets are updated to this count.
	Replicas int
	// Memory stores the buckets in memory instead of files: a NATS restart
	// loses every record. JetStream cannot change the storage type of an
	// existing bucket, so New refuses one that differs.
	Memory bool
}

func (c *Config) withDefaults() Config {
	var out Config
	if c != nil {
		out = *c
	}
	if out.Prefix == "" {
		out.Prefix = "mcpq"
	}
	if out.TaskBucket == "" {
		out.TaskBucket = out.Prefix + "_tasks"
	}
	if out.ToolBucket == "" {
		out.ToolBucket = out.Prefix + "_tools"
	}
	if out.ToolRetention <= 0 {
		out.ToolRetention = taskstate.DefaultToolRetention
	}
	if out.OwnerBucket == "" {
		out.OwnerBucket = out.TaskBucket + "_owners"
	}
	if out.SessionBucket == "" {
		out.SessionBucket = out.TaskBucket + "_sessions"
	}
	if out.SessionTTL <= 0 {
		out.SessionTTL = 24 * time.Hour
	}
	if out.Replicas <= 0 {
		out.Replicas = 1
	}
	return out
}

// Store is the NATS KV implementation of taskstate.Store and taskstate.Catalog.
type Store struct {
	js    jetstream.JetStream
	tasks jetstream.KeyValue
	tools jetstream.KeyValue
	// owners indexes tasks by owner; sessions holds 2025-11-25 sessions.
	owners, sessions jetstream.KeyValue
	blobs            jetstream.Stream // payloads out of line (blob.go)
	ownerStream      jetstream.Stream // the owner bucket's stream: the active index (active.go)
	reindex          onceFlag         // the active index was completed from the records (active.go)
	cfg              Config
	subj             string // "$KV.<bucket>." prefix for direct CAS+TTL publishes

	mu      sync.Mutex
	catalog *catalogCache
	closed  chan struct{}
}

var (
	_ taskstate.Store    = (*Store)(nil)
	_ taskstate.Catalog  = (*Store)(nil)
	_ taskstate.Sessions = (*Store)(nil)

	_ taskstate.ActiveCounter = (*Store)(nil)
	_ taskstate.Leaser        = (*Store)(nil)
	_ taskstate.Outbox        = (*Store)(nil) // completion webhooks: outbox.go
)

// New creates (or updates) the buckets and returns the store. It refuses
// buckets that exist with another storage type than cfg asks for
// (*jsdurable.StorageMismatchError): JetStream cannot change it.
func New(ctx context.Context, js jetstream.JetStream, cfg *Config) (*Store, error) {
	c := cfg.withDefaults()
	storage := jsdurable.Storage(c.Memory)
	s := &Store{js: js, cfg: c, subj: "$KV." + c.TaskBucket + ".", closed: make(chan struct{})}
	buckets := []struct {
		kv   *jetstream.KeyValue
		what string
		cfg  jetstream.KeyValueConfig
	}{
		// No TTL (MaxAge) on the task bucket: only a terminal record
		// carries a per-message TTL (Update), so an active record never
		// expires, however old it is.
		{&s.tasks, "task", jetstream.KeyValueConfig{
			Bucket:         c.TaskBucket,
			Description:    "mcpqueue task records",
			LimitMarkerTTL: time.Minute, // enables per-message TTL on terminal records
		}},
		{&s.tools, "tool", jetstream.KeyValueConfig{
			Bucket:         c.ToolBucket,
			Description:    "mcpqueue tool catalog (refreshed by workers, kept for the retention after the last refresh)",
			TTL:            c.ToolRetention,
			LimitMarkerTTL: time.Minute, // expiries reach watchers as delete markers
		}},
		{&s.owners, "owner", jetstream.KeyValueConfig{ // entries expire with their terminal record
			Bucket:         c.OwnerBucket,
			Description:    "mcpqueue tasks by owner (tasks/list)",
			LimitMarkerTTL: time.Minute,
		}},
		{&s.sessions, "session", jetstream.KeyValueConfig{
			Bucket:      c.SessionBucket,
			Description: "mcpqueue 2025-11-25 sessions",
			TTL:         c.SessionTTL,
		}},
	}
	for _, b := range buckets {
		b.cfg.History, b.cfg.Storage, b.cfg.Replicas = 1, storage, c.Replicas
		var kv jetstream.KeyValue
		err := jsdurable.Retry(ctx, func(ctx context.Context) (err error) {
			if err := jsdurable.CheckStorage(ctx, js, "KV_"+b.cfg.Bucket, storage); err != nil {
				return err
			}
			kv, err = ensureBucket(ctx, js, b.cfg)
			return err
		})
		if err != nil {
			return nil, fmt.Errorf("natskv: %s bucket %q: %w", b.what, b.cfg.Bucket, jsdurable.ExplainReplicas(err, c.Replicas))
		}
		*b.kv = kv
	}
	st, err := js.Stream(ctx, "KV_"+c.OwnerBucket)
	if err != nil {
		return nil, fmt.Errorf("natskv: owner bucket %q: %w", c.OwnerBucket, err)
	}
	s.ownerStream = st
	if err := s.ensureBlobs(ctx, storage); err != nil {
		return nil, fmt.Errorf("natskv: blob stream %q: %w", s.blobStream(), jsdurable.ExplainReplicas(err, c.Replicas))
	}
	return s, nil
}

// ensureBucket binds the bucket cfg describes, creating or updating it only
// when it is missing or differs. Every process of a system calls it as it
// starts, often at the same moment (a deployment rolling out, a fleet
// scaling up): an update they all make is a replicated configuration change
// each, and on a clustered bucket CreateOrUpdateKeyValue also turns direct
// gets back on, which leaderReads then turns off again — processes starting
// together kept undoing each other until their connect deadline.
func ensureBucket(ctx context.Context, js jetstream.JetStream, cfg jetstream.KeyValueConfig) (jetstream.KeyValue, error) {
	st, err := js.Stream(ctx, "KV_"+cfg.Bucket)
	if err == nil && bucketMatches(st.CachedInfo().Config, cfg) {
		if cfg.Replicas > 1 && st.CachedInfo().Config.AllowDirect {
			return leaderReads(ctx, js, cfg.Bucket)
		}
		return js.KeyValue(ctx, cfg.Bucket)
	}
	if err != nil && !errors.Is(err, jetstream.ErrStreamNotFound) {
		return nil, err
	}
	kv, err := js.CreateOrUpdateKeyValue(ctx, cfg)
	if err != nil {
		return nil, err
	}
	if cfg.Replicas > 1 {
		return leaderReads(ctx, js, cfg.Bucket)
	}
	return kv, nil
}

// bucketMatches reports whether an existing bucket's stream already has
// what cfg asks for (direct gets aside: leaderReads owns that setting).
func bucketMatches(have jetstream.StreamConfig, want jetstream.KeyValueConfig) bool {
	return have.Replicas == max(want.Replicas, 1) && have.Storage == want.Storage &&
		have.MaxAge == want.TTL && have.MaxMsgsPerSubject == int64(max(want.History, 1)) &&
		have.SubjectDeleteMarkerTTL == want.LimitMarkerTTL && have.Description == want.Description
}

// leaderReads turns direct gets off on a replicated bucket and binds it
// again. A KV bucket answers Get with direct gets, which any replica serves,
// and a follower may not have applied a write the leader has already
// acknowledged: an api reading a task another api just created, or a record
// a worker just finished, could find nothing or an older version. With direct
// gets off, every Get goes to the stream's leader, which has all it
// acknowledged. (CreateOrUpdateKeyValue turns them on again; every process
// turns them off again as it starts, and Gets of a store bound this way go to
// the leader either way.)
func leaderReads(ctx context.Context, js jetstream.JetStream, bucket string) (jetstream.KeyValue, error) {
	// Another process starting at the same time may turn direct gets on
	// again (its CreateOrUpdateKeyValue) between our update and our bind;
	// the bound store keeps the setting it saw, so bind until it saw off.
	for range 10 {
		st, err := js.Stream(ctx, "KV_"+bucket)
		if err != nil {
			return nil, err
		}
		if cfg := st.CachedInfo().Config; cfg.AllowDirect {
			cfg.AllowDirect = false
			if _, err := js.UpdateStream(ctx, cfg); err != nil {
				return nil, fmt.Errorf("turning direct gets off: %w", err)
			}
		}
		kv, err := js.KeyValue(ctx, bucket)
		if err != nil {
			return nil, err
		}
		if st, err := js.Stream(ctx, "KV_"+bucket); err == nil && !st.CachedInfo().Config.AllowDirect {
			return kv, nil // off before and after the bind
		}
	}
	return nil, fmt.Errorf("direct gets keep being turned back on (other processes starting?)")
}

// Close stops the store's watchers.
func (s *Store) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	select {
	case <-s.closed:
	default:
		close(s.closed)
	}
	return nil
}

// Create stores a new record (ErrExists if the id is taken): taskstate.Store.
//
// The record and its index entries (active.go, index.go) are published in
// one flight, each message without waiting for another's ack, so a create
// costs one round trip, not two. A record whose entries could not be
// written is taken back (purged) before Create fails, so a stored task is
// always listable and, while active, in the active index; a process that
// dies between the acks can leave a record without its entries, which the
// first active Scan of every Store writes (indexActive).
func (s *Store) Create(ctx context.Context, t *taskstate.Task) error {
	if !taskstate.ValidID(t.ID) {
		return fmt.Errorf("natskv: create: invalid task id %q", t.ID)
	}
	b, err := taskstate.Encode(t)
	if err != nil {
		return err
	}
	// Its record gets no TTL here, so neither do the entries.
	entries := s.newEntries(t)
	rec := &nats.Msg{Subject: s.subj + t.ID, Data: b}
	acks := s.publishTogether(ctx, append(entries, rec), len(entries))
	rev, err := acks[len(entries)].seq, acks[len(entries)].err
	switch {
	case errors.Is(err, nats.ErrMaxPayload):
		return fmt.Errorf("natskv: create %s: a record of %d bytes: %w (%w)", t.ID, len(b), taskstate.ErrTooLarge, err)
	case wrongLastSequence(err):
		// The key has a message: a record, or the marker of one deleted
		// or expired, over which the bucket's own Create writes.
		rev, err = s.tasks.Create(ctx, t.ID, b)
		if errors.Is(err, jetstream.ErrKeyExists) {
			return taskstate.ErrExists
		}
	}
	if err != nil {
		return fmt.Errorf("natskv: create %s: %w", t.ID, err)
	}
	if err := firstErr(acks[:len(entries)]); err != nil {
		// The record is stored and an entry is not: take the record back.
		if perr := s.tasks.Purge(ctx, t.ID, jetstream.LastRevision(rev), jetstream.PurgeTTL(time.Minute)); perr != nil {
			err = fmt.Errorf("%w (and taking the record back: %w)", err, perr)
		}
		return fmt.Errorf("natskv: index %s: %w", t.ID, err)
	}
	t.Revision = rev
	s.announce(t.ID, rev, b)
	return nil
}

// Get reads the record (ErrNotFound if absent): taskstate.Store.
func (s *Store) Get(ctx context.Context, id string) (*taskstate.Task, error) {
	e, err := getByID(ctx, s.tasks, id, "get")
	if err != nil {
		return nil, err
	}
	return taskstate.Decode(e.Value(), e.Revision())
}

// getByID reads the entry of id in kv: ErrNotFound when id is malformed or
// the entry absent or deleted; other errors name the operation (what).
func getByID(ctx context.Context, kv jetstream.KeyValue, id, what string) (jetstream.KeyValueEntry, error) {
	if !taskstate.ValidID(id) {
		return nil, taskstate.ErrNotFound
	}
	e, err := kv.Get(ctx, id)
	if errors.Is(err, jetstream.ErrKeyNotFound) || errors.Is(err, jetstream.ErrKeyDeleted) {
		return nil, taskstate.ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("natskv: %s %s: %w", what, id, err)
	}
	return e, nil
}

// Update writes the record if its Revision is still the stored one (ErrConflict otherwise): taskstate.Store.
func (s *Store) Update(ctx context.Context, t *taskstate.Task) error {
	if !taskstate.ValidID(t.ID) {
		return taskstate.ErrNotFound
	}
	b, err := taskstate.Encode(t)
	if err != nil {
		return err
	}
	if t.Revision == 0 {
		// Revision 0 would tell JetStream "no message yet on this subject",
		// turning Update into a create. No stored record has revision 0.
		if _, err := s.Get(ctx, t.ID); err != nil {
			return err
		}
		return taskstate.ErrConflict
	}
	opts := []jetstream.PublishOpt{jetstream.WithExpectLastSequencePerSubject(t.Revision)}
	if t.Status.Terminal() && t.TTLMs > 0 {
		ttl := t.TTL()
		if ttl < time.Second {
			ttl = time.Second // the smallest TTL JetStream accepts
		}
		opts = append(opts, jetstream.WithMsgTTL(ttl))
	}
	ack, err := s.js.PublishMsg(ctx, &nats.Msg{Subject: s.subj + t.ID, Data: b}, opts...)
	if wrongLastSequence(err) {
		return taskstate.ErrConflict
	}
	if errors.Is(err, nats.ErrMaxPayload) {
		return fmt.Errorf("natskv: update %s: a record of %d bytes: %w (%w)", t.ID, len(b), taskstate.ErrTooLarge, err)
	}
	if err != nil {
		return fmt.Errorf("natskv: update %s: %w", t.ID, err)
	}
	t.Revision = ack.Sequence
	s.announce(t.ID, t.Revision, b)
	if t.Status.Terminal() {
		s.indexTerminal(ctx, t)
	}
	return nil
}

// Watch implements taskstate.Store: it follows the record's announcements
// (notify.go), after reading it.
func (s *Store) Watch(ctx context.Context, id string) (<-chan *taskstate.Task, error) {
	return taskstate.WatchRecord(ctx, s, id, true, s.closed, s.subscribe, readUpdate)
}

// Follow implements taskstate.Store on the same announcements.
func (s *Store) Follow(ctx context.Context, id string) (<-chan *taskstate.Task, error) {
	return taskstate.WatchRecord(ctx, s, id, false, s.closed, s.subscribe, readUpdate)
}

// readUpdate passes on a version the subscription handed over; a nil one
// (the record was deleted) ends the watch.
func readUpdate(_ context.Context, _ string, t *taskstate.Task, _ uint64) (*taskstate.Task, bool) {
	return t, t != nil
}

// started returns *p, which start makes under s.mu the first time it is
// asked for (and again after a failed start).
func started[T any](s *Store, p **T, start func() (*T, error)) (*T, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if *p == nil {
		v, err := start()
		if err != nil {
			return nil, err
		}
		*p = v
	}
	return *p, nil
}

// watchKV runs a watcher of kv, handing fn each entry (nil: the initial
// values have all arrived), until closed closes or stop is called.
func watchKV(kv jetstream.KeyValue, closed <-chan struct{}, fn func(jetstream.KeyValueEntry), opts ...jetstream.WatchOpt) (stop func(), err error) {
	wctx, cancel := context.WithCancel(context.Background())
	w, err := kv.WatchAll(wctx, opts...)
	if err != nil {
		cancel()
		return nil, err
	}
	go func() {
		defer cancel()
		for {
			select {
			case <-closed:
				_ = w.Stop()
				return
			case e, ok := <-w.Updates():
				if !ok {
					return
				}
				fn(e)
			}
		}
	}()
	return cancel, nil
}

// wrongLastSequence reports whether err is JetStream refusing a write that
// expected another last sequence on its subject (a lost compare-and-set);
// replicated streams answer with a code of their own (10164).
func wrongLastSequence(err error) bool {
	var apiErr *jetstream.APIError
	return errors.As(err, &apiErr) && (apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequence ||
		apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequenceConstant)
}
