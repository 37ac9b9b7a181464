package backend

import (
	"github.com/mcpqueue/mcpqueue/broker/natsbroker"

	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"

	"github.com/mcpqueue/mcpqueue/internal/jsdurable"
	"github.com/mcpqueue/mcpqueue/internal/natstest"
	"github.com/mcpqueue/mcpqueue/internal/redistest"
)

// natsOptions are the options of a process on srv whose streams and buckets
// are named after a fresh prefix.
func natsOptions(t *testing.T, srv *natstest.Server, storage string) *Options {
	return &Options{NATSURL: srv.URL(), Prefix: strings.ToLower(natstest.Name(t)), NATSStorage: storage}
}

func connectNATS(t *testing.T, o *Options) (*Backend, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	b, err := o.ConnectNATS(ctx, t.Name(), zerolog.Nop())
	if err == nil {
		t.Cleanup(b.Close)
	}
	return b, err
}

// streamsOf names the job stream and the streams behind the KV buckets.
func streamsOf(o *Options) []string {
	return []string{natsbroker.NamesFor(o.Prefix).Stream, "KV_" + o.Prefix + "_tasks", "KV_" + o.Prefix + "_tools",
		"KV_" + o.Prefix + "_tasks_owners", "KV_" + o.Prefix + "_tasks_sessions"}
}

func streamConfig(t *testing.T, js jetstream.JetStream, name string) jetstream.StreamConfig {
	t.Helper()
	st, err := js.Stream(t.Context(), name)
	if err != nil {
		t.Fatalf("stream %s: %v", name, err)
	}
	return st.CachedInfo().Config
}

// --nats-storage reaches the job stream and every bucket, as JetStream
// reports it; task records and the owner index carry no bucket-wide TTL.
func TestNATSStorageFlag(t *testing.T) {
	t.Parallel()
	srv := natstest.Start(t)
	_, js := srv.Connect(t)
	for _, c := range []struct {
		flag string
		want jetstream.StorageType
	}{{"file", jetstream.FileStorage}, {"memory", jetstream.MemoryStorage}, {"", jetstream.FileStorage}} {
		o := natsOptions(t, srv, c.flag)
		if _, err := connectNATS(t, o); err != nil {
			t.Fatalf("--nats-storage %q: %v", c.flag, err)
		}
		for _, name := range streamsOf(o) {
			cfg := streamConfig(t, js, name)
			if cfg.Storage != c.want || cfg.Replicas != 1 {
				t.Errorf("--nats-storage %q: stream %s has %s storage, %d replicas; want %s, 1", c.flag, name, cfg.Storage, cfg.Replicas, c.want)
			}
			if strings.HasSuffix(name, "_tasks") || strings.HasSuffix(name, "_owners") {
				if cfg.MaxAge != 0 {
					t.Errorf("stream %s has MaxAge %s: active records would expire", name, cfg.MaxAge)
				}
			}
		}
	}
}

