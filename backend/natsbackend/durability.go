package natsbackend

import (
	"errors"
	"fmt"

	"github.com/mcpqueue/mcpqueue/internal/jsdurable"
)

// durability checks --nats-storage, --nats-replicas and
// --require-durable before anything touches NATS, and reports whether the
// stream and buckets go to memory.
func (o *Options) durability() (memory bool, err error) {
	switch o.Storage {
	case "file", "":
	case "memory":
		memory = true
	default:
		return false, fmt.Errorf("natsbackend: --nats-storage %q: want file or memory", o.Storage)
	}
	if o.Replicas == 0 {
		o.Replicas = 1
	}
	if o.Replicas < 1 || o.Replicas > 5 {
		return false, fmt.Errorf("natsbackend: --nats-replicas %d: want 1 to 5 (JetStream's limit); 3 on a 3-node cluster", o.Replicas)
	}
	if memory && o.RequireDurable {
		return false, errors.New("natsbackend: --require-durable: --nats-storage is memory, so a NATS restart loses every task and queued job; use --nats-storage file (the default)")
	}
	return memory, nil
}

// storageHint names the flag that fixes a storage mismatch.
func storageHint(err error) error {
	var m *jsdurable.StorageMismatchError
	if errors.As(err, &m) {
		return fmt.Errorf("natsbackend: %w (--nats-storage %s keeps using it)", err, jsdurable.Name(m.Have))
	}
	return err
}
