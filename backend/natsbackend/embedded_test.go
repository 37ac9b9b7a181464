package natsbackend

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nkeys"

	"github.com/mcpqueue/mcpqueue/internal/natstest"
)

// A data dir key left from an all-in-one run does not stop a process from
// joining another NATS on loopback that takes no credentials.
func TestEmbeddedKeyIgnoredByOpenServer(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	kp, err := nkeys.CreateUser()
	if err != nil {
		t.Fatal(err)
	}
	seed, err := kp.Seed()
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, EmbeddedNKeyFile), seed, 0o600); err != nil {
		t.Fatal(err)
	}
	srv := natstest.StartWith(t, func(*server.Options) {})
	o := natsOptions(t, srv, "memory")
	o.DataDir = dir
	if _, err := connectNATS(t, o); err != nil {
		t.Fatalf("an open NATS with a stale data dir key: %v", err)
	}
}