// A stream or bucket that exists with the other storage type is refused
// with an error naming it and both settings, and is left as it was.
func TestNATSStorageMismatch(t *testing.T) {
	t.Parallel()
	srv := natstest.Start(t)
	_, js := srv.Connect(t)
	o := natsOptions(t, srv, "memory")
	b, err := connectNATS(t, o)
	if err != nil {
		t.Fatal(err)
	}
	b.Close()
	jobs, tasks := streamsOf(o)[0], streamsOf(o)[1]

	o.NATSStorage = "file"
	_, err = connectNATS(t, o)
	var mismatch *jsdurable.StorageMismatchError
	if !errors.As(err, &mismatch) || mismatch.Stream != jobs {
		t.Fatalf("file storage over a memory job stream: %v; want a StorageMismatchError for %s", err, jobs)
	}
	for _, want := range []string{jobs, "exists with memory storage", "file storage is configured", "--nats-storage memory"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
	t.Log(err)
	if cfg := streamConfig(t, js, jobs); cfg.Storage != jetstream.MemoryStorage {
		t.Fatalf("refused stream changed to %s storage", cfg.Storage)
	}

	// Without the job stream, the task bucket is the first mismatch.
	if err := js.DeleteStream(t.Context(), jobs); err != nil {
		t.Fatal(err)
	}
	_, err = connectNATS(t, o)
	if !errors.As(err, &mismatch) || mismatch.Stream != tasks || !strings.Contains(err.Error(), `task bucket "`+o.Prefix+`_tasks"`) {
		t.Fatalf("file storage over memory buckets: %v; want a StorageMismatchError for %s", err, tasks)
	}
	if cfg := streamConfig(t, js, tasks); cfg.Storage != jetstream.MemoryStorage {
		t.Fatalf("refused bucket changed to %s storage", cfg.Storage)
	}
}

// Replicas a single server cannot hold fail with an error saying so; the
// stream is not created.
func TestNATSReplicasNeedACluster(t *testing.T) {
	t.Parallel()
	srv := natstest.Start(t)
	_, js := srv.Connect(t)
	o := natsOptions(t, srv, "file")
	o.NATSReplicas = 3
	_, err := connectNATS(t, o)
	if err == nil || !strings.Contains(err.Error(), "3 replicas need a JetStream cluster, and this NATS server is not clustered") {
		t.Fatalf("3 replicas on one server: %v", err)
	}
	t.Log(err)
	if _, err := js.Stream(t.Context(), streamsOf(o)[0]); !errors.Is(err, jetstream.ErrStreamNotFound) {
		t.Fatalf("job stream after the refusal: %v; want none", err)
	}
}

// Bad durability flags are refused before anything touches NATS.
func TestNATSDurabilityFlags(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		storage  string
		replicas int
		require  bool
		want     string // "" = accepted
	}{
		{"file", 1, true, ""},
		{"", 0, false, ""},
		{"memory", 3, false, ""},
		{"disk", 1, false, `--nats-storage "disk": want file or memory`},
		{"file", -1, false, "--nats-replicas -1: want 1 to 5"},
		{"file", 6, false, "--nats-replicas 6: want 1 to 5"},
		{"memory", 1, true, "--require-durable: --nats-storage is memory"},
	} {
		o := &Options{NATSStorage: c.storage, NATSReplicas: c.replicas, RequireDurable: c.require}
		_, err := o.natsDurability()
		if c.want == "" && err != nil || c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)) {
			t.Errorf("storage %q replicas %d require %v: %v; want %q", c.storage, c.replicas, c.require, err, c.want)
		}
	}
}

func connectRedis(t *testing.T, url string, require bool) error {
	t.Helper()
	o := &Options{RedisURL: url, Prefix: redistest.Name(t), RequireDurable: require}
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	b, err := o.ConnectRedis(ctx, t.Name(), zerolog.Nop())
	if err == nil {
		b.Close()
	}
	return err
}

// The shared test Redis runs without an append-only file: it is accepted
// with a warning, and refused under --require-durable.
func TestRequireDurableRedisWithoutAOF(t *testing.T) {
	t.Parallel()
	c := redistest.Client(t)
	if aof, err := c.ConfigGet(t.Context(), "appendonly").Result(); err != nil || aof["appendonly"] != "no" {
		t.Skipf("the test Redis has appendonly %v (%v); this test needs it off", aof, err)
	}
	url := "redis://" + c.Options().Addr
	if err := connectRedis(t, url, false); err != nil {
		t.Fatalf("without --require-durable: %v", err)
	}
	err := connectRedis(t, url, true)
	if err == nil || !strings.Contains(err.Error(), "--require-durable: Redis has appendonly no") || !strings.Contains(err.Error(), "set appendonly yes") {
		t.Fatalf("with --require-durable: %v", err)
	}
}

// A Redis of our own with an append-only file passes --require-durable;
// the same with an evicting policy does not.
func TestRequireDurableRedisWithAOF(t *testing.T) {
	t.Parallel()
	url := redistest.Start(t, "--appendonly", "yes", "--appendfsync", "everysec").URL()
	if err := connectRedis(t, url, true); err != nil {
		t.Fatalf("appendonly yes, noeviction: %v", err)
	}
	url = redistest.Start(t, "--appendonly", "yes", "--maxmemory-policy", "allkeys-lru").URL()
	if err := connectRedis(t, url, true); err == nil || !strings.Contains(err.Error(), "maxmemory-policy allkeys-lru") {
		t.Fatalf("appendonly yes, allkeys-lru: %v", err)
	}
}
