package backend

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/mcpqueue/mcpqueue/internal/jsdurable"
)

// natsDurability checks --nats-storage, --nats-replicas and
// --require-durable before anything touches NATS, and reports whether the
// stream and buckets go to memory.
func (o *Options) natsDurability() (memory bool, err error) {
	switch o.NATSStorage {
	case "file", "":
	case "memory":
		memory = true
	default:
		return false, fmt.Errorf("backend: --nats-storage %q: want file or memory", o.NATSStorage)
	}
	if o.NATSReplicas == 0 {
		o.NATSReplicas = 1
	}
	if o.NATSReplicas < 1 || o.NATSReplicas > 5 {
		return false, fmt.Errorf("backend: --nats-replicas %d: want 1 to 5 (JetStream's limit); 3 on a 3-node cluster", o.NATSReplicas)
	}
	if memory && o.RequireDurable {
		return false, errors.New("backend: --require-durable: --nats-storage is memory, so a NATS restart loses every task and queued job; use --nats-storage file (the default)")
	}
	return memory, nil
}

// storageHint names the flag that fixes a storage mismatch.
func storageHint(err error) error {
	var m *jsdurable.StorageMismatchError
	if errors.As(err, &m) {
		return fmt.Errorf("backend: %w (--nats-storage %s keeps using it)", err, jsdurable.Name(m.Have))
	}
	return err
}

// ParseSync reads --nats-sync: "" keeps the server's default (a background
// fsync every 2 minutes), "always" fsyncs every write before it is
// acknowledged, and a duration sets the background fsync interval.
func ParseSync(s string) (interval time.Duration, always bool, err error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "":
		return 0, false, nil
	case "always":
		return 0, true, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil || d <= 0 {
		return 0, false, fmt.Errorf("backend: --nats-sync %q: want a positive duration such as 1s, or always", s)
	}
	return d, false, nil
}

// SyncPromise says, for the startup log, what a sync policy keeps through a
// crash of the machine (a crash of the process alone loses nothing
// acknowledged: every write reaches the operating system first).
func SyncPromise(interval time.Duration, always bool) string {
	if always {
		return "every acknowledged write is on disk (fsync before ack): survives process, OS and power failures"
	}
	return fmt.Sprintf("survives a process crash; an OS crash or power loss may lose writes of the last %s (fsync interval; --nats-sync always to fsync each write)", interval)
}
