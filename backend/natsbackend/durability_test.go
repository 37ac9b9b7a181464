package natsbackend

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/mcpqueue/mcpqueue/backend"
	"github.com/mcpqueue/mcpqueue/broker/natsbroker"
	"github.com/mcpqueue/mcpqueue/internal/jsdurable"
	"github.com/mcpqueue/mcpqueue/internal/natstest"
)

// natsOptions are the options of a process on srv whose streams and buckets
// are named after a fresh prefix.
func natsOptions(t *testing.T, srv *natstest.Server, storage string) *Options {
	return &Options{URL: srv.URL(), Prefix: strings.ToLower(natstest.Name(t)), Storage: storage}
}

func connectNATS(t *testing.T, o *Options) (*backend.Backend, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	b, err := Connect(ctx, t.Name(), o)
	if err == nil {
		t.Cleanup(func() { _ = b.Close() })
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

	o.Storage = "file"
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
	o.Replicas = 3
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
		o := &Options{Storage: c.storage, Replicas: c.replicas, RequireDurable: c.require}
		_, err := o.durability()
		if c.want == "" && err != nil || c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)) {
			t.Errorf("storage %q replicas %d require %v: %v; want %q", c.storage, c.replicas, c.require, err, c.want)
		}
	}
}
