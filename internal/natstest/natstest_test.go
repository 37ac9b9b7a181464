package natstest_test

import (
	"context"
	"regexp"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/mcpqueue/mcpqueue/internal/natstest"
)

func TestStartServesJetStream(t *testing.T) {
	t.Parallel()
	srv := natstest.Start(t)
	nc, js := srv.Connect(t)
	if !nc.IsConnected() {
		t.Fatalf("connection to %s not connected: %v", srv.URL(), nc.Status())
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	name := natstest.Name(t)
	kv, err := js.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: name})
	if err != nil {
		t.Fatalf("create bucket %s: %v", name, err)
	}
	if _, err := kv.Put(ctx, "k", []byte("v")); err != nil {
		t.Fatalf("put: %v", err)
	}
	// File storage lives in the test's temp dir.
	info, err := js.AccountInfo(ctx)
	if err != nil {
		t.Fatalf("account info: %v", err)
	}
	if info.Store == 0 {
		t.Errorf("account reports no file storage used after a put: %+v", info)
	}
}

func TestStartTwiceGivesTwoServers(t *testing.T) {
	t.Parallel()
	a, b := natstest.Start(t), natstest.Start(t)
	if a.URL() == b.URL() {
		t.Fatalf("two servers share URL %s", a.URL())
	}
}

func TestNameIsUniqueAndValid(t *testing.T) {
	t.Parallel()
	valid := regexp.MustCompile(`^[A-Za-z0-9_]+$`)
	seen := make(map[string]bool)
	for range 1000 {
		n := natstest.Name(t)
		if !valid.MatchString(n) {
			t.Fatalf("name %q has characters outside [A-Za-z0-9_]", n)
		}
		if len(n) > 40 {
			t.Fatalf("name %q is longer than 40 characters", n)
		}
		if seen[n] {
			t.Fatalf("name %q returned twice", n)
		}
		seen[n] = true
	}
	t.Run("sub/test with.odd*chars>", func(t *testing.T) {
		if n := natstest.Name(t); !valid.MatchString(n) {
			t.Fatalf("name %q has characters outside [A-Za-z0-9_]", n)
		}
	})
}
