// Package natsbackend connects a process to NATS JetStream: Connect returns
// a backend.Backend whose queue is a JetStream stream (natsbroker), whose bus
// is core NATS, and whose task store and tool catalog are KV buckets
// (natskv), every name derived from Options.Prefix as api derives it.
//
// The binaries fill Options from their flags (--nats, --nats-creds, …,
// --nats-storage, --nats-replicas: docs/configuration.md); the errors name
// those flags.
package natsbackend

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"

	"github.com/mcpqueue/mcpqueue/backend"
	"github.com/mcpqueue/mcpqueue/broker/natsbroker"
	"github.com/mcpqueue/mcpqueue/internal/slogzero"
	"github.com/mcpqueue/mcpqueue/taskstate/natskv"
)

// Options say how to reach NATS and how to name and keep what lives there.
// The zero value of each field but URL is a documented default.
type Options struct {
	// URL is the NATS server (nats:// or tls://; several comma-separated).
	URL string
	// Auth is how to authenticate and secure the connection.
	Auth Auth
	// DataDir is the all-in-one api's data dir (--data-dir). With no
	// credentials in Auth and every URL on loopback, Connect authenticates
	// with the key that api generated there (DataDir/EmbeddedNKeyFile), if
	// the file exists. "": never.
	DataDir string
	// Prefix names the stream, buckets and subjects, so systems can share a
	// server. Default "mcpq".
	Prefix string
	// Storage of the job stream and the KV buckets: "file" (default) or
	// "memory" (a NATS restart loses every task). JetStream cannot change
	// it for a stream that exists.
	Storage string
	// Replicas of the stream and buckets, 1 to 5: 3 on a 3-node cluster
	// survives the loss of a node. Default 1.
	Replicas int
	// RequireDurable refuses memory storage.
	RequireDurable bool
	// ToolRetention is how long a catalog entry is kept after its last
	// refresh. Default taskstate.DefaultToolRetention.
	ToolRetention time.Duration
	// Logger gets the connection's events (reconnects, the key used);
	// Slog, when set, instead. Default: none.
	Logger zerolog.Logger
	Slog   *slog.Logger
}

// Connect connects to o.URL as name (the connection name the server
// shows), waits until the connection is up — retrying a server that is not
// there yet until ctx ends, failing at once on refused credentials or TLS —
// and creates or updates the job stream and the buckets.
func Connect(ctx context.Context, name string, o *Options) (*backend.Backend, error) {
	if o == nil || o.URL == "" {
		return nil, errors.New("natsbackend: no NATS URL (use --nats or NATS_URL)")
	}
	c := *o
	c.Logger = slogzero.Logger(o.Logger, o.Slog)
	memory, err := c.durability()
	if err != nil {
		return nil, err
	}
	nc, err := c.connect(ctx, name)
	if err != nil {
		return nil, err
	}
	b := &backend.Backend{}
	b.OnClose(func() error { drain(nc); return nil })
	js, err := jetstream.New(nc)
	if err != nil {
		_ = b.Close()
		return nil, err
	}
	bcfg := &natsbroker.Config{Prefix: c.Prefix, Memory: memory, Replicas: c.Replicas}
	q, err := natsbroker.NewQueue(ctx, js, bcfg)
	if err != nil {
		_ = b.Close()
		return nil, storageHint(err)
	}
	st, err := natskv.New(ctx, js, &natskv.Config{Prefix: c.Prefix, ToolRetention: c.ToolRetention, Memory: memory, Replicas: c.Replicas})
	if err != nil {
		_ = b.Close()
		return nil, storageHint(err)
	}
	c.Logger.Info().Str("storage", c.Storage).Int("replicas", c.Replicas).Msg("NATS job stream and buckets ready")
	b.OnClose(st.Close)
	b.Queue, b.Bus, b.Store, b.Catalog = q, natsbroker.NewBus(nc, &natsbroker.Config{Prefix: c.Prefix}), st, st
	subject := q.Names().Subject
	b.Messaging = backend.Messaging{System: "nats", Destination: func(route string) string { return subject + "." + natsbroker.Token(route) }}
	return b, nil
}

// drain drains nc and waits, at most 5 s, until the drain has closed it.
// nc.Drain returns at once; an all-in-one api shuts its embedded server
// down next, and a connection still draining then would be cut (and log a
// disconnect on a clean shutdown).
func drain(nc *nats.Conn) {
	closed := make(chan struct{})
	nc.SetClosedHandler(func(*nats.Conn) { close(closed) })
	if err := nc.Drain(); err != nil {
		nc.Close()
		return
	}
	select {
	case <-closed:
	case <-time.After(5 * time.Second):
		nc.Close()
	}
}
